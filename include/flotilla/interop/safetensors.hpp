// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_INTEROP_SAFETENSORS_HPP_INCLUDED
#define FLOTILLA_INTEROP_SAFETENSORS_HPP_INCLUDED
// The safetensors container (Hugging Face's format, which PyTorch, JAX and numpy programs read):
//
//   8 bytes    N, the header's length, unsigned little-endian
//   N bytes    a JSON object: for each tensor {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//              and "__metadata__": a map of strings to strings
//   the rest   the tensors' bytes, little-endian and row-major, at [b, e) from here
//
// No library is needed to read or write it, and a reader can check every length against the file
// before it allocates: the header's size, each tensor's bytes against its dtype and shape, and the
// data offsets against the data (which they must cover without gaps or overlaps). A file that
// fails a check is refused with the file, the byte offset and the tensor named.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"

namespace flotilla::safetensors {

/// The element types of the format. flotilla's models are F32 or F64; the others are read (and
/// refused by whoever wants a float) so that any valid file opens.
enum class DType { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

/// The dtype's name in the header ("F32").
FLOTILLA_DECL std::string_view name(DType t) noexcept;
/// Bytes per element.
FLOTILLA_DECL std::size_t size_of(DType t) noexcept;

/// The safetensors dtype of a C++ element type (float: F32, double: F64).
template <class T>
constexpr DType dtype_of() noexcept {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "safetensors::dtype_of<T>: flotilla writes tensors of float (F32) or double (F64)");
  return std::is_same_v<T, float> ? DType::F32 : DType::F64;
}

/// One tensor: its name, type, shape (row-major, outermost first) and little-endian bytes.
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
  std::uint64_t offset = 0;  ///< where its bytes start in the file it was read from, for messages

  std::uint64_t elements() const noexcept;
};

/// A whole file in memory: the tensors in the order of their data, and the metadata.
struct File {
  std::vector<Tensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string source = "<safetensors in memory>";  ///< names the file in messages

  /// The tensor called `name`, or nullptr.
  const Tensor* find(std::string_view name) const noexcept;
};

/// The limit on the header's length: the reference implementation's (100 MB), so that a file
/// announcing more is refused before anything is allocated for it.
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

/// The file's bytes: header (padded with spaces to a multiple of 8 bytes, as the reference writer
/// does, so that the data is aligned) and data, in the order of `file.tensors`. Throws Error for a
/// tensor whose bytes do not match its dtype and shape, or for names that repeat.
FLOTILLA_DECL std::vector<std::byte> encode(const File& file);

/// Parses and checks a file held in memory; `source` names it in messages. Throws DataError
/// naming the source, the byte offset and the problem (and the tensor, where one is at fault).
FLOTILLA_DECL File decode(std::span<const std::byte> bytes, std::string source = "<safetensors in memory>");

/// Reads and checks `path` (decode()).
FLOTILLA_DECL File read(const std::filesystem::path& path);

/// Writes `file` to `path` through a temporary file in the same directory, synced and renamed
/// over it: a crash leaves either the old file or the new one, never half of one. Throws
/// CheckpointError naming the path and the operating system's reason.
FLOTILLA_DECL void write(const std::filesystem::path& path, const File& file);

}  // namespace flotilla::safetensors

#if FLOTILLA_IMPLEMENTATION
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace flotilla::safetensors {
namespace detail {

struct DTypeName {
  DType type;
  std::string_view name;
  std::size_t size;
};
inline constexpr DTypeName dtype_names[] = {
    {DType::BOOL, "BOOL", 1}, {DType::U8, "U8", 1},   {DType::I8, "I8", 1},     {DType::I16, "I16", 2},
    {DType::U16, "U16", 2},   {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2}, {DType::I32, "I32", 4},
    {DType::U32, "U32", 4},   {DType::F32, "F32", 4}, {DType::F64, "F64", 8},   {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},
};

/// A JSON reader for the header: objects, arrays, strings and non-negative integers, which is all
/// the format has. Every error names the byte offset in the file.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  File parse(std::uint64_t data_size) {
    File f;
    f.source = source_;
    struct Entry {
      std::string name;
      std::uint64_t begin = 0, end = 0;
      std::size_t at = 0;  // the entry's offset in the file, for messages
    };
    std::vector<Entry> entries;
    skip_space();
    expect('{', "the header is not a JSON object");
    skip_space();
    if (!eat('}')) {
      for (;;) {
        skip_space();
        const std::size_t key_at = pos_;
        std::string key = string();
        skip_space();
        expect(':', "a ':' after the key");
        skip_space();
        if (key == "__metadata__") {
          if (!f.metadata.empty()) fail(key_at, "two \"__metadata__\" entries");
          metadata(f.metadata);
        } else {
          if (key.empty()) fail(key_at, "a tensor with an empty name");
          for (const auto& e : entries)
            if (e.name == key) fail(key_at, "tensor " + quote(key) + " is described twice");
          Tensor t;
          t.name = key;
          Entry e{key, 0, 0, key_at};
          tensor(t, e.begin, e.end);
          entries.push_back(e);
          f.tensors.push_back(std::move(t));
        }
        skip_space();
        if (eat(',')) continue;
        expect('}', "',' or '}' after an entry");
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "text after the header's JSON object");

    // The data: each tensor's bytes inside it, of its dtype and shape, together covering it once.
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Tensor& t = f.tensors[i];
      const Entry& e = entries[i];
      if (e.begin > e.end) fail(e.at, "tensor " + quote(t.name) + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] run backwards");
      if (e.end > data_size)
        fail(e.at, "tensor " + quote(t.name) + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       "] lie outside the " + std::to_string(data_size) + " bytes of data");
      const std::uint64_t want = bytes_of(t, e.at);
      if (e.end - e.begin != want)
        fail(e.at, "tensor " + quote(t.name) + " of " + std::string(name(t.dtype)) + " " + shape_text(t.shape) + " needs " +
                       std::to_string(want) + " bytes, its data_offsets hold " + std::to_string(e.end - e.begin));
    }
    std::vector<std::size_t> order(entries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return entries[a].begin != entries[b].begin ? entries[a].begin < entries[b].begin : entries[a].end < entries[b].end;
    });
    std::uint64_t covered = 0;
    for (const std::size_t i : order) {
      if (entries[i].begin != covered)
        fail(entries[i].at, "tensor " + quote(entries[i].name) + ": its data starts at " + std::to_string(entries[i].begin) +
                                (entries[i].begin < covered ? ", inside the previous tensor's" : ", after a gap from " + std::to_string(covered)));
      covered = entries[i].end;
    }
    if (covered != data_size)
      fail(text_.size(), "the tensors cover " + std::to_string(covered) + " of the " + std::to_string(data_size) +
                             " bytes of data after the header");
    // In the order of their data, so that encode() writes the file back as it was.
    std::vector<Tensor> sorted;
    sorted.reserve(order.size());
    for (const std::size_t i : order) sorted.push_back(std::move(f.tensors[i]));
    f.tensors = std::move(sorted);
    offsets_.clear();
    for (const std::size_t i : order) offsets_.push_back(entries[i].begin);
    return f;
  }
  /// Where each tensor's data starts, in the order parse() returned them.
  const std::vector<std::uint64_t>& offsets() const noexcept { return offsets_; }

  static std::string quote(std::string_view s) {
    std::string q = "'";
    for (const char c : s.substr(0, 200)) q += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    return q + (s.size() > 200 ? "...'" : "'");
  }
  static std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

 private:
  static constexpr std::size_t header_start = 8;  // the header's first byte in the file

  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw DataError(source_, header_start + at, "safetensors header: " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!eat(c)) fail(pos_, std::string("expected ") + what + (pos_ < text_.size() ? "" : " (the header ends here)"));
  }
  std::string string() {
    const std::size_t at = pos_;
    expect('"', "a string");
    std::string s;
    for (;;) {
      if (pos_ >= text_.size()) fail(at, "a string that does not end");
      const char c = text_[pos_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail(pos_ - 1, "a control character inside a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) fail(at, "a string that does not end");
      const char e = text_[pos_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': utf8(s, hex4()); break;
        default: fail(pos_ - 1, std::string("an unknown escape '\\") + e + "' in a string");
      }
    }
  }
  std::uint32_t hex4() {
    if (text_.size() - pos_ < 4) fail(pos_, "a \\u escape shorter than 4 hex digits");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
      else fail(pos_ - 1, "a \\u escape with a character that is not a hex digit");
    }
    return v;
  }
  void utf8(std::string& s, std::uint32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair: the low half follows as \uDC00..\uDFFF
      if (!(eat('\\') && eat('u'))) fail(pos_, "a lone UTF-16 high surrogate in a \\u escape");
      const std::uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail(pos_ - 4, "a UTF-16 high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      fail(pos_ - 4, "a lone UTF-16 low surrogate in a \\u escape");
    }
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::uint64_t integer() {
    const std::size_t at = pos_;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), v);
    if (ec == std::errc::result_out_of_range) fail(at, "a number too large for 64 bits");
    if (ec != std::errc() || end == text_.data() + pos_) fail(at, "expected a non-negative integer");
    pos_ = static_cast<std::size_t>(end - text_.data());
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      fail(at, "a number that is not an integer");
    return v;
  }
  std::vector<std::uint64_t> integers(std::size_t at_most, const char* what) {
    std::vector<std::uint64_t> v;
    const std::size_t at = pos_;
    expect('[', what);
    skip_space();
    if (eat(']')) return v;
    for (;;) {
      skip_space();
      if (v.size() == at_most) fail(at, std::string(what) + " with more than " + std::to_string(at_most) + " entries");
      v.push_back(integer());
      skip_space();
      if (eat(',')) continue;
      expect(']', "',' or ']' in a list of integers");
      return v;
    }
  }
  void metadata(std::map<std::string, std::string>& out) {
    expect('{', "\"__metadata__\" to be an object of strings");
    skip_space();
    if (eat('}')) return;
    for (;;) {
      skip_space();
      const std::size_t at = pos_;
      std::string key = string();
      skip_space();
      expect(':', "a ':' after the key");
      skip_space();
      if (pos_ < text_.size() && text_[pos_] != '"') fail(pos_, "metadata " + quote(key) + " is not a string");
      std::string value = string();
      if (!out.emplace(std::move(key), std::move(value)).second) fail(at, "a metadata key given twice");
      skip_space();
      if (eat(',')) continue;
      expect('}', "',' or '}' in \"__metadata__\"");
      return;
    }
  }
  void tensor(Tensor& t, std::uint64_t& begin, std::uint64_t& end) {
    expect('{', ("tensor " + quote(t.name) + " to be described by an object").c_str());
    bool has_dtype = false, has_shape = false, has_offsets = false;
    skip_space();
    if (!eat('}')) {
      for (;;) {
        skip_space();
        const std::size_t at = pos_;
        const std::string key = string();
        skip_space();
        expect(':', "a ':' after the key");
        skip_space();
        if (key == "dtype" && !has_dtype) {
          const std::size_t type_at = pos_;
          const std::string type = string();
          const auto* d = std::find_if(std::begin(dtype_names), std::end(dtype_names),
                                       [&](const DTypeName& n) { return n.name == type; });
          if (d == std::end(dtype_names)) fail(type_at, "tensor " + quote(t.name) + " has the unknown dtype " + quote(type));
          t.dtype = d->type;
          has_dtype = true;
        } else if (key == "shape" && !has_shape) {
          t.shape = integers(64, "a shape");
          has_shape = true;
        } else if (key == "data_offsets" && !has_offsets) {
          const std::size_t offsets_at = pos_;
          const auto o = integers(2, "data_offsets");
          if (o.size() != 2) fail(offsets_at, "tensor " + quote(t.name) + ": data_offsets must be [begin, end]");
          begin = o[0];
          end = o[1];
          has_offsets = true;
        } else {
          fail(at, "tensor " + quote(t.name) + " has an unknown or repeated key " + quote(key));
        }
        skip_space();
        if (eat(',')) continue;
        expect('}', "',' or '}' in a tensor's description");
        break;
      }
    }
    if (!has_dtype || !has_shape || !has_offsets)
      fail(pos_, "tensor " + quote(t.name) + " lacks " + (!has_dtype ? "\"dtype\"" : !has_shape ? "\"shape\"" : "\"data_offsets\""));
  }
  // The bytes a tensor's dtype and shape need, or a failure when they overflow 64 bits.
  std::uint64_t bytes_of(const Tensor& t, std::size_t at) const {
    std::uint64_t n = size_of(t.dtype);
    for (const auto d : t.shape) {
      if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d)
        fail(at, "tensor " + quote(t.name) + " has a shape " + shape_text(t.shape) + " too large for any file");
      n *= d;
    }
    return n;
  }

  std::string_view text_;
  std::string source_;
  std::size_t pos_ = 0;
  std::vector<std::uint64_t> offsets_;
};

inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace detail

FLOTILLA_DECL std::string_view name(DType t) noexcept {
  for (const auto& n : detail::dtype_names)
    if (n.type == t) return n.name;
  return "?";
}

FLOTILLA_DECL std::size_t size_of(DType t) noexcept {
  for (const auto& n : detail::dtype_names)
    if (n.type == t) return n.size;
  return 1;
}

FLOTILLA_DECL std::uint64_t Tensor::elements() const noexcept {
  std::uint64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

FLOTILLA_DECL const Tensor* File::find(std::string_view wanted) const noexcept {
  for (const auto& t : tensors)
    if (t.name == wanted) return &t;
  return nullptr;
}

FLOTILLA_DECL std::vector<std::byte> encode(const File& file) {
  std::string header = "{";
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : file.metadata) {
      if (!first) header += ',';
      first = false;
      detail::append_json_string(header, k);
      header += ':';
      detail::append_json_string(header, v);
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const Tensor& t = file.tensors[i];
    if (t.name.empty() || t.name == "__metadata__") throw Error("safetensors::encode: a tensor may not be called " + detail::HeaderParser::quote(t.name));
    for (std::size_t j = 0; j < i; ++j)
      if (file.tensors[j].name == t.name) throw Error("safetensors::encode: two tensors called " + detail::HeaderParser::quote(t.name));
    if (t.bytes.size() != t.elements() * size_of(t.dtype))
      throw Error("safetensors::encode: tensor " + detail::HeaderParser::quote(t.name) + " of " + std::string(name(t.dtype)) + " " +
                  detail::HeaderParser::shape_text(t.shape) + " holds " + std::to_string(t.bytes.size()) + " bytes, not " +
                  std::to_string(t.elements() * size_of(t.dtype)));
    if (header.size() > 1) header += ',';
    detail::append_json_string(header, t.name);
    header += ":{\"dtype\":\"" + std::string(name(t.dtype)) + "\",\"shape\":" + detail::HeaderParser::shape_text(t.shape) +
              ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + header.size() + offset);
  std::uint64_t n = header.size();
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((n >> (8 * i)) & 0xFFu);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::byte* data = out.data() + 8 + header.size();
  for (const auto& t : file.tensors) {
    if (!t.bytes.empty()) std::memcpy(data, t.bytes.data(), t.bytes.size());
    data += t.bytes.size();
  }
  return out;
}

FLOTILLA_DECL File decode(std::span<const std::byte> bytes, std::string source) {
  if (bytes.size() < 8)
    throw DataError(source, 0, "not a safetensors file: " + std::to_string(bytes.size()) + " bytes, fewer than the 8 of the header's length");
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < 8; ++i) n |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[i])} << (8 * i);
  if (n > max_header_bytes)
    throw DataError(source, 0, "the header's length is " + std::to_string(n) + " bytes, more than the limit of " + std::to_string(max_header_bytes));
  if (n > bytes.size() - 8)
    throw DataError(source, 0, "the header's length is " + std::to_string(n) + " bytes, but only " + std::to_string(bytes.size() - 8) +
                                   " follow it (a truncated file, or not a safetensors file)");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(n));
  detail::HeaderParser parser(text, source);
  const std::size_t data_start = 8 + static_cast<std::size_t>(n);
  File f = parser.parse(bytes.size() - data_start);
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    f.tensors[i].offset = data_start + parser.offsets()[i];
    const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(f.tensors[i].offset);
    f.tensors[i].bytes.assign(begin, begin + static_cast<std::ptrdiff_t>(f.tensors[i].elements() * size_of(f.tensors[i].dtype)));
  }
  return f;
}

FLOTILLA_DECL File read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string(), 0, "cannot open the safetensors file: " + std::error_code(errno, std::generic_category()).message());
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw DataError(path.string(), 0, "cannot tell the file's size: " + ec.message());
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw DataError(path.string(), static_cast<std::uint64_t>(std::max<std::streamsize>(in.gcount(), 0)), "cannot read the file to its end");
  return decode(bytes, path.string());
}

FLOTILLA_DECL void write(const std::filesystem::path& path, const File& file) {
  const std::vector<std::byte> bytes = encode(file);
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid());
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw CheckpointError(path.string() + ": " + what + ": " + std::error_code(err, std::generic_category()).message() +
                              "; the file there before is unchanged",
                          std::error_code(err, std::generic_category()));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw CheckpointError(path.string() + ": cannot create " + tmp.string() + ": " + std::error_code(err, std::generic_category()).message(),
                          std::error_code(err, std::generic_category()));
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ::ssize_t k = ::write(fd, bytes.data() + done, std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30));
    if (k < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("cannot write " + tmp.string(), err);
    }
    done += static_cast<std::size_t>(k);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot sync " + tmp.string(), err);
  }
  if (::close(fd) != 0) fail("cannot close " + tmp.string(), errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp.string() + " over it", errno);
}

}  // namespace flotilla::safetensors
#endif  // FLOTILLA_IMPLEMENTATION

#endif  // FLOTILLA_INTEROP_SAFETENSORS_HPP_INCLUDED
