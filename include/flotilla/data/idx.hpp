// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_IDX_HPP_INCLUDED
#define FLOTILLA_DATA_IDX_HPP_INCLUDED
// Reader for the IDX format of MNIST and Fashion-MNIST: two zero bytes, an element type, the number
// of dimensions, each dimension as a big-endian 32-bit count, then the values, big-endian, in
// row-major order (the first dimension is the sample). Files may be gzip-compressed; that is
// recognised by the gzip magic bytes, not by the file name.
//
// Errors are DataErrors naming the file and a byte offset. For a compressed file the offset is into
// the decompressed IDX content (the message says so), since that is where the header and values
// live; gzip errors themselves give offsets into the compressed file.
//
// Nothing is allocated from a header's word: the dimensions must describe exactly the bytes the
// file holds before any conversion buffer is sized from them. A compressed file is decompressed
// only as far as its header announces: once the header's dimensions are known, inflating past
// header + values stops at once, and a header that announces more than max_output, or more than
// the compressed file could inflate to at DEFLATE's densest (1032 bytes per compressed byte), is
// refused before anything is sized from it. So a small file that inflates to gigabytes costs
// memory and time in proportion to what its header announces, not to what it would inflate to.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/data/gzip.hpp"

namespace flotilla::data {

/// IDX element types, by their code in the header.
enum class IdxType : std::uint8_t { u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

/// Bytes per value of an IDX type.
inline constexpr std::size_t idx_type_size(IdxType t) noexcept {
  switch (t) {
    case IdxType::u8:
    case IdxType::i8:
      return 1;
    case IdxType::i16:
      return 2;
    case IdxType::i32:
    case IdxType::f32:
      return 4;
    case IdxType::f64:
      return 8;
  }
  return 0;
}

inline constexpr std::string_view idx_type_name(IdxType t) noexcept {
  switch (t) {
    case IdxType::u8:
      return "unsigned byte";
    case IdxType::i8:
      return "signed byte";
    case IdxType::i16:
      return "int16";
    case IdxType::i32:
      return "int32";
    case IdxType::f32:
      return "float32";
    case IdxType::f64:
      return "float64";
  }
  return "unknown";
}

inline constexpr bool idx_type_is_integer(IdxType t) noexcept {
  return t != IdxType::f32 && t != IdxType::f64;
}

/// The most bytes one byte of DEFLATE data can inflate to: a 258-byte match coded in 2 bits.
inline constexpr std::size_t deflate_max_ratio = 1032;

/// Reads a whole file. Throws DataError if it is missing, unreadable, or larger than `max_size`.
FLOTILLA_DECL std::vector<std::uint8_t> read_file(const std::filesystem::path& path,
                                                  std::size_t max_size = std::numeric_limits<std::size_t>::max());

/// A parsed IDX file: its header, and its values still in the file's big-endian encoding (they are
/// converted once, straight into the caller's buffer, by copy_to()).
class IdxFile {
 public:
  const std::string& name() const noexcept { return name_; }
  IdxType type() const noexcept { return type_; }
  const std::vector<std::size_t>& dims() const noexcept { return dims_; }
  std::size_t rank() const noexcept { return dims_.size(); }
  /// Number of values: the product of the dimensions.
  std::size_t count() const noexcept { return count_; }
  /// Whether the file was gzip-compressed.
  bool compressed() const noexcept { return compressed_; }
  /// Offset of the first value in the (decompressed) content.
  std::size_t data_offset() const noexcept { return data_offset_; }
  /// Offset of value i in the (decompressed) content.
  std::size_t offset_of(std::size_t i) const noexcept { return data_offset_ + i * idx_type_size(type_); }
  /// The values' raw bytes.
  std::span<const std::uint8_t> raw() const noexcept {
    return std::span<const std::uint8_t>(bytes_).subspan(data_offset_, count_ * idx_type_size(type_));
  }
  /// "60000x28x28"
  std::string shape_string() const { return dims_string(dims_); }

  /// Value i, converted to U.
  template <class U>
  U at(std::size_t i) const noexcept {
    const std::uint8_t* p = bytes_.data() + offset_of(i);
    switch (type_) {
      case IdxType::u8:
        return static_cast<U>(p[0]);
      case IdxType::i8:
        return static_cast<U>(static_cast<std::int8_t>(p[0]));
      case IdxType::i16:
        return static_cast<U>(static_cast<std::int16_t>(static_cast<std::uint16_t>(be(p, 2))));
      case IdxType::i32:
        return static_cast<U>(static_cast<std::int32_t>(static_cast<std::uint32_t>(be(p, 4))));
      case IdxType::f32: {
        const auto bits = static_cast<std::uint32_t>(be(p, 4));
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return static_cast<U>(f);
      }
      case IdxType::f64: {
        const std::uint64_t bits = be(p, 8);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return static_cast<U>(d);
      }
    }
    return U{};
  }

  /// Converts every value to U, times `scale`, into dst (which must hold count() values).
  template <class U>
  void copy_to(std::span<U> dst, U scale = U(1)) const {
    if (dst.size() != count_)
      throw ShapeError("IdxFile::copy_to: destination holds " + std::to_string(dst.size()) + " values, " + name_ + " has " +
                       std::to_string(count_));
    if (type_ == IdxType::u8) {  // the common case (pixels), kept a plain loop that vectorises
      const std::uint8_t* p = bytes_.data() + data_offset_;
      for (std::size_t i = 0; i < count_; ++i) dst[i] = static_cast<U>(p[i]) * scale;
      return;
    }
    for (std::size_t i = 0; i < count_; ++i) dst[i] = at<U>(i) * scale;
  }

  /// A DataError for this file at `offset` of its content, noting when that is decompressed content.
  DataError error(std::size_t offset, const std::string& what) const {
    return DataError(name_, offset, compressed_ ? what + " (offset in the decompressed data)" : what);
  }

  FLOTILLA_DECL static std::string dims_string(const std::vector<std::size_t>& dims);

  /// Parses IDX content (gzip-compressed or not; decompressed output is capped at `max_output`).
  /// `name` is used in error messages.
  FLOTILLA_DECL static IdxFile parse(std::vector<std::uint8_t> bytes, std::string name,
                                     std::size_t max_output = default_max_output);

 private:
  /// Reads the header at the start of `content` as far as it goes and returns how many bytes the
  /// content must have in all: while `content` holds only part of the header, the header's size
  /// as far as it is known (4, then 4 + 4 per dimension); once it holds the whole header, the
  /// header plus the values it announces (type_, dims_, count_ and data_offset_ are then set).
  /// Throws the DataError of a header that no further bytes could make valid.
  FLOTILLA_DECL std::size_t read_header(std::span<const std::uint8_t> content);

  /// The size a compressed file's decompressed prefix `content` announces (read_header()), once
  /// refused when more than `max_output` or than `compressed_size` bytes can inflate to.
  FLOTILLA_DECL std::size_t announced_size(std::span<const std::uint8_t> content, std::size_t compressed_size,
                                           std::size_t max_output);

  static std::string hex_byte(std::uint8_t b) {
    const char* digits = "0123456789abcdef";
    return {digits[b >> 4], digits[b & 0xFU]};
  }

  static std::uint64_t be(const std::uint8_t* p, int n) noexcept {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
    return v;
  }

  std::string name_;
  IdxType type_ = IdxType::u8;
  std::vector<std::size_t> dims_;
  std::size_t count_ = 0;
  bool compressed_ = false;
  std::size_t data_offset_ = 0;
  std::vector<std::uint8_t> bytes_;
};

/// Parses IDX content (gzip-compressed or not; decompressed output is capped at `max_output`).
/// `name` is used in error messages.
inline IdxFile parse_idx(std::vector<std::uint8_t> bytes, std::string name, std::size_t max_output = default_max_output) {
  return IdxFile::parse(std::move(bytes), std::move(name), max_output);
}

/// Reads and parses an IDX file, compressed or not.
inline IdxFile read_idx(const std::filesystem::path& path, std::size_t max_output = default_max_output) {
  return parse_idx(read_file(path), path.string(), max_output);
}

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL std::vector<std::uint8_t> read_file(const std::filesystem::path& path, std::size_t max_size) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw DataError(name, 0, "cannot open: no such file");
  if (std::filesystem::is_directory(status)) throw DataError(name, 0, "cannot open: it is a directory");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw DataError(name, 0, "cannot read its size: " + ec.message());
  if (size > max_size)
    throw DataError(name, 0, "file is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_size) + " allowed");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw DataError(name, 0, "cannot open for reading");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<std::uintmax_t>(file.gcount()) != size)
    throw DataError(name, static_cast<std::uint64_t>(file.gcount()), "read failed (the file shrank while being read?)");
  // A file that grew since file_size() would be silently cut; one more byte tells.
  if (file.peek() != std::ifstream::traits_type::eof())
    throw DataError(name, size, "the file grew while being read");
  return bytes;
}

FLOTILLA_DECL std::string IdxFile::dims_string(const std::vector<std::size_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i != 0) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

FLOTILLA_DECL std::size_t IdxFile::read_header(std::span<const std::uint8_t> content) {
  const std::size_t size = content.size();
  if (size < 4) return 4;
  if (content[0] != 0 || content[1] != 0)
    throw error(0, "not an IDX file: it must start with two zero bytes, not " + hex_byte(content[0]) + " " + hex_byte(content[1]));
  switch (static_cast<IdxType>(content[2])) {
    case IdxType::u8:
    case IdxType::i8:
    case IdxType::i16:
    case IdxType::i32:
    case IdxType::f32:
    case IdxType::f64:
      break;
    default:
      throw error(2, "unknown IDX element type 0x" + hex_byte(content[2]) +
                         " (known: 08 ubyte, 09 sbyte, 0b int16, 0c int32, 0d float32, 0e float64)");
  }
  type_ = static_cast<IdxType>(content[2]);
  const std::size_t ndims = content[3];
  if (ndims == 0) throw error(3, "IDX header declares 0 dimensions");
  const std::size_t header = 4 + 4 * ndims;
  if (size < header) return header;
  const std::size_t elem = idx_type_size(type_);
  std::vector<std::size_t> dims(ndims);
  std::size_t total = 1;
  bool overflow = false;
  for (std::size_t k = 0; k < ndims; ++k) {
    const std::size_t dim = static_cast<std::size_t>(be(content.data() + 4 + 4 * k, 4));
    dims[k] = dim;
    if (dim == 0) throw error(4 + 4 * k, "dimension " + std::to_string(k) + " is 0");
    if (total > std::numeric_limits<std::size_t>::max() / dim) overflow = true;
    total *= dim;
  }
  if (overflow || total > (std::numeric_limits<std::size_t>::max() - header) / elem)
    throw error(4, "dimensions " + dims_string(dims) + " overflow: their product does not fit in 64 bits");
  dims_ = std::move(dims);
  count_ = total;
  data_offset_ = header;
  return header + total * elem;
}

FLOTILLA_DECL std::size_t IdxFile::announced_size(std::span<const std::uint8_t> content, std::size_t compressed_size,
                                                  std::size_t max_output) {
  const std::size_t need = read_header(content);
  if (dims_.empty()) return need;  // the header is not complete yet
  const std::string announces = "dimensions " + dims_string(dims_) + " of " + std::string(idx_type_name(type_)) +
                                " announce " + std::to_string(need) + " bytes of content";
  if (need > max_output)
    throw error(4, announces + ", more than the maximum of " + std::to_string(max_output) +
                       " bytes allowed (pass a larger max_output if this file is genuine)");
  const std::size_t most = compressed_size > std::numeric_limits<std::size_t>::max() / deflate_max_ratio
                               ? std::numeric_limits<std::size_t>::max()
                               : compressed_size * deflate_max_ratio;
  if (need > most)
    throw error(4, announces + ", more than the " + std::to_string(most) + " that " + std::to_string(compressed_size) +
                       " bytes of gzip data can inflate to (DEFLATE inflates a byte to at most " +
                       std::to_string(deflate_max_ratio) + ")");
  return need;
}

FLOTILLA_DECL IdxFile IdxFile::parse(std::vector<std::uint8_t> bytes, std::string name, std::size_t max_output) {
  IdxFile f;
  f.name_ = std::move(name);
  if (is_gzip(bytes)) {
    f.compressed_ = true;
    const std::size_t compressed_size = bytes.size();
    const AnnouncedSize announced{
        [&](std::span<const std::uint8_t> content) { return f.announced_size(content, compressed_size, max_output); },
        "IDX header"};
    bytes = gunzip(bytes, f.name_, max_output, announced);
  }
  const std::size_t size = bytes.size();
  const std::size_t need = f.read_header(bytes);
  if (size < 4) throw f.error(size, "truncated: " + std::to_string(size) + " bytes is too short for an IDX header");
  if (f.dims_.empty())  // read_header() sets them once the header is whole
    throw f.error(size, "truncated: the header declares " + std::to_string(bytes[3]) + " dimensions, which need " +
                            std::to_string(need) + " bytes, the file has " + std::to_string(size));
  const std::size_t header = f.data_offset_;
  const std::size_t data = need - header;
  const std::size_t have = size - header;
  if (size < need)
    throw f.error(size, "truncated: dimensions " + dims_string(f.dims_) + " of " + std::string(idx_type_name(f.type_)) +
                            " need " + std::to_string(data) + " bytes of data, the file has " + std::to_string(have));
  if (size > need)
    throw f.error(need, std::to_string(have - data) + " trailing bytes after the " + std::to_string(data) +
                            " bytes of data that dimensions " + dims_string(f.dims_) + " describe");
  f.bytes_ = std::move(bytes);
  return f;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_IDX_HPP_INCLUDED
