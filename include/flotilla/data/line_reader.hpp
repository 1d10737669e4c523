// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_LINEREADER_HPP_INCLUDED
#define FLOTILLA_DATA_LINEREADER_HPP_INCLUDED
// Lines of a text file, plain or gzip-compressed (told apart by the magic bytes 1f 8b, not by the
// name), read a chunk at a time: memory is one chunk plus the longest line allowed (plus, for gzip,
// the decompressor's window), however large the file.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/gzip_stream.hpp"

namespace flotilla::data {

struct LineReaderOptions {
  /// Bytes read (or decompressed) from the file at a time.
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// Longest line accepted, without its newline; a longer one comes back marked too_long.
  std::size_t max_line_bytes = std::size_t{1} << 20;
};

/// One line, without its '\n' (a '\r' before it is left in place for the parser to judge).
struct Line {
  std::string_view text;      // valid until the next call to next(); empty when too_long
  std::uint64_t number = 0;   // 1-based
  std::uint64_t offset = 0;   // byte offset of its first byte in the (decompressed) file
  bool too_long = false;      // longer than max_line_bytes: its bytes are skipped, not returned
};

class LineReader {
 public:
  /// Opens the file at `path`; DataError if it cannot be opened or read.
  explicit LineReader(std::string path, LineReaderOptions options = {}) : name_(std::move(path)), options_(options) {
    check_options();
    open();
  }
  /// Reads bytes in memory (plain or gzip), which must outlive the reader; `name` is what errors
  /// call them.
  LineReader(std::string name, std::span<const std::uint8_t> bytes, LineReaderOptions options = {})
      : name_(std::move(name)), options_(options), memory_(bytes) {
    check_options();
    open();
  }

  /// The next line, or false at the end of the file. A final line without '\n' counts; a file
  /// ending in '\n' has no empty line after it.
  bool next(Line& line) {
    for (;;) {
      if (discarding_) {
        const auto* nl = static_cast<const char*>(std::memchr(buf_.data() + pos_, '\n', end_ - pos_));
        if (nl != nullptr) {
          pos_ = scan_ = static_cast<std::size_t>(nl - buf_.data()) + 1;
          discarding_ = false;
        } else {
          pos_ = end_;
          if (!fill()) return false;
          continue;
        }
      }
      const auto* nl = static_cast<const char*>(std::memchr(buf_.data() + scan_, '\n', end_ - scan_));
      if (nl != nullptr) {
        const auto at = static_cast<std::size_t>(nl - buf_.data());
        line.number = ++lines_;
        line.offset = base_ + pos_;
        line.too_long = at - pos_ > options_.max_line_bytes;
        line.text = line.too_long ? std::string_view() : std::string_view(buf_.data() + pos_, at - pos_);
        pos_ = scan_ = at + 1;
        return true;
      }
      scan_ = end_;
      if (end_ - pos_ > options_.max_line_bytes) {
        line.number = ++lines_;
        line.offset = base_ + pos_;
        line.too_long = true;
        line.text = {};
        pos_ = scan_ = end_;
        discarding_ = true;
        return true;
      }
      if (!fill()) {
        if (pos_ == end_) return false;
        line.number = ++lines_;
        line.offset = base_ + pos_;
        line.too_long = false;
        line.text = std::string_view(buf_.data() + pos_, end_ - pos_);
        pos_ = scan_ = end_;
        return true;
      }
    }
  }

  /// Starts again from the first line.
  void rewind() { open(); }

  /// Lines returned so far.
  std::uint64_t lines() const noexcept { return lines_; }
  bool compressed() const noexcept { return gzip_.has_value(); }
  const std::string& name() const noexcept { return name_; }
  const LineReaderOptions& options() const noexcept { return options_; }
  /// Bytes of buffers held (the line buffer, and for gzip the decompressor's): fixed at opening.
  std::size_t buffer_bytes() const noexcept { return buf_.size() + (gzip_ ? gzip_->buffer_bytes() : 0); }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };

  void check_options() const {
    if (options_.chunk_bytes == 0 || options_.chunk_bytes > (std::size_t{1} << 30))
      throw ConfigError(name_ + ": chunk_bytes must be between 1 and 2^30, not " + std::to_string(options_.chunk_bytes));
    if (options_.max_line_bytes == 0 || options_.max_line_bytes > (std::size_t{1} << 30))
      throw ConfigError(name_ + ": max_line_bytes must be between 1 and 2^30, not " + std::to_string(options_.max_line_bytes));
  }

  void open() {
    file_.reset();
    gzip_.reset();
    memory_pos_ = 0;
    eof_ = false;
    lines_ = 0;
    base_ = pos_ = scan_ = end_ = 0;
    discarding_ = false;
    // A line of max_line_bytes and its newline, after a partial one was moved to the front, plus a
    // chunk: what find-a-newline-or-give-up needs, never more.
    buf_.assign(options_.max_line_bytes + 1 + options_.chunk_bytes, '\0');
    std::uint8_t magic[2] = {0, 0};
    std::size_t have = 0;
    if (memory_) {
      have = std::min<std::size_t>(2, memory_->size());
      std::copy_n(memory_->begin(), have, magic);
    } else {
      file_.reset(std::fopen(name_.c_str(), "rb"));
      if (!file_) throw DataError(name_, 0, std::string("cannot open: ") + std::strerror(errno));
      have = std::fread(magic, 1, 2, file_.get());
      if (std::ferror(file_.get())) throw DataError(name_, 0, std::string("cannot read: ") + std::strerror(errno));
    }
    if (is_gzip(std::span<const std::uint8_t>(magic, have))) {
      file_.reset();
      gzip_.emplace(memory_ ? GzipStream(*memory_, name_, options_.chunk_bytes) : GzipStream(name_, options_.chunk_bytes));
    } else if (file_) {
      std::rewind(file_.get());
    }
  }

  // Moves the unfinished line to the front and appends a chunk; false at the end of the file.
  bool fill() {
    if (eof_) return false;
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
      base_ += pos_;
      end_ -= pos_;
      scan_ -= pos_;
      pos_ = 0;
    }
    const std::size_t want = std::min(options_.chunk_bytes, buf_.size() - end_);
    std::size_t got = 0;
    if (gzip_) {
      got = gzip_->read(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(buf_.data() + end_), want));
    } else if (memory_) {
      got = std::min(want, memory_->size() - memory_pos_);
      std::memcpy(buf_.data() + end_, memory_->data() + memory_pos_, got);
      memory_pos_ += got;
    } else {
      got = std::fread(buf_.data() + end_, 1, want, file_.get());
      if (got < want && std::ferror(file_.get()))
        throw DataError(name_, base_ + end_ + got, std::string("cannot read: ") + std::strerror(errno));
    }
    end_ += got;
    if (got == 0) eof_ = true;
    return got > 0;
  }

  std::string name_;
  LineReaderOptions options_;
  std::optional<std::span<const std::uint8_t>> memory_;
  std::size_t memory_pos_ = 0;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::optional<GzipStream> gzip_;
  std::vector<char> buf_;
  std::uint64_t base_ = 0;   // file offset of buf_[0]
  std::size_t pos_ = 0;      // start of the unread part of buf_
  std::size_t scan_ = 0;     // where the search for '\n' resumes (bytes before it have none)
  std::size_t end_ = 0;      // end of the data in buf_
  std::uint64_t lines_ = 0;
  bool eof_ = false;
  bool discarding_ = false;  // inside a too-long line, dropping bytes up to its newline
};

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_LINEREADER_HPP_INCLUDED
