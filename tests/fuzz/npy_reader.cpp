// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the .npy reader, and for input starting with "PK" the .npz reader (zip
// directory, CRC-32, and through it the DEFLATE decoder), on arbitrary bytes. Either the bytes
// parse, every value converts and a data set builds from the arrays, or a flotilla::Error says
// why; a crash, a sanitizer report, a leak or another exception type is a bug. Members are capped
// at 4 MiB inflated, so a small input cannot make the fuzzer run out of memory legitimately.
//
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -isystem /usr/include/eigen3 \
//       tests/fuzz/npy_reader.cpp -o /tmp/nr && /tmp/nr -max_total_time=60 tests/fuzz/corpus/npy_reader
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "flotilla/data/npy.hpp"
#include "flotilla/data/npz.hpp"

namespace {

namespace data = flotilla::data;

void check(const data::NpyArray& a) {
  std::size_t product = 1;
  for (const auto d : a.shape()) product *= d;
  if (product != a.count()) std::abort();
  const std::vector<double> values = a.values<double>();
  if (values.size() != a.count()) std::abort();
  if (a.count() > 0 && a.offset_of(a.count() - 1) + data::npy_type_size(a.type()) > a.data_offset() + a.count() * data::npy_type_size(a.type()))
    std::abort();
  for (const auto kind : {flotilla::TargetKind::labels, flotilla::TargetKind::values}) {
    try {
      data::ArrayDatasetOptions options;
      options.kind = kind;
      const auto d = data::detail::dataset_from_arrays<float>(a, a, options);
      d.validate();
    } catch (const flotilla::Error&) {
      // Not a data set: rejected with a message.
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  constexpr std::size_t max_member = std::size_t{4} << 20;
  try {
    if (size >= 2 && bytes[0] == 'P' && bytes[1] == 'K') {
      const auto archive = data::parse_npz(std::vector<std::uint8_t>(bytes, bytes + size), "fuzz input");
      for (const auto& m : archive.members()) {
        try {
          check(archive.array(m.name, max_member));
        } catch (const flotilla::Error&) {
          // A bad member: rejected with a message; the others are still read.
        }
      }
    } else {
      check(data::parse_npy(std::vector<std::uint8_t>(bytes, bytes + size), "fuzz input"));
    }
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
  return 0;
}
