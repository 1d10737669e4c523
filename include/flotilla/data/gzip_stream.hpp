// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_GZIPSTREAM_HPP_INCLUDED
#define FLOTILLA_DATA_GZIPSTREAM_HPP_INCLUDED
// gunzip as a stream: a gzip file of any size decompressed a chunk at a time, holding only the
// 32 KiB window that DEFLATE's back-references reach into plus one chunk, so memory stays a fixed
// few hundred KiB whether the file inflates to megabytes or to terabytes.
//
// The decoding is gzip.hpp's Inflater, stepped: it pauses once a chunk of output is ready, the
// consumer takes the chunk, and everything before the last 32 KiB is dropped before it resumes.
// The compressed file is memory-mapped; pages already read are handed back to the kernel as the
// stream moves on, so they do not accumulate either. Every member of a multi-member file is
// checked at its end (CRC-32 and size), as gunzip() does, and every error names the file and the
// compressed byte offset.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/data/gzip.hpp"

namespace flotilla::data {

namespace detail {

/// A read-only memory map of a whole file (an empty file maps to an empty span).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(path, 0, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw DataError(path, 0, std::string("cannot stat: ") + std::strerror(err));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw DataError(path, 0, std::string("cannot map into memory: ") + std::strerror(err));
      }
      data_ = static_cast<const std::uint8_t*>(p);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  }

  std::span<const std::uint8_t> bytes() const noexcept { return {data_, size_}; }

  /// Lets the kernel reclaim the pages wholly before byte `offset`: they will not be read again
  /// (until a rewind, which faults them back in from the file).
  void release_before(std::size_t offset) noexcept {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t end = offset / page * page;
    if (data_ == nullptr || end <= released_) return;
    ::madvise(const_cast<std::uint8_t*>(data_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }
  void reset_released() noexcept { released_ = 0; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t released_ = 0;
};

}  // namespace detail

/// Decompresses a gzip file (or gzip bytes in memory) chunk by chunk.
///
///   GzipStream gz("day_0.gz");
///   std::vector<std::uint8_t> buf(1 << 20);
///   while (std::size_t n = gz.read(buf)) consume(buf.data(), n);
///
/// Memory: buffer_bytes() (the 32 KiB window, one chunk and room for one stored block) plus the
/// decoder's tables, fixed at construction whatever the file's size.
class GzipStream {
 public:
  /// The DEFLATE window: how far back a match may reach, so how much output must be kept.
  static constexpr std::size_t window = 32768;
  static constexpr std::size_t default_chunk_bytes = std::size_t{1} << 16;

  /// Maps the file at `path` (DataError if it cannot be opened).
  explicit GzipStream(const std::string& path, std::size_t chunk_bytes = default_chunk_bytes)
      : state_(std::make_unique<State>(path, chunk_bytes)) {
    state_->map = std::make_unique<detail::MappedFile>(path);
    state_->in = state_->map->bytes();
    start();
  }
  /// Reads gzip bytes in memory, which must outlive the stream; `name` is what errors call them.
  GzipStream(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t chunk_bytes = default_chunk_bytes)
      : state_(std::make_unique<State>(name, chunk_bytes)) {
    state_->in = bytes;
    start();
  }

  /// Copies up to dst.size() decompressed bytes into `dst` and returns how many: 0 only at the
  /// end of the last member. Throws DataError for corrupt or truncated data; after one, only
  /// rewind() makes the stream usable again.
  std::size_t read(std::span<std::uint8_t> dst) {
    State& s = *state_;
    std::size_t copied = 0;
    while (copied < dst.size()) {
      if (s.given == s.inflater->size()) {
        if (!produce()) break;
        continue;
      }
      const std::size_t n = std::min(dst.size() - copied, s.inflater->size() - s.given);
      std::memcpy(dst.data() + copied, s.inflater->data() + s.given, n);
      s.given += n;
      copied += n;
    }
    s.total += copied;
    return copied;
  }

  /// Starts again from the first member.
  void rewind() {
    if (state_->map) state_->map->reset_released();
    start();
  }

  /// Bytes of decompressed-output buffer held: constant for the stream's life.
  std::size_t buffer_bytes() const noexcept { return state_->out.size(); }
  /// Decompressed bytes handed out by read() since the start (or the last rewind).
  std::uint64_t decompressed_offset() const noexcept { return state_->total; }
  /// How far into the compressed input decoding has read.
  std::uint64_t compressed_offset() const noexcept {
    return state_->phase == Phase::body ? state_->inflater->input_position() : state_->pos;
  }
  /// gzip members begun so far.
  std::size_t members() const noexcept { return state_->members; }
  const std::string& name() const noexcept { return state_->name; }

 private:
  enum class Phase : std::uint8_t { header, body, done };

  // Heap-held so that the stream can move: the Inflater keeps references to the name and buffer.
  struct State {
    State(std::string n, std::size_t chunk_bytes) : name(std::move(n)), chunk(std::clamp<std::size_t>(chunk_bytes, 1, std::size_t{1} << 30)) {}
    std::string name;
    std::size_t chunk;
    std::unique_ptr<detail::MappedFile> map;
    std::span<const std::uint8_t> in;
    std::vector<std::uint8_t> out;
    std::unique_ptr<detail::Inflater> inflater;
    Phase phase = Phase::header;
    std::size_t pos = 0;        // compressed offset of the next member (header phase)
    std::size_t given = 0;      // output bytes before this index have been handed out
    std::uint32_t crc = 0;      // of the current member's output so far
    std::uint64_t size = 0;     // of the current member's output so far
    std::uint64_t total = 0;
    std::size_t members = 0;
  };

  void start() {
    State& s = *state_;
    s.out.clear();
    s.inflater = std::make_unique<detail::Inflater>(s.in, s.name, s.out, std::numeric_limits<std::size_t>::max());
    // Sized once for the most a step can leave: the window, a chunk, and a stored block (65535
    // bytes) begun just before the pause, with the decoder's slack; it never grows after this.
    s.inflater->reserve(window + s.chunk + 65535 + 2 * detail::Inflater::slack);
    s.phase = Phase::header;
    s.pos = 0;
    s.given = 0;
    s.total = 0;
    s.members = 0;
  }

  // Makes more output available; false at the end of the data.
  bool produce() {
    State& s = *state_;
    detail::Inflater& inf = *s.inflater;
    for (;;) {
      if (s.phase == Phase::done) return false;
      if (s.phase == Phase::header) {
        const std::size_t n = s.in.size();
        if (s.members > 0) {
          // After a member: the end, zero padding (accepted as gzip(1) does), another member, or
          // garbage.
          if (s.pos == n ||
              std::all_of(s.in.begin() + static_cast<std::ptrdiff_t>(s.pos), s.in.end(), [](std::uint8_t c) { return c == 0; })) {
            s.phase = Phase::done;
            return false;
          }
          if (!(s.in[s.pos] == 0x1F && (n - s.pos == 1 || s.in[s.pos + 1] == 0x8B)))
            throw DataError(s.name, s.pos, std::to_string(n - s.pos) + " bytes of trailing garbage after the last gzip member");
        }
        const std::size_t body = detail::gzip_header_end(s.in, s.pos, s.name);
        inf.begin(body);
        s.crc = 0;
        s.size = 0;
        ++s.members;
        s.phase = Phase::body;
      }
      // Everything handed out may go, except the window that later matches may still copy from.
      if (inf.size() > window) {
        const std::size_t drop = inf.size() - window;
        inf.discard_front(drop);
        s.given -= drop;
      }
      const std::size_t before = inf.size();
      const bool ended = inf.step(before + s.chunk);
      const std::size_t made = inf.size() - before;
      s.crc = crc32(std::span<const std::uint8_t>(inf.data() + before, made), s.crc);
      s.size += made;
      if (s.map) s.map->release_before(inf.input_position() > (std::size_t{1} << 20) ? inf.input_position() - (std::size_t{1} << 20) : 0);
      if (ended) finish_member();
      if (made > 0) return true;
    }
  }

  void finish_member() {
    State& s = *state_;
    const std::size_t n = s.in.size();
    std::size_t pos = s.inflater->end_of_stream();
    if (n - pos < 8) throw DataError(s.name, n, "truncated: the data ends before the gzip trailer (CRC-32 and size)");
    const std::uint32_t want_crc = detail::load_le32(s.in.data() + pos);
    if (want_crc != s.crc)
      throw DataError(s.name, pos, "CRC-32 mismatch: the trailer says " + detail::hex32(want_crc) + ", the data gives " +
                                       detail::hex32(s.crc) + " (corrupt data)");
    const std::uint32_t want_size = detail::load_le32(s.in.data() + pos + 4);
    if (want_size != static_cast<std::uint32_t>(s.size))
      throw DataError(s.name, pos + 4, "size mismatch: trailer says " + std::to_string(want_size) + " bytes (mod 2^32), data has " +
                                           std::to_string(s.size));
    s.pos = pos + 8;
    s.phase = Phase::header;
  }

  std::unique_ptr<State> state_;
};

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_GZIPSTREAM_HPP_INCLUDED
