// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// libFuzzer harness: the Criteo reader (and beneath it the line reader and, for input starting
// with the gzip magic bytes, the streaming gzip decoder) on arbitrary bytes. Every line either
// parses into a well-formed example or a flotilla::Error says why; a crash, a sanitizer report, a
// leak or another exception type is a bug. Each input is read twice: failing on the first
// malformed line with tiny chunks, and skipping malformed lines as one of two shuffled shards.
// gzip input is also decompressed by both decoders, the streaming one and gunzip(), which must
// agree: the same bytes, or both an error.
//
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude \
//       tests/fuzz/criteo_reader.cpp -o /tmp/cr && /tmp/cr -max_total_time=60 tests/fuzz/corpus/criteo_reader
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "flotilla/data/criteo.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/gzip_stream.hpp"

namespace {

namespace data = flotilla::data;

void check(const data::CtrExample& e) {
  if (e.label != 0.0F && e.label != 1.0F) std::abort();
  if (e.dense.size() != data::criteo_dense_features || e.fields() != data::criteo_categorical_fields) std::abort();
  if (e.offsets.front() != 0 || e.offsets.back() != e.ids.size() || !e.values.empty()) std::abort();
  for (std::size_t f = 0; f < e.fields(); ++f)
    if (e.offsets[f + 1] < e.offsets[f] || e.field_ids(f).size() > 1) std::abort();
  for (const auto id : e.ids)
    if (id > 0xFFFFFFFFU) std::abort();
  for (const float x : e.dense)
    if (!std::isfinite(x)) std::abort();
}

void read(std::span<const std::uint8_t> bytes, const data::ReaderOptions& options) {
  try {
    data::CriteoReader reader("fuzz input", bytes, options);
    data::CtrExample e;
    std::uint64_t last = 0;
    // A gzip bomb may inflate to millions of lines: a few thousand say as much.
    while (reader.lines() < 20000 && reader.next(e)) {
      check(e);
      if (e.line > reader.lines() || (options.shuffle_buffer == 0 && e.line <= last)) std::abort();
      if ((e.line - 1) % options.workers != options.worker) std::abort();
      last = e.line;
    }
    if (reader.skipped() > options.max_skipped) std::abort();
  } catch (const flotilla::Error&) {
    // Rejected with a message.
  }
}

void compare_decoders(std::span<const std::uint8_t> bytes) {
  std::vector<std::uint8_t> whole;
  bool whole_ok = true;
  try {
    whole = data::gunzip(bytes, "fuzz input", std::size_t{4} << 20);
  } catch (const flotilla::DataError& e) {
    // Past the cap the stream, which has none, may go on: nothing to compare.
    if (std::string(e.what()).find("exceeds the maximum") != std::string::npos) return;
    whole_ok = false;
  }
  std::vector<std::uint8_t> streamed;
  bool stream_ok = true;
  try {
    data::GzipStream stream(bytes, "fuzz input", 1000);
    const std::size_t held = stream.buffer_bytes();
    std::vector<std::uint8_t> buf(777);
    while (const std::size_t n = stream.read(buf)) {
      streamed.insert(streamed.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
      if (stream.buffer_bytes() != held || streamed.size() > (std::size_t{4} << 20)) std::abort();
    }
  } catch (const flotilla::DataError&) {
    stream_ok = false;
  }
  if (whole_ok != stream_ok || (whole_ok && whole != streamed)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  if (data::is_gzip(bytes)) compare_decoders(bytes);
  data::ReaderOptions strict;
  strict.chunk_bytes = 7;
  strict.max_line_bytes = 4096;
  strict.dense_transform = data::DenseTransform::none;
  read(bytes, strict);

  data::ReaderOptions lenient;
  lenient.on_malformed = data::OnMalformed::skip;
  lenient.max_skipped = 100;
  lenient.chunk_bytes = 61;
  lenient.max_line_bytes = 300;
  lenient.workers = 2;
  lenient.worker = 1;
  lenient.shuffle_buffer = 5;
  lenient.seed = size;
  read(bytes, lenient);
  return 0;
}
