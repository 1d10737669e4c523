// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: checkpoint::Reader on arbitrary bytes. The reader verifies everything in its
// constructor, so any input must give either a Reader whose every record can be read back, or a
// CheckpointError; a crash, a sanitizer report, a leak or another exception type is a bug.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "flotilla/train/checkpoint_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ck = flotilla::checkpoint;
  const auto* p = reinterpret_cast<const std::byte*>(data);
  try {
    const auto r = ck::Reader::from_bytes(std::vector<std::byte>(p, p + size), "fuzz input");
    // Verified: reading every record by its own type must succeed, and by another type must throw.
    std::size_t total = 0;
    for (const auto& name : r.names()) {
      switch (r.dtype(name)) {
        case ck::DType::bytes:
          total += r.bytes(name).size();
          break;
        case ck::DType::string:
          total += r.string(name).size();
          break;
        case ck::DType::u8:
          total += r.array<std::uint8_t>(name).size();
          break;
        case ck::DType::i32:
          total += r.array<std::int32_t>(name).size();
          break;
        case ck::DType::u64:
          total += r.array<std::uint64_t>(name).size();
          if (r.count(name) == 1) total += static_cast<std::size_t>(r.u64(name) & 1);
          break;
        case ck::DType::f32:
          total += r.array<float>(name).size();
          break;
        case ck::DType::f64:
          total += r.array<double>(name).size();
          break;
      }
      try {
        (void)r.string(name);
        if (r.dtype(name) != ck::DType::string) std::abort();  // a type mismatch went unnoticed
      } catch (const flotilla::CheckpointError&) {
        if (r.dtype(name) == ck::DType::string) std::abort();
      }
    }
    if (total > size) std::abort();  // records cannot hold more than the file
    // What verifies must survive a round trip through the writer, byte for byte.
    ck::Writer w;
    for (const auto& name : r.names()) {
      switch (r.dtype(name)) {
        case ck::DType::bytes: {
          const auto b = r.bytes(name);
          w.add_bytes(name, b);
          break;
        }
        case ck::DType::string:
          w.add_string(name, r.string(name));
          break;
        case ck::DType::u8:
          w.add_array<std::uint8_t>(name, r.array<std::uint8_t>(name));
          break;
        case ck::DType::i32:
          w.add_array<std::int32_t>(name, r.array<std::int32_t>(name));
          break;
        case ck::DType::u64:
          w.add_array<std::uint64_t>(name, r.array<std::uint64_t>(name));
          break;
        case ck::DType::f32:
          w.add_array<float>(name, r.array<float>(name));
          break;
        case ck::DType::f64:
          w.add_array<double>(name, r.array<double>(name));
          break;
      }
    }
    const auto again = w.bytes();
    if (again.size() != size || !std::equal(again.begin(), again.end(), p)) std::abort();
  } catch (const flotilla::CheckpointError&) {
    // Rejected with a message: the expected outcome for almost every input.
  }
  return 0;
}
