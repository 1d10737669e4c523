// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_CHECKPOINTFORMAT_HPP_INCLUDED
#define FLOTILLA_TRAIN_CHECKPOINTFORMAT_HPP_INCLUDED
// The on-disk container for checkpoints: named, typed records, each with its own CRC-32, in a file
// that is replaced atomically. What goes in it (parameters, optimizer state, RNG, epoch) is the
// Trainer's business; this header only guarantees that what is read back is exactly what was
// written, or an exception that says where it is not.
//
// Layout (every integer little-endian, no padding):
//
//   header   magic        8 bytes  89 46 4C 54 43 4B 0D 0A  ("\x89FLTCK\r\n")
//            version      u32      1
//            flags        u32      0 (a reader rejects bits it does not know)
//            records      u64      number of records that follow
//   record   name_length  u32      1..65535
//            name         bytes    UTF-8, unique within the file
//            dtype        u32      1 bytes, 2 string, 3 u8, 4 i32, 5 u64, 6 f32, 7 f64
//            count        u64      elements
//            length       u64      payload bytes = count * element size (1 for bytes and string)
//            payload      bytes    elements, little-endian (IEEE 754 for f32 / f64)
//            crc          u32      CRC-32 of the record's bytes from name_length to the payload's end
//   trailer  total_length u64      size of the whole file in bytes
//            crc          u32      CRC-32 of every byte before this field
//            end magic    4 bytes  "FEND"
//
// The magic's first byte is not ASCII and it holds "\r\n", so a file that passed through a 7-bit
// or text-mode transfer fails at once. The trailer's length and end magic catch truncation, the
// record CRCs say which record is damaged, and the file CRC covers the header and the trailer.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/core/crc32.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"

namespace flotilla::checkpoint {

/// What a record holds. The values are the ones written to disk: never renumber them.
enum class DType : std::uint32_t { bytes = 1, string = 2, u8 = 3, i32 = 4, u64 = 5, f32 = 6, f64 = 7 };

/// The format version this build writes and the newest it reads.
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::array<std::uint8_t, 8> file_magic = {0x89, 'F', 'L', 'T', 'C', 'K', '\r', '\n'};
inline constexpr std::array<std::uint8_t, 4> end_magic = {'F', 'E', 'N', 'D'};
/// Longest record name, in bytes.
inline constexpr std::size_t max_name_length = 65535;

FLOTILLA_DECL std::string_view dtype_name(DType t) noexcept;

namespace detail {

inline constexpr std::size_t header_size = 24;
inline constexpr std::size_t trailer_size = 16;
/// A record's bytes besides its name and payload: name_length, dtype, count, length, crc.
inline constexpr std::size_t record_overhead = 4 + 4 + 8 + 8 + 4;

template <class T>
struct dtype_of;
template <>
struct dtype_of<std::uint8_t> : std::integral_constant<DType, DType::u8> {};
template <>
struct dtype_of<std::int32_t> : std::integral_constant<DType, DType::i32> {};
template <>
struct dtype_of<std::uint64_t> : std::integral_constant<DType, DType::u64> {};
template <>
struct dtype_of<float> : std::integral_constant<DType, DType::f32> {};
template <>
struct dtype_of<double> : std::integral_constant<DType, DType::f64> {};

template <class T>
concept Element = requires {
  dtype_of<T>::value;
};

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "flotilla checkpoints store IEEE 754 floats");

FLOTILLA_DECL std::size_t element_size(DType t) noexcept;

inline bool known_dtype(std::uint32_t v) noexcept { return v >= 1 && v <= 7; }

template <class U>
inline void put_le(std::vector<std::byte>& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFFu));
}

template <class U>
inline U get_le(const std::byte* p) noexcept {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return v;
}

/// The unsigned integer with T's bits, for byte-order conversion of floats.
template <class T>
using bits_of =
    std::conditional_t<sizeof(T) == 1, std::uint8_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;

template <Element T>
inline std::vector<std::byte> encode(std::span<const T> values) {
  std::vector<std::byte> out;
  if constexpr (std::endian::native == std::endian::little) {
    out.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(out.data(), values.data(), values.size_bytes());
  } else {
    out.reserve(values.size_bytes());
    for (const T v : values) put_le(out, std::bit_cast<bits_of<T>>(v));
  }
  return out;
}

template <Element T>
inline void decode(const std::byte* in, std::span<T> out) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (!out.empty()) std::memcpy(out.data(), in, out.size_bytes());
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::bit_cast<T>(get_le<bits_of<T>>(in + i * sizeof(T)));
  }
}

inline std::uint32_t crc(const std::byte* p, std::size_t n, std::uint32_t c) noexcept {
  return flotilla::crc32(std::span<const std::byte>(p, n), c);
}

inline std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

FLOTILLA_DECL std::string hex32(std::uint32_t v);

/// A name as it appears in messages: quoted, with control bytes and quotes escaped.
FLOTILLA_DECL std::string quoted(std::string_view name);

inline CheckpointError error_at(const std::string& file, std::uint64_t offset, const std::string& what) {
  return CheckpointError(file + " (byte " + std::to_string(offset) + "): " + what);
}
/// The same, for a failure the operating system reported as `err` (an errno value).
inline CheckpointError error_at(const std::string& file, std::uint64_t offset, const std::string& what, int err) {
  return CheckpointError(file + " (byte " + std::to_string(offset) + "): " + what, std::error_code(err, std::generic_category()));
}

/// Removes a temporary file (and closes it) unless the commit went through.
struct TempFile {
  std::filesystem::path path;
  int fd = -1;
  bool keep = false;
  TempFile(std::filesystem::path p, int f) : path(std::move(p)), fd(f) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

}  // namespace detail

/// Collects named records, then writes them in one file that replaces the old one atomically.
///
/// Record names are unique and 1 to 65535 bytes long. Payloads are copied when added, so the
/// caller's buffers may change before commit().
class Writer {
 public:
  void add_bytes(std::string name, std::span<const std::byte> data) {
    add(std::move(name), DType::bytes, data.size(), std::vector<std::byte>(data.begin(), data.end()));
  }

  /// An array of u8, i32, u64, f32 or f64. Pass the type when it cannot be deduced from a
  /// container: `w.add_array<float>("weights", params)`.
  template <class T>
  void add_array(std::string name, std::span<const T> values) {
    static_assert(detail::Element<T>,
                  "checkpoint::Writer::add_array: T must be uint8_t, int32_t, uint64_t, float or double");
    add(std::move(name), detail::dtype_of<T>::value, values.size(), detail::encode(values));
  }

  void add_u64(std::string name, std::uint64_t value) {
    add_array<std::uint64_t>(std::move(name), std::span<const std::uint64_t>(&value, 1));
  }

  void add_string(std::string name, std::string_view text) {
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    add(std::move(name), DType::string, text.size(), std::vector<std::byte>(p, p + text.size()));
  }

  bool has(std::string_view name) const { return index_.find(name) != index_.end(); }
  std::size_t size() const noexcept { return records_.size(); }

  /// Size of the file commit() writes.
  FLOTILLA_DECL std::uint64_t file_size() const noexcept;

  /// The file's bytes, for sending a checkpoint elsewhere or reading it back with
  /// Reader::from_bytes.
  FLOTILLA_DECL std::vector<std::byte> bytes() const;

  /// Writes the records to `path`: to path.tmp-<pid> first, fsync, rename over `path`, fsync the
  /// directory. Whatever fails, the file that was at `path` before is left as it was and the
  /// temporary file is removed; the CheckpointError names the file, the byte offset and the
  /// operating system's reason.
  FLOTILLA_DECL void commit(const std::filesystem::path& path) const;

 private:
  struct Record {
    std::string name;
    DType dtype;
    std::uint64_t count;
    std::vector<std::byte> payload;
  };

  FLOTILLA_DECL void add(std::string name, DType dtype, std::uint64_t count, std::vector<std::byte> payload);

  /// Produces the file's bytes in order, in pieces, through `put(const std::byte*, size_t)`.
  template <class Put>
  void emit(Put&& put) const {
    std::uint32_t file_crc = 0;
    const auto out = [&](const std::byte* p, std::size_t n) {
      file_crc = detail::crc(p, n, file_crc);
      put(p, n);
    };
    std::vector<std::byte> head;
    for (const auto b : file_magic) head.push_back(static_cast<std::byte>(b));
    detail::put_le<std::uint32_t>(head, format_version);
    detail::put_le<std::uint32_t>(head, 0);  // flags
    detail::put_le<std::uint64_t>(head, records_.size());
    out(head.data(), head.size());
    for (const auto& r : records_) {
      head.clear();
      detail::put_le<std::uint32_t>(head, static_cast<std::uint32_t>(r.name.size()));
      const auto* name = reinterpret_cast<const std::byte*>(r.name.data());
      head.insert(head.end(), name, name + r.name.size());
      detail::put_le<std::uint32_t>(head, static_cast<std::uint32_t>(r.dtype));
      detail::put_le<std::uint64_t>(head, r.count);
      detail::put_le<std::uint64_t>(head, r.payload.size());
      std::uint32_t record_crc = detail::crc(head.data(), head.size(), 0);
      record_crc = detail::crc(r.payload.data(), r.payload.size(), record_crc);
      out(head.data(), head.size());
      out(r.payload.data(), r.payload.size());
      head.clear();
      detail::put_le<std::uint32_t>(head, record_crc);
      out(head.data(), head.size());
    }
    head.clear();
    detail::put_le<std::uint64_t>(head, file_size());
    out(head.data(), head.size());
    head.clear();
    detail::put_le<std::uint32_t>(head, file_crc);
    for (const auto b : end_magic) head.push_back(static_cast<std::byte>(b));
    put(head.data(), head.size());
  }

  std::vector<Record> records_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

/// A checkpoint read into memory and verified in full by the constructor: magic, version, every
/// length against the file's size (before anything is allocated from it), every record's CRC,
/// unique names, the trailer and the file CRC. Any failure throws CheckpointError naming the file
/// and the byte offset; after construction, reads fail only for a missing record or a wrong type.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : Reader(read_file(path), path.string()) {}

  /// Verifies a checkpoint held in memory; `source` names it in messages.
  static Reader from_bytes(std::vector<std::byte> data, std::string source = "<checkpoint in memory>") {
    return Reader(std::move(data), std::move(source));
  }

  /// The file (or source) name used in messages.
  const std::string& source() const noexcept { return source_; }
  std::uint32_t version() const noexcept { return version_; }

  bool has(std::string_view name) const { return index_.find(name) != index_.end(); }

  /// Record names in file order.
  FLOTILLA_DECL std::vector<std::string> names() const;

  DType dtype(std::string_view name) const { return entry(name).dtype; }
  /// Number of elements (bytes, for bytes and string records).
  std::uint64_t count(std::string_view name) const { return entry(name).count; }

  template <class T>
  std::vector<T> array(std::string_view name) const {
    static_assert(detail::Element<T>,
                  "checkpoint::Reader::array: T must be uint8_t, int32_t, uint64_t, float or double");
    const Entry& e = typed(name, detail::dtype_of<T>::value);
    std::vector<T> out(static_cast<std::size_t>(e.count));  // bounded by the file's size when verified
    detail::decode(data_.data() + e.payload, std::span<T>(out));
    return out;
  }

  /// Reads an array into `out`, which must have exactly as many elements as the record.
  template <class T>
  void array_into(std::string_view name, std::span<T> out) const {
    static_assert(detail::Element<T>,
                  "checkpoint::Reader::array_into: T must be uint8_t, int32_t, uint64_t, float or double");
    const Entry& e = typed(name, detail::dtype_of<T>::value);
    if (e.count != out.size()) {
      throw detail::error_at(source_, e.offset,
                             "record " + detail::quoted(e.name) + " has " + std::to_string(e.count) +
                                 " elements, the destination holds " + std::to_string(out.size()));
    }
    detail::decode(data_.data() + e.payload, out);
  }

  /// A value added with Writer::add_u64 (a u64 record of one element).
  FLOTILLA_DECL std::uint64_t u64(std::string_view name) const;

  std::string string(std::string_view name) const {
    const Entry& e = typed(name, DType::string);
    return std::string(reinterpret_cast<const char*>(data_.data() + e.payload), static_cast<std::size_t>(e.count));
  }

  FLOTILLA_DECL std::vector<std::byte> bytes(std::string_view name) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::uint64_t count;
    std::size_t offset;   // of the record
    std::size_t payload;  // offset of the payload
  };

  Reader(std::vector<std::byte> data, std::string source) : source_(std::move(source)), data_(std::move(data)) {
    verify();
  }

  [[noreturn]] void fail(std::uint64_t offset, const std::string& what) const {
    throw detail::error_at(source_, offset, what);
  }

  FLOTILLA_DECL const Entry& entry(std::string_view name) const;

  FLOTILLA_DECL const Entry& typed(std::string_view name, DType want) const;

  FLOTILLA_DECL static std::vector<std::byte> read_file(const std::filesystem::path& path);

  FLOTILLA_DECL void verify();

  std::string source_;
  std::vector<std::byte> data_;
  std::uint32_t version_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::bytes:
      return "bytes";
    case DType::string:
      return "string";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::u64:
      return "u64";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
  }
  return "unknown";
}

namespace detail {

FLOTILLA_DECL std::size_t element_size(DType t) noexcept {
  switch (t) {
    case DType::i32:
    case DType::f32:
      return 4;
    case DType::u64:
    case DType::f64:
      return 8;
    default:
      return 1;
  }
}

FLOTILLA_DECL std::string hex32(std::uint32_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 7; i >= 0; --i) s += digits[(v >> (4 * i)) & 0xFu];
  return s;
}

FLOTILLA_DECL std::string quoted(std::string_view name) {
  std::string s = "'";
  for (const char c : name.substr(0, 200)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '\'' || c == '\\') {
      s += "\\x" + hex32(static_cast<unsigned char>(c)).substr(8);
    } else {
      s += c;
    }
  }
  if (name.size() > 200) s += "...";
  return s + "'";
}

}  // namespace detail

FLOTILLA_DECL std::uint64_t Writer::file_size() const noexcept {
  std::uint64_t n = detail::header_size + detail::trailer_size;
  for (const auto& r : records_) n += detail::record_overhead + r.name.size() + r.payload.size();
  return n;
}

FLOTILLA_DECL std::vector<std::byte> Writer::bytes() const {
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(file_size()));
  emit([&](const std::byte* p, std::size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

FLOTILLA_DECL void Writer::commit(const std::filesystem::path& path) const {
  std::filesystem::path tmp_path = path;
  tmp_path += ".tmp-" + std::to_string(::getpid());
  const std::string where = path.string();
  detail::TempFile tmp{tmp_path, ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (tmp.fd < 0) {
    const int err = errno;
    tmp.keep = true;  // not ours to remove: it was never created (or belongs to someone else)
    throw detail::error_at(where, 0,
                           "cannot create the temporary file " + tmp_path.string() + ": " + detail::errno_text(err) +
                               "; the previous checkpoint is unchanged",
                           err);
  }
  const auto failed = [&](std::uint64_t offset, const std::string& what, int err) {
    return detail::error_at(
        where, offset,
        what + " " + tmp_path.string() + ": " + detail::errno_text(err) + "; the previous checkpoint is unchanged", err);
  };

  // Small pieces are gathered in a buffer; large payloads go straight to write(2).
  constexpr std::size_t buffer_size = std::size_t{1} << 20;
  std::vector<std::byte> buffer;
  buffer.reserve(buffer_size);
  std::uint64_t written = 0;
  const auto write_all = [&](const std::byte* p, std::size_t n) {
    while (n > 0) {
      const ::ssize_t k = ::write(tmp.fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (k < 0) {
        if (errno == EINTR) continue;
        throw failed(written, "cannot write", errno);
      }
      p += k, n -= static_cast<std::size_t>(k), written += static_cast<std::uint64_t>(k);
    }
  };
  const auto flush = [&] {
    write_all(buffer.data(), buffer.size());
    buffer.clear();
  };
  emit([&](const std::byte* p, std::size_t n) {
    if (buffer.size() + n > buffer_size) flush();
    if (n >= buffer_size) {
      write_all(p, n);
    } else {
      buffer.insert(buffer.end(), p, p + n);
    }
  });
  flush();
  if (::fsync(tmp.fd) != 0) throw failed(written, "cannot fsync", errno);
  const int fd = std::exchange(tmp.fd, -1);
  if (::close(fd) != 0) throw failed(written, "cannot close", errno);
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const int err = errno;
    throw detail::error_at(where, written,
                           "cannot rename " + tmp_path.string() + " over it: " + detail::errno_text(err) +
                               "; the previous checkpoint is unchanged",
                           err);
  }
  tmp.keep = true;

  // Without this the rename may not survive a power cut: the new directory entry is only data.
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    const int err = errno;
    throw detail::error_at(where, written,
                           "written, but its directory cannot be opened to sync it: " + detail::errno_text(err));
  }
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL) {  // EINVAL: the file system cannot sync directories; nothing to do
    throw detail::error_at(where, written, "written, but syncing its directory failed: " + detail::errno_text(err));
  }
}

FLOTILLA_DECL void Writer::add(std::string name, DType dtype, std::uint64_t count, std::vector<std::byte> payload) {
  if (name.empty() || name.size() > max_name_length) {
    throw CheckpointError("checkpoint::Writer: record name " + detail::quoted(name) + " must be 1 to " +
                          std::to_string(max_name_length) + " bytes long");
  }
  if (has(name)) throw CheckpointError("checkpoint::Writer: duplicate record name " + detail::quoted(name));
  index_.emplace(name, records_.size());
  records_.push_back(Record{std::move(name), dtype, count, std::move(payload)});
}

FLOTILLA_DECL std::vector<std::string> Reader::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

FLOTILLA_DECL std::uint64_t Reader::u64(std::string_view name) const {
  const Entry& e = typed(name, DType::u64);
  if (e.count != 1) {
    throw detail::error_at(
        source_, e.offset,
        "record " + detail::quoted(e.name) + " holds " + std::to_string(e.count) + " u64 values, not one");
  }
  return detail::get_le<std::uint64_t>(data_.data() + e.payload);
}

FLOTILLA_DECL std::vector<std::byte> Reader::bytes(std::string_view name) const {
  const Entry& e = typed(name, DType::bytes);
  const auto begin = data_.begin() + static_cast<std::ptrdiff_t>(e.payload);
  return std::vector<std::byte>(begin, begin + static_cast<std::ptrdiff_t>(e.count));
}

FLOTILLA_DECL const Reader::Entry& Reader::entry(std::string_view name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    std::string known;
    for (std::size_t i = 0; i < entries_.size() && i < 8; ++i)
      known += (i ? ", " : "") + detail::quoted(entries_[i].name);
    if (entries_.size() > 8) known += ", ...";
    throw CheckpointError(source_ + ": no record named " + detail::quoted(name) + " (it has " +
                          std::to_string(entries_.size()) + " records" + (known.empty() ? "" : ": " + known) + ")");
  }
  return entries_[it->second];
}

FLOTILLA_DECL const Reader::Entry& Reader::typed(std::string_view name, DType want) const {
  const Entry& e = entry(name);
  if (e.dtype != want) {
    fail(e.offset, "record " + detail::quoted(e.name) + " holds " + std::string(dtype_name(e.dtype)) + ", read as " +
                       std::string(dtype_name(want)));
  }
  return e;
}

FLOTILLA_DECL std::vector<std::byte> Reader::read_file(const std::filesystem::path& path) {
  const auto fail_io = [&](const char* what, int err) {
    return detail::error_at(path.string(), 0, std::string(what) + ": " + detail::errno_text(err));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail_io("cannot open the checkpoint", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct ::stat st {};
  if (::fstat(fd, &st) != 0) throw fail_io("cannot stat the checkpoint", errno);
  if (!S_ISREG(st.st_mode)) throw detail::error_at(path.string(), 0, "not a regular file");
  std::vector<std::byte> data(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < data.size()) {
    const ::ssize_t n = ::read(fd, data.data() + got, std::min<std::size_t>(data.size() - got, std::size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw detail::error_at(path.string(), got, "cannot read the checkpoint: " + detail::errno_text(errno));
    if (n == 0) {
      throw detail::error_at(path.string(), got,
                             "the file ended after " + std::to_string(got) + " of its " +
                                 std::to_string(data.size()) + " bytes (changed while being read?)");
    }
    got += static_cast<std::size_t>(n);
  }
  return data;
}

FLOTILLA_DECL void Reader::verify() {
  const std::size_t size = data_.size();
  const std::byte* d = data_.data();
  const auto u8 = [&](std::size_t at) { return std::to_integer<std::uint8_t>(d[at]); };

  if (size < file_magic.size()) {
    fail(size, "truncated: the file has " + std::to_string(size) + " bytes, a checkpoint has at least " +
                   std::to_string(detail::header_size + detail::trailer_size));
  }
  for (std::size_t i = 0; i < file_magic.size(); ++i) {
    if (u8(i) != file_magic[i]) fail(i, "not a flotilla checkpoint (wrong magic bytes)");
  }
  if (size < detail::header_size + detail::trailer_size) {
    fail(size, "truncated: the file has " + std::to_string(size) + " bytes, a checkpoint has at least " +
                   std::to_string(detail::header_size + detail::trailer_size));
  }
  version_ = detail::get_le<std::uint32_t>(d + 8);
  if (version_ == 0 || version_ > format_version) {
    fail(8, "checkpoint format version " + std::to_string(version_) + "; this build of flotilla reads version " +
                std::to_string(format_version) +
                (version_ > format_version ? " (written by a newer flotilla?)" : ""));
  }
  const auto flags = detail::get_le<std::uint32_t>(d + 12);
  if (flags != 0) fail(12, "unknown flags " + detail::hex32(flags) + " (this build knows none)");

  // The trailer first: a truncated file is told as such, not as a damaged record.
  const std::size_t records_end = size - detail::trailer_size;
  for (std::size_t i = 0; i < end_magic.size(); ++i) {
    if (u8(size - 4 + i) != end_magic[i]) {
      fail(size - 4, "truncated or incompletely written: no end marker \"FEND\" in the last 4 bytes of the " +
                         std::to_string(size) + "-byte file");
    }
  }
  const auto total = detail::get_le<std::uint64_t>(d + records_end);
  if (total != size) {
    fail(records_end, "the trailer gives the file's length as " + std::to_string(total) + " bytes, but it has " +
                          std::to_string(size) + (total > size ? " (truncated)" : ""));
  }
  const std::uint32_t stored_file_crc = detail::get_le<std::uint32_t>(d + size - 8);
  const bool file_crc_ok = detail::crc(d, size - 8, 0) == stored_file_crc;
  const std::string file_note = file_crc_ok ? "" : "; the file checksum does not match either: the file is corrupt";

  const auto record_count = detail::get_le<std::uint64_t>(d + 16);
  const std::uint64_t room = records_end - detail::header_size;
  if (record_count > room / (detail::record_overhead + 1)) {
    fail(16, "the header announces " + std::to_string(record_count) + " records, more than " + std::to_string(room) +
                 " bytes can hold" + file_note);
  }
  entries_.reserve(static_cast<std::size_t>(record_count));

  std::size_t pos = detail::header_size;
  for (std::uint64_t i = 0; i < record_count; ++i) {
    const std::size_t start = pos;
    const std::string which = "record " + std::to_string(i);
    // Checks that `n` more bytes fit before the trailer, before anything is read or allocated.
    const auto need = [&](std::uint64_t n, const std::string& what) {
      if (n > records_end - pos) {
        fail(pos, what + " needs " + std::to_string(n) + " bytes, but only " + std::to_string(records_end - pos) +
                      " remain before the trailer" + file_note);
      }
    };
    need(4, which + ": the name length");
    const auto name_length = detail::get_le<std::uint32_t>(d + pos);
    if (name_length == 0 || name_length > max_name_length) {
      fail(pos, which + ": name length " + std::to_string(name_length) + " is not in 1.." +
                    std::to_string(max_name_length) + file_note);
    }
    pos += 4;
    need(name_length, which + ": the name");
    std::string name(reinterpret_cast<const char*>(d + pos), name_length);
    const std::string named = which + " (" + detail::quoted(name) + ")";
    pos += name_length;
    need(20, named + ": the dtype, count and length fields");
    const auto dtype_value = detail::get_le<std::uint32_t>(d + pos);
    const auto count = detail::get_le<std::uint64_t>(d + pos + 4);
    const auto length = detail::get_le<std::uint64_t>(d + pos + 12);
    pos += 20;
    need(length, named + ": the payload");
    const std::size_t payload = pos;
    pos += static_cast<std::size_t>(length);
    need(4, named + ": the checksum");
    const auto stored = detail::get_le<std::uint32_t>(d + pos);
    const auto computed = detail::crc(d + start, pos - start, 0);
    if (stored != computed) {
      fail(start, named + ": checksum mismatch (stored " + detail::hex32(stored) + ", computed " +
                      detail::hex32(computed) + "): the record is corrupt");
    }
    pos += 4;
    // The CRC matched, so these fields are as written; a bad one means a bad writer, not bad bits.
    if (!detail::known_dtype(dtype_value)) {
      fail(start + 4 + name_length,
           named + ": unknown dtype " + std::to_string(dtype_value) + " (this build knows 1 to 7)");
    }
    const auto dtype = static_cast<DType>(dtype_value);
    const std::size_t esize = detail::element_size(dtype);
    if (count > length / esize || count * esize != length) {
      fail(start + 4 + name_length, named + ": " + std::to_string(count) + " " + std::string(dtype_name(dtype)) +
                                        " elements do not fill its " + std::to_string(length) + " payload bytes");
    }
    if (has(name))
      fail(start, named + ": duplicate record name (first at offset " + std::to_string(entry(name).offset) + ")");
    index_.emplace(name, entries_.size());
    entries_.push_back(Entry{std::move(name), dtype, count, start, payload});
  }
  if (pos != records_end) {
    fail(pos, std::to_string(records_end - pos) + " unexpected bytes after the last of the " +
                  std::to_string(record_count) + " records the header announces" + file_note);
  }
  if (!file_crc_ok) {
    fail(size - 8, "file checksum mismatch (stored " + detail::hex32(stored_file_crc) + ", computed " +
                       detail::hex32(detail::crc(d, size - 8, 0)) + "): the header or trailer is corrupt");
  }
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::checkpoint
#endif  // FLOTILLA_TRAIN_CHECKPOINTFORMAT_HPP_INCLUDED
