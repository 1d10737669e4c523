// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_NPY_HPP_INCLUDED
#define FLOTILLA_DATA_NPY_HPP_INCLUDED
// Reader for NumPy's .npy files (format versions 1.0, 2.0 and 3.0), so that arrays saved with
// np.save() train without a conversion step: the magic string, the version, the header length, a
// header that is a Python dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (60000,
// 784), }), then the values. Numeric and boolean dtypes are read, in either byte order and in C or
// Fortran order; values are converted once, straight into the caller's buffer, in C (row-major)
// order whatever the file's. load_npy_dataset() builds a Dataset from a file of inputs and a file of
// labels or targets.
//
// Input is untrusted. Errors are DataErrors naming the file and a byte offset; nothing is sized from
// a header's word before it has been checked against the bytes the file holds (a shape whose
// product overflows, or whose values would not fit in the file, is refused first).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/gzip.hpp"
#include "flotilla/data/idx.hpp"

namespace flotilla::data {

/// The element types of .npy files that flotilla reads.
enum class NpyType : std::uint8_t { boolean, i8, u8, i16, u16, i32, u32, i64, u64, f16, f32, f64 };

/// Bytes per value.
inline constexpr std::size_t npy_type_size(NpyType t) noexcept {
  switch (t) {
    case NpyType::boolean:
    case NpyType::i8:
    case NpyType::u8:
      return 1;
    case NpyType::i16:
    case NpyType::u16:
    case NpyType::f16:
      return 2;
    case NpyType::i32:
    case NpyType::u32:
    case NpyType::f32:
      return 4;
    case NpyType::i64:
    case NpyType::u64:
    case NpyType::f64:
      return 8;
  }
  return 0;
}

/// NumPy's name of the type ("float32").
inline constexpr std::string_view npy_type_name(NpyType t) noexcept {
  switch (t) {
    case NpyType::boolean:
      return "bool";
    case NpyType::i8:
      return "int8";
    case NpyType::u8:
      return "uint8";
    case NpyType::i16:
      return "int16";
    case NpyType::u16:
      return "uint16";
    case NpyType::i32:
      return "int32";
    case NpyType::u32:
      return "uint32";
    case NpyType::i64:
      return "int64";
    case NpyType::u64:
      return "uint64";
    case NpyType::f16:
      return "float16";
    case NpyType::f32:
      return "float32";
    case NpyType::f64:
      return "float64";
  }
  return "unknown";
}

/// Whether values of the type are integers (bool counts: 0 and 1).
inline constexpr bool npy_type_is_integer(NpyType t) noexcept {
  return t != NpyType::f16 && t != NpyType::f32 && t != NpyType::f64;
}

namespace detail {

/// IEEE half precision to float, exactly (every half is a float).
inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1FU;
  const std::uint32_t mantissa = h & 0x3FFU;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  const std::uint32_t bits = exponent == 0x1F ? sign | 0x7F800000U | (mantissa << 13)
                                              : sign | ((exponent + 112) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

/// Reads an unsigned value of N bytes stored in the given byte order.
template <std::size_t N>
inline auto load_ordered(const std::uint8_t* p, bool big_endian) noexcept {
  using U = std::conditional_t<N == 1, std::uint8_t,
                               std::conditional_t<N == 2, std::uint16_t, std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;
  U v = 0;
  if (big_endian)
    for (std::size_t i = 0; i < N; ++i) v = static_cast<U>(static_cast<U>(v << 8) | p[i]);
  else
    for (std::size_t i = N; i-- > 0;) v = static_cast<U>(static_cast<U>(v << 8) | p[i]);
  return v;
}

/// Value of type `type` at p, converted to U.
template <class U>
inline U load_npy_value(NpyType type, bool big_endian, const std::uint8_t* p) noexcept {
  switch (type) {
    case NpyType::boolean:
      return static_cast<U>(p[0] != 0 ? 1 : 0);
    case NpyType::i8:
      return static_cast<U>(static_cast<std::int8_t>(p[0]));
    case NpyType::u8:
      return static_cast<U>(p[0]);
    case NpyType::i16:
      return static_cast<U>(static_cast<std::int16_t>(load_ordered<2>(p, big_endian)));
    case NpyType::u16:
      return static_cast<U>(load_ordered<2>(p, big_endian));
    case NpyType::i32:
      return static_cast<U>(static_cast<std::int32_t>(load_ordered<4>(p, big_endian)));
    case NpyType::u32:
      return static_cast<U>(load_ordered<4>(p, big_endian));
    case NpyType::i64:
      return static_cast<U>(static_cast<std::int64_t>(load_ordered<8>(p, big_endian)));
    case NpyType::u64:
      return static_cast<U>(load_ordered<8>(p, big_endian));
    case NpyType::f16:
      return static_cast<U>(half_to_float(load_ordered<2>(p, big_endian)));
    case NpyType::f32:
      return static_cast<U>(std::bit_cast<float>(load_ordered<4>(p, big_endian)));
    case NpyType::f64:
      return static_cast<U>(std::bit_cast<double>(load_ordered<8>(p, big_endian)));
  }
  return U{};
}

/// Where a .npy content came from, for error messages: a file, or a member of an .npz archive.
struct NpySource {
  std::string file;          // what DataError::file() names
  std::string member;        // the archive member ("x.npy"); empty for a .npy file
  std::uint64_t base = 0;    // offset of the content in `file` (a stored member's data)
  bool decompressed = false; // offsets are into the inflated member, not into `file`
};

}  // namespace detail

/// A parsed .npy array: its header, and its values still in the file's encoding (they are converted
/// once, into the caller's buffer, by copy_to()).
class NpyArray {
 public:
  /// The file, as errors name it (for an .npz member, the archive).
  const std::string& name() const noexcept { return source_.file; }
  /// The .npz member the array was read from ("x.npy"); empty for an .npy file.
  const std::string& member() const noexcept { return source_.member; }
  NpyType type() const noexcept { return type_; }
  /// The dtype as the header gives it ("<f4").
  const std::string& descr() const noexcept { return descr_; }
  bool big_endian() const noexcept { return big_endian_; }
  /// Whether the values are stored in Fortran (column-major) order.
  bool fortran_order() const noexcept { return fortran_order_; }
  const std::vector<std::size_t>& shape() const noexcept { return shape_; }
  std::size_t rank() const noexcept { return shape_.size(); }
  /// Number of values: the product of the shape (1 for a 0-d array).
  std::size_t count() const noexcept { return count_; }
  /// Format version, e.g. 1 for 1.0.
  int version() const noexcept { return version_; }
  /// Offset of the first value in the content.
  std::size_t data_offset() const noexcept { return data_offset_; }
  /// Offset in the content of value i in C (row-major) order.
  std::size_t offset_of(std::size_t i) const noexcept { return data_offset_ + storage_index(i) * npy_type_size(type_); }
  /// "(60000, 28, 28)", as NumPy writes shapes.
  std::string shape_string() const { return shape_string(shape_); }

  /// Value i in C (row-major) order, converted to U.
  template <class U>
  U at(std::size_t i) const noexcept {
    return detail::load_npy_value<U>(type_, big_endian_, bytes_.data() + offset_of(i));
  }

  /// Converts every value to U, times `scale`, into dst (which must hold count() values), in C
  /// (row-major) order whatever the file's order.
  template <class U>
  void copy_to(std::span<U> dst, U scale = U(1)) const {
    if (dst.size() != count_)
      throw ShapeError("NpyArray::copy_to: destination holds " + std::to_string(dst.size()) + " values, " + what_array() + " has " +
                       std::to_string(count_));
    const std::uint8_t* p = bytes_.data() + data_offset_;
    const std::size_t size = npy_type_size(type_);
    if (!fortran_order_ || rank() < 2) {
      if (type_ == NpyType::f32 && !big_endian_ && std::endian::native == std::endian::little) {
        for (std::size_t i = 0; i < count_; ++i) {  // the common case, kept a loop that vectorises
          float f;
          std::memcpy(&f, p + 4 * i, 4);
          dst[i] = static_cast<U>(f) * scale;
        }
        return;
      }
      for (std::size_t i = 0; i < count_; ++i) dst[i] = detail::load_npy_value<U>(type_, big_endian_, p + i * size) * scale;
      return;
    }
    // Fortran order: walk the values as stored (first axis fastest) and place each at its C index.
    const std::size_t r = rank();
    std::vector<std::size_t> c_stride(r, 1);
    for (std::size_t k = r - 1; k-- > 0;) c_stride[k] = c_stride[k + 1] * shape_[k + 1];
    std::vector<std::size_t> index(r, 0);
    std::size_t c = 0;
    for (std::size_t s = 0; s < count_; ++s) {
      dst[c] = detail::load_npy_value<U>(type_, big_endian_, p + s * size) * scale;
      for (std::size_t k = 0; k < r; ++k) {
        c += c_stride[k];
        if (++index[k] < shape_[k]) break;
        c -= c_stride[k] * shape_[k];
        index[k] = 0;
      }
    }
  }

  /// Every value, converted to U, in C order.
  template <class U>
  std::vector<U> values() const {
    std::vector<U> out(count_);
    copy_to(std::span<U>(out));
    return out;
  }

  /// A DataError for this array at `offset` of its content: the file and the offset in it, the
  /// member of an archive, and a note when the offset is into a decompressed member.
  DataError error(std::size_t offset, const std::string& what) const { return error(source_, offset, what); }

  /// "x.npy in data.npz" for a member, the file name otherwise.
  std::string what_array() const { return source_.member.empty() ? source_.file : source_.member + " in " + source_.file; }

  FLOTILLA_DECL static std::string shape_string(const std::vector<std::size_t>& shape);
  FLOTILLA_DECL static DataError error(const detail::NpySource& source, std::size_t offset, const std::string& what);

  /// Parses .npy content; `source` says where it came from, for error messages.
  FLOTILLA_DECL static NpyArray parse(std::vector<std::uint8_t> bytes, detail::NpySource source);

  /// Headers longer than this are refused (NumPy writes a few hundred bytes at most).
  static constexpr std::size_t max_header_bytes = std::size_t{1} << 20;

 private:
  // Index among the stored values of value i in C order: its multi-index, last axis fastest, laid
  // out again first axis fastest.
  std::size_t storage_index(std::size_t i) const noexcept {
    if (!fortran_order_ || shape_.size() < 2) return i;
    std::size_t s = 0;
    std::size_t tail = 1;  // product of the axes after k, then of k too
    for (std::size_t k = shape_.size(); k-- > 0;) {
      const std::size_t j = i % shape_[k];
      i /= shape_[k];
      tail *= shape_[k];
      s += j * (count_ / tail);  // count_ / tail: the product of the axes before k
    }
    return s;
  }

  FLOTILLA_DECL void parse_header(std::string_view header, std::size_t at);

  detail::NpySource source_;
  NpyType type_ = NpyType::f32;
  std::string descr_;
  bool big_endian_ = false;
  bool fortran_order_ = false;
  std::vector<std::size_t> shape_;
  std::size_t count_ = 0;
  int version_ = 1;
  std::size_t data_offset_ = 0;
  std::vector<std::uint8_t> bytes_;
};

/// Parses .npy content held in memory; `name` is what errors call it.
inline NpyArray parse_npy(std::vector<std::uint8_t> bytes, std::string name) {
  return NpyArray::parse(std::move(bytes), detail::NpySource{std::move(name), {}, 0, false});
}

/// Reads and parses a .npy file.
inline NpyArray read_npy(const std::filesystem::path& path) { return parse_npy(read_file(path), path.string()); }

/// How load_npy_dataset() and load_npz_dataset() read their second array, and what they check.
struct ArrayDatasetOptions {
  /// `labels`: the second array holds class labels, integers in [0, classes); `values`: it holds
  /// regression targets, (samples) or (samples, outputs...).
  TargetKind kind = TargetKind::labels;
  /// Number of classes, for labels; 0: the largest label + 1.
  std::size_t classes = 0;
  /// Inputs are multiplied by this (1/255 maps uint8 pixels to [0, 1]).
  double scale = 1;
  /// NaN and infinite inputs or targets are errors unless this is set.
  bool allow_non_finite = false;
  /// The data set's name, for messages; empty: the inputs file's.
  std::string name;
};

namespace detail {

/// The first value of `values` (count values in C order) that is NaN or infinite, or count.
template <class T>
inline std::size_t first_non_finite(const T* values, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) return i;
  return count;
}

inline std::string value_position(const NpyArray& a, std::size_t i) {
  if (a.rank() < 2) return "value " + std::to_string(i);
  const std::size_t per_sample = a.count() / a.shape()[0];
  return "sample " + std::to_string(i / per_sample) + ", value " + std::to_string(i % per_sample);
}

/// A Dataset from an array of inputs (samples first) and an array of labels or targets.
template <class T>
inline Dataset<T> dataset_from_arrays(const NpyArray& x, const NpyArray& y, const ArrayDatasetOptions& options) {
  static_assert(std::is_floating_point_v<T>, "Dataset values are floating point");
  if (options.kind == TargetKind::labels && options.classes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ConfigError("ArrayDatasetOptions::classes must be below 2^31, got " + std::to_string(options.classes));
  if (!std::isfinite(options.scale)) throw ConfigError("ArrayDatasetOptions::scale must be finite");
  if (x.rank() == 0)
    throw x.error(8, "inputs must have a first dimension, the samples (shape (samples, features...)); this array is a scalar");
  const std::size_t samples = x.shape()[0];
  if (samples == 0) throw x.error(8, "inputs hold no samples: shape " + x.shape_string());
  const std::size_t features = x.count() / samples;
  if (features == 0) throw x.error(8, "inputs have no features: shape " + x.shape_string());
  if (y.rank() == 0) throw y.error(8, "labels or targets must have one entry per sample; this array is a scalar");
  if (y.shape()[0] != samples)
    throw y.error(8, "holds " + std::to_string(y.shape()[0]) + " entries (shape " + y.shape_string() + ") but " + x.what_array() +
                         " holds " + std::to_string(samples) + " samples (shape " + x.shape_string() + ")");

  Dataset<T> data;
  data.name = options.name.empty() ? x.what_array() : options.name;
  if (options.kind == TargetKind::labels) {
    if (y.rank() > 2 || (y.rank() == 2 && y.shape()[1] != 1))
      throw y.error(8, "labels must have shape (samples) or (samples, 1), not " + y.shape_string() +
                           " (for regression targets, set ArrayDatasetOptions::kind = TargetKind::values)");
    if (!npy_type_is_integer(y.type()))
      throw y.error(8, "labels must be integers, this array holds " + std::string(npy_type_name(y.type())) +
                           " (convert with .astype(np.int64), or set ArrayDatasetOptions::kind = TargetKind::values for "
                           "regression targets)");
    const bool is_signed = y.type() == NpyType::i8 || y.type() == NpyType::i16 || y.type() == NpyType::i32 || y.type() == NpyType::i64;
    data.labels.resize(samples);
    std::int64_t largest = -1;
    for (std::size_t i = 0; i < samples; ++i) {
      const auto v = is_signed ? y.at<std::int64_t>(i) : static_cast<std::int64_t>(std::min<std::uint64_t>(
                                                             y.at<std::uint64_t>(i), std::uint64_t{1} << 62));
      const std::int64_t bound = options.classes != 0 ? static_cast<std::int64_t>(options.classes)
                                                      : std::int64_t{std::numeric_limits<std::int32_t>::max()};
      if (v < 0 || v >= bound)
        throw y.error(y.offset_of(i), "sample " + std::to_string(i) + " has label " +
                                          (is_signed ? std::to_string(v) : std::to_string(y.at<std::uint64_t>(i))) +
                                          (options.classes != 0 ? ", outside [0, " + std::to_string(options.classes) + ")"
                                                                : ": labels must be class numbers in [0, 2^31 - 1)"));
      data.labels[i] = static_cast<std::int32_t>(v);
      largest = std::max(largest, v);
    }
    data.classes = options.classes != 0 ? options.classes : static_cast<std::size_t>(largest + 1);
  } else {
    const std::size_t outputs = y.count() / samples;
    if (outputs == 0) throw y.error(8, "targets have no values per sample: shape " + y.shape_string());
    data.targets.resize(static_cast<Eigen::Index>(outputs), static_cast<Eigen::Index>(samples));
    y.copy_to(std::span<T>(data.targets.data(), y.count()));
    if (!options.allow_non_finite)
      if (const std::size_t bad = first_non_finite(data.targets.data(), y.count()); bad != y.count())
        throw y.error(y.offset_of(bad), value_position(y, bad) + " is " + std::to_string(data.targets.data()[bad]) +
                                            " as " + (sizeof(T) == 4 ? "float" : "double") +
                                            " (set ArrayDatasetOptions::allow_non_finite to accept NaN and infinity)");
  }
  data.inputs.resize(static_cast<Eigen::Index>(features), static_cast<Eigen::Index>(samples));
  // Samples first and C order make each sample's values consecutive: exactly one column of the
  // column-major inputs matrix.
  x.copy_to(std::span<T>(data.inputs.data(), x.count()), static_cast<T>(options.scale));
  if (!options.allow_non_finite)
    if (const std::size_t bad = first_non_finite(data.inputs.data(), x.count()); bad != x.count())
      throw x.error(x.offset_of(bad), value_position(x, bad) + " is " + std::to_string(data.inputs.data()[bad]) + " as " +
                                          (sizeof(T) == 4 ? "float" : "double") +
                                          (options.scale != 1 ? " after scaling" : "") +
                                          " (set ArrayDatasetOptions::allow_non_finite to accept NaN and infinity)");
  return data;
}

}  // namespace detail

/// Loads a data set from two .npy files: inputs of shape (samples, features...), each sample
/// flattened in C order into one column (times options.scale), and labels of shape (samples) (or
/// (samples, 1)), integers; or, with options.kind = TargetKind::values, regression targets of shape
/// (samples) or (samples, outputs...). Throws DataError naming the file and byte offset of the
/// problem, ConfigError for options that cannot work.
template <class T>
inline Dataset<T> load_npy_dataset(const std::filesystem::path& inputs_path, const std::filesystem::path& labels_path,
                                   const ArrayDatasetOptions& options = {}) {
  // Labels first: they are small, so a bad pair is reported before the large file is read.
  const NpyArray labels = read_npy(labels_path);
  const NpyArray inputs = read_npy(inputs_path);
  return detail::dataset_from_arrays<T>(inputs, labels, options);
}

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL std::string NpyArray::shape_string(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

FLOTILLA_DECL DataError NpyArray::error(const detail::NpySource& source, std::size_t offset, const std::string& what) {
  std::string message = source.member.empty() ? what : "member '" + source.member + "': " + what;
  if (source.decompressed) message += " (offset in the decompressed member)";
  return DataError(source.file, source.base + offset, message);
}

namespace detail {

/// A cursor over the header's dict literal, which is Python syntax: NumPy writes it with repr()
/// and reads it with ast.literal_eval(), so it is parsed as such, not matched as a pattern.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, std::size_t at, const NpySource& source) : text_(text), at_(at), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw NpyArray::error(source_, at_ + pos_, "header: " + what + ", at " + context());
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!accept(c)) fail(std::string("expected ") + what);
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted string");
    const char quote = text_[pos_++];
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') fail("unsupported character in a string");
      s += text_[pos_++];
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("expected True or False");
  }
  std::vector<std::size_t> shape() {
    expect('(', "a tuple '(' for the shape");
    std::vector<std::size_t> dims;
    for (;;) {
      if (accept(')')) break;
      if (!dims.empty()) {
        expect(',', "',' or ')' in the shape");
        if (accept(')')) break;
      }
      skip_space();
      const std::size_t start = pos_;
      std::size_t dim = 0;
      const auto r = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), dim);
      if (r.ec == std::errc::result_out_of_range) fail("dimension " + std::to_string(dims.size()) + " is too large");
      if (r.ec != std::errc() || r.ptr == text_.data() + start) fail("expected a non-negative integer dimension");
      pos_ = static_cast<std::size_t>(r.ptr - text_.data());
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long literal
      dims.push_back(dim);
    }
    return dims;
  }
  std::size_t pos() const noexcept { return pos_; }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }

 private:
  std::string context() const {
    if (pos_ >= text_.size()) return "the end of the header";
    return quote_text(text_.substr(pos_, 20));
  }
  static std::string quote_text(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
        out += ch;
      } else {
        out += "\\x";
        out += "0123456789abcdef"[c >> 4];
        out += "0123456789abcdef"[c & 0xFU];
      }
    }
    return out + "\"";
  }

  std::string_view text_;
  std::size_t at_;
  std::size_t pos_ = 0;
  const NpySource& source_;
};

}  // namespace detail

FLOTILLA_DECL void NpyArray::parse_header(std::string_view header, std::size_t at) {
  detail::NpyHeaderParser p(header, at, source_);
  p.expect('{', "'{' opening the header's dict");
  bool have_descr = false, have_order = false, have_shape = false;
  std::size_t descr_at = 0;
  for (;;) {
    if (p.accept('}')) break;
    if (have_descr || have_order || have_shape) {
      p.expect(',', "',' or '}' in the header's dict");
      if (p.accept('}')) break;
    }
    p.skip_space();
    const std::size_t key_at = p.pos();
    const std::string key = p.string_literal();
    p.expect(':', "':' after a key");
    bool* seen = nullptr;
    if (key == "descr") {
      seen = &have_descr;
      p.skip_space();
      descr_at = p.pos();
      if (p.accept('['))
        throw error(at + descr_at, "header: a list of fields as 'descr' is a structured dtype, which is not supported: save each "
                                   "field as its own array");
      descr_ = p.string_literal();
    } else if (key == "fortran_order") {
      seen = &have_order;
      fortran_order_ = p.boolean();
    } else if (key == "shape") {
      seen = &have_shape;
      shape_ = p.shape();
    } else {
      throw error(at + key_at, "header: unknown key '" + key + "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
    }
    if (*seen) throw error(at + key_at, "header: key '" + key + "' appears twice");
    *seen = true;
  }
  if (!p.at_end()) p.fail("unexpected text after the header's dict");
  if (!have_descr || !have_order || !have_shape)
    throw error(at, std::string("header: missing key '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'");

  // descr: byte order, kind, size ("<f4", "|u1", ">i8", "|b1").
  const std::string supported =
      " (supported: bool, int8/16/32/64, uint8/16/32/64, float16/32/64, in either byte order)";
  const std::size_t d = at + descr_at;
  if (descr_.size() < 2) throw error(d, "dtype '" + descr_ + "' is not one flotilla reads" + supported);
  const char order = descr_[0];
  if (order != '<' && order != '>' && order != '|')
    throw error(d, "dtype '" + descr_ + "' has no explicit byte order ('<', '>' or '|'), so its values cannot be read safely" + supported);
  big_endian_ = order == '>';
  const std::string_view code = std::string_view(descr_).substr(1);
  struct Known {
    std::string_view code;
    NpyType type;
  };
  static constexpr Known known[] = {{"b1", NpyType::boolean}, {"?", NpyType::boolean}, {"i1", NpyType::i8}, {"u1", NpyType::u8},
                                    {"i2", NpyType::i16},     {"u2", NpyType::u16},     {"i4", NpyType::i32}, {"u4", NpyType::u32},
                                    {"i8", NpyType::i64},     {"u8", NpyType::u64},     {"f2", NpyType::f16}, {"f4", NpyType::f32},
                                    {"f8", NpyType::f64}};
  const auto it = std::find_if(std::begin(known), std::end(known), [&](const Known& k) { return k.code == code; });
  if (it == std::end(known)) {
    std::string kind = "is not one flotilla reads";
    if (code[0] == 'c') kind = "is complex, which flotilla does not read";
    if (code[0] == 'O') kind = "holds Python objects (pickled), which flotilla does not read";
    if (code[0] == 'U' || code[0] == 'S') kind = "holds strings, which flotilla does not read";
    if (code[0] == 'M' || code[0] == 'm') kind = "holds dates or times, which flotilla does not read";
    if (code[0] == 'V') kind = "is raw bytes or a structure, which flotilla does not read";
    throw error(d, "dtype '" + descr_ + "' " + kind + supported);
  }
  type_ = it->type;
}

FLOTILLA_DECL NpyArray NpyArray::parse(std::vector<std::uint8_t> bytes, detail::NpySource source) {
  NpyArray a;
  a.source_ = std::move(source);
  const std::size_t size = bytes.size();
  static constexpr std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size >= 2 && bytes[0] == 'P' && bytes[1] == 'K')
    throw a.error(0, "not a .npy file: this is a zip archive (an .npz file?); read it with read_npz()");
  for (std::size_t i = 0; i < std::min<std::size_t>(size, 6); ++i)
    if (bytes[i] != magic[i]) throw a.error(i, "not a .npy file: it must start with the bytes \\x93NUMPY");
  if (size < 10) throw a.error(size, "truncated: " + std::to_string(size) + " bytes is too short for a .npy header");
  const int major = bytes[6];
  const int minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw a.error(6, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                         " is not supported (1.0, 2.0 and 3.0 are)");
  a.version_ = major;
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t header_at = 8 + length_bytes;
  if (size < header_at) throw a.error(size, "truncated: the file ends inside the header length");
  const std::size_t header_len = major == 1 ? detail::load_le16(bytes.data() + 8) : detail::load_le32(bytes.data() + 8);
  if (header_len > max_header_bytes)
    throw a.error(8, "header length " + std::to_string(header_len) + " is more than the " + std::to_string(max_header_bytes) +
                         " bytes allowed");
  if (header_len > size - header_at)
    throw a.error(size, "truncated: the header length says " + std::to_string(header_len) + " bytes, the file has " +
                            std::to_string(size - header_at) + " after it");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_at), header_len);
  a.parse_header(header, header_at);

  const std::size_t elem = npy_type_size(a.type_);
  const std::size_t data_at = header_at + header_len;
  const std::size_t available = size - data_at;
  std::size_t count = 1;
  bool too_many = false;
  for (const std::size_t dim : a.shape_) {
    if (dim != 0 && count > std::numeric_limits<std::size_t>::max() / dim) too_many = true;
    count *= dim;  // wraps when too_many, never read then
  }
  const bool empty = std::find(a.shape_.begin(), a.shape_.end(), std::size_t{0}) != a.shape_.end();
  if (empty) count = 0;
  if ((too_many && !empty) || count > available / elem)
    throw a.error(size, "truncated: shape " + a.shape_string() + " of " + std::string(npy_type_name(a.type_)) +
                            (too_many && !empty ? " overflows: its size does not fit in 64 bits"
                                                : " needs " + std::to_string(count) + " x " + std::to_string(elem) +
                                                      " bytes of data, the file has " + std::to_string(available)));
  if (available > count * elem)
    throw a.error(data_at + count * elem, std::to_string(available - count * elem) + " trailing bytes after the " +
                                              std::to_string(count * elem) + " bytes of data that shape " + a.shape_string() +
                                              " describes");
  a.count_ = count;
  a.data_offset_ = data_at;
  a.bytes_ = std::move(bytes);
  return a;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_NPY_HPP_INCLUDED
