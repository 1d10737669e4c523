// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the libsvm reader (and beneath it the line reader and, for input starting
// with the gzip magic bytes, the streaming gzip decoder) on arbitrary bytes. Every line either
// parses into a well-formed example, is a comment, or a flotilla::Error says why; a crash, a
// sanitizer report, a leak or another exception type is a bug. Each input is read twice: failing
// on the first malformed line with tiny chunks, and skipping malformed lines, shuffled.
//
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude \
//       tests/fuzz/libsvm_reader.cpp -o /tmp/lr && /tmp/lr -max_total_time=60 tests/fuzz/corpus/libsvm_reader
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "flotilla/data/libsvm.hpp"

namespace {

namespace data = flotilla::data;

void check(const data::CtrExample& e) {
  if (e.label != 0.0F && e.label != 1.0F) std::abort();
  if (!e.dense.empty() || e.fields() != 1) std::abort();
  if (e.offsets[0] != 0 || e.offsets[1] != e.ids.size() || e.values.size() != e.ids.size()) std::abort();
  for (const float v : e.values)
    if (!std::isfinite(v)) std::abort();
}

void read(std::span<const std::uint8_t> bytes, const data::ReaderOptions& options) {
  try {
    data::LibsvmReader reader("fuzz input", bytes, options);
    data::CtrExample e;
    std::uint64_t last = 0;
    while (reader.lines() < 20000 && reader.next(e)) {
      check(e);
      if (e.line > reader.lines() || (options.shuffle_buffer == 0 && e.line <= last)) std::abort();
      last = e.line;
    }
    if (reader.skipped() > options.max_skipped) std::abort();
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  data::ReaderOptions strict;
  strict.chunk_bytes = 5;
  strict.max_line_bytes = 4096;
  read(bytes, strict);

  data::ReaderOptions lenient;
  lenient.on_malformed = data::OnMalformed::skip;
  lenient.max_skipped = 100;
  lenient.chunk_bytes = 37;
  lenient.max_line_bytes = 200;
  lenient.shuffle_buffer = 3;
  lenient.seed = size;
  read(bytes, lenient);
  return 0;
}
