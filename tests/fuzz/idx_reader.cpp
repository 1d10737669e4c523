// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the IDX reader (and, through it, the gzip decoder) on arbitrary bytes. Either
// the bytes parse, and every value converts, or a flotilla::Error says why; a crash, a sanitizer
// report, a leak or another exception type is a bug. Decompressed output is capped at 4 MiB, so a
// small input cannot make the fuzzer run out of memory legitimately; within that, a compressed
// input is also stopped at the size its IDX header announces (the seed bomb.idx.gz announces 10
// bytes and inflates to 1 MiB).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "flotilla/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto f = flotilla::data::parse_idx(std::vector<std::uint8_t>(data, data + size), "fuzz input", std::size_t{4} << 20);
    std::size_t product = 1;
    for (const auto d : f.dims()) product *= d;
    if (product != f.count() || f.raw().size() != f.count() * flotilla::data::idx_type_size(f.type())) std::abort();
    std::vector<double> values(f.count());
    f.copy_to(std::span<double>(values));
    if (!values.empty() && f.type() == flotilla::data::IdxType::u8 && !(values[0] >= 0 && values[0] <= 255)) std::abort();
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
  return 0;
}
