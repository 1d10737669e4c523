// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_CTRREADER_HPP_INCLUDED
#define FLOTILLA_DATA_CTRREADER_HPP_INCLUDED
// Reading a click log example by example: a LineReader underneath, a line format on top (Criteo's
// TSV in criteo.hpp, libsvm in libsvm.hpp), and between them what every format shares: sharding
// of lines across workers, a shuffle buffer, and a policy for malformed lines.
//
// Sharding is by line: worker w of W keeps the lines with (line - 1) % W == w, so W workers that
// each stream the whole file read every line exactly once between them, with no index and no seek.
// Shuffling is a buffer of `shuffle_buffer` examples, as tf.data's shuffle does: each example handed
// out is drawn uniformly from the buffer and its place refilled from the file. The order is a
// function of (seed, epoch, worker) alone, the same on every platform.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/line_reader.hpp"

namespace flotilla::data {

/// What a reader does with a line it cannot parse.
enum class OnMalformed : std::uint8_t {
  fail,  // throw its DataError
  skip,  // count it in skipped() and go on, up to max_skipped
};

/// How Criteo's integer features become dense values.
enum class DenseTransform : std::uint8_t {
  log1p,  // log(1 + max(x, 0)), as DLRM does: counts span orders of magnitude, some are negative
  none,   // the integer as it is
};

struct ReaderOptions {
  OnMalformed on_malformed = OnMalformed::fail;
  /// With OnMalformed::skip, the most malformed lines a pass may skip; one more is an error.
  std::uint64_t max_skipped = 1000;
  std::size_t max_line_bytes = std::size_t{1} << 20;
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// This reader's shard: lines with (line - 1) % workers == worker.
  std::size_t worker = 0;
  std::size_t workers = 1;
  /// 0: examples in file order; otherwise the size of the shuffle buffer.
  std::size_t shuffle_buffer = 0;
  std::uint64_t seed = 0;
  DenseTransform dense_transform = DenseTransform::log1p;
};

namespace detail {

/// `text` for an error message: quoted, at most `max` bytes of it, with bytes outside printable
/// ASCII written as \xNN so that binary garbage stays readable and cannot break a terminal.
inline std::string quote_field(std::string_view text, std::size_t max = 40) {
  std::string s = "\"";
  const std::size_t n = std::min(text.size(), max);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      s += '\\';
      s += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7F) {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += "0123456789abcdef"[c >> 4];
      s += "0123456789abcdef"[c & 0xFU];
    }
  }
  s += '"';
  if (text.size() > max) s += " (" + std::to_string(text.size()) + " bytes, first " + std::to_string(max) + " shown)";
  return s;
}

/// The DataError for a problem at 1-based `column` of a line, at byte `offset` of the file.
[[noreturn]] inline void line_error(const std::string& file, const Line& line, std::uint64_t offset, std::size_t column,
                                    const std::string& what) {
  throw DataError(file, offset, "line " + std::to_string(line.number) + ", column " + std::to_string(column) + ": " + what);
}

/// A DataError's message without the "file (byte N): " that its constructor put in front.
inline std::string reason_of(const DataError& e) {
  const std::string prefix = e.file() + " (byte " + std::to_string(e.offset()) + "): ";
  const std::string_view all = e.what();
  return all.substr(0, prefix.size()) == prefix ? std::string(all.substr(prefix.size())) : std::string(all);
}

}  // namespace detail

/// Examples of a click-log file in one line format. `Format` provides
///   static bool parse(const Line&, const std::string& file, const ReaderOptions&, CtrExample& out);
/// which fills `out` from a line and returns true, returns false for a line that holds no example
/// (a comment), or throws DataError naming the file, line and column.
template <class Format>
class CtrReader {
 public:
  /// Opens `path` (plain or gzip). ConfigError for inconsistent options, DataError for the file.
  explicit CtrReader(std::string path, ReaderOptions options = {})
      : options_(checked(options, path)), lines_(std::move(path), line_options(options)) {
    reset(0);
  }
  /// Reads bytes in memory, which must outlive the reader; `name` is what errors call them.
  CtrReader(std::string name, std::span<const std::uint8_t> bytes, ReaderOptions options = {})
      : options_(checked(options, name)), lines_(std::move(name), bytes, line_options(options)) {
    reset(0);
  }

  /// The next example of this worker's shard, or false at the end of the pass.
  bool next(CtrExample& out) {
    if (options_.shuffle_buffer == 0) return next_in_order(out);
    if (!filled_) {
      filled_ = true;
      while (buffer_.size() < options_.shuffle_buffer) {
        buffer_.emplace_back();
        if (!next_in_order(buffer_.back())) {
          buffer_.pop_back();
          break;
        }
      }
    }
    if (buffer_.empty()) return false;
    const auto j = static_cast<std::size_t>(rng_.below(buffer_.size()));
    std::swap(out, buffer_[j]);
    if (!next_in_order(buffer_[j])) {
      std::swap(buffer_[j], buffer_.back());
      buffer_.pop_back();
    }
    return true;
  }

  /// Rewinds to the file's start for pass `epoch`: the shuffle is drawn afresh from (seed, epoch,
  /// worker), and the skipped-line count starts again from 0.
  void restart(std::uint64_t epoch) {
    lines_.rewind();
    reset(epoch);
  }

  /// Malformed lines of this shard skipped in this pass.
  std::uint64_t skipped() const noexcept { return skipped_; }
  /// Lines of the file (every shard's) read so far in this pass.
  std::uint64_t lines() const noexcept { return lines_.lines(); }
  std::uint64_t epoch() const noexcept { return epoch_; }
  /// Bytes of line and decompression buffers held (not counting the shuffle buffer's examples).
  std::size_t buffer_bytes() const noexcept { return lines_.buffer_bytes(); }
  const std::string& name() const noexcept { return lines_.name(); }
  const ReaderOptions& options() const noexcept { return options_; }

 private:
  void reset(std::uint64_t epoch) {
    epoch_ = epoch;
    skipped_ = 0;
    buffer_.clear();
    filled_ = false;
    rng_ = Generator(flotilla::detail::mix(flotilla::detail::mix(options_.seed, epoch), options_.worker));
  }

  static ReaderOptions checked(const ReaderOptions& o, const std::string& name) {
    if (o.workers == 0) throw ConfigError(name + ": workers must be at least 1");
    if (o.worker >= o.workers)
      throw ConfigError(name + ": worker " + std::to_string(o.worker) + " is not below workers = " + std::to_string(o.workers));
    return o;
  }
  static LineReaderOptions line_options(const ReaderOptions& o) { return LineReaderOptions{o.chunk_bytes, o.max_line_bytes}; }

  bool next_in_order(CtrExample& out) {
    Line line;
    while (lines_.next(line)) {
      if ((line.number - 1) % options_.workers != options_.worker) continue;
      try {
        if (line.too_long)
          detail::line_error(lines_.name(), line, line.offset, 1,
                             "longer than max_line_bytes = " + std::to_string(options_.max_line_bytes) + " bytes");
        if (Format::parse(line, lines_.name(), options_, out)) {
          out.line = line.number;
          return true;
        }
      } catch (const DataError& e) {
        if (options_.on_malformed == OnMalformed::fail) throw;
        if (++skipped_ > options_.max_skipped)
          throw DataError(e.file(), e.offset(),
                          std::to_string(skipped_) + (skipped_ == 1 ? " malformed line" : " malformed lines") +
                              " skipped, more than max_skipped = " +
                              std::to_string(options_.max_skipped) + " allows; the last: " + detail::reason_of(e));
      }
    }
    return false;
  }

  ReaderOptions options_;
  LineReader lines_;
  std::uint64_t epoch_ = 0;
  std::uint64_t skipped_ = 0;
  std::vector<CtrExample> buffer_;
  bool filled_ = false;
  Generator rng_;
};

/// Every example of one shard of the file at `path`, in the order a reader gives them in epoch 0.
template <class Format>
std::vector<CtrExample> read_ctr_file(const std::string& path, const ReaderOptions& options = {}) {
  CtrReader<Format> reader(path, options);
  std::vector<CtrExample> examples;
  CtrExample e;
  while (reader.next(e)) examples.push_back(e);
  return examples;
}

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_CTRREADER_HPP_INCLUDED
