// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_CSV_HPP_INCLUDED
#define FLOTILLA_DATA_CSV_HPP_INCLUDED
// A Dataset from a CSV file with a header row, as spreadsheets, pandas (to_csv) and np.savetxt
// write them: columns are chosen by name, one label column for classification or one or more
// target columns for regression, and the rest (or a chosen list) are the features.
//
// Fields are separated by a delimiter (',' unless told), quoted as RFC 4180 says ("a, b" and
// "say ""hi""" are fields; a quoted field must end on its line), with spaces around a field ignored.
// Numbers are read by std::from_chars, so a file reads the same whatever the locale. Blank lines
// are skipped, a '\r' ending a line is dropped, a UTF-8 byte order mark before the header is
// ignored, and a gzip-compressed file is read as the text it holds (line_reader.hpp).
//
// Every problem is a DataError naming the file and the byte offset of the field, and in its
// message the line and the 1-based column, the column's name and the text found. A value that is
// missing, not a number, or NaN or infinite (unless allowed) is an error, never a silent zero.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
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
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/line_reader.hpp"

namespace flotilla::data {

/// Which columns of a CSV file are what, and how they are read.
struct CsvOptions {
  /// The label column, for classification: each value a class number 0, 1, ... (or a name of
  /// class_names). Exactly one of `label` and `targets` is given.
  std::string label;
  /// The target columns, for regression: one or more.
  std::vector<std::string> targets;
  /// The feature columns, in the order the inputs take them; empty: every column that is not the
  /// label, a target or ignored, in the file's order.
  std::vector<std::string> features;
  /// Columns that are none of these (an id, a text column): not read at all.
  std::vector<std::string> ignore;
  /// Number of classes; 0: the largest label + 1 (with class_names, their number).
  std::size_t classes = 0;
  /// When not empty, labels are these names and a label's class is its index here (iris's
  /// "setosa", "versicolor", "virginica").
  std::vector<std::string> class_names;
  /// The field separator: ',' , ';', '\t', ' ', ... (not '"' or a line break).
  char delimiter = ',';
  /// NaN and infinite values ("nan", "inf") are errors unless this is set.
  bool allow_non_finite = false;
  /// The longest line accepted.
  std::size_t max_line_bytes = std::size_t{1} << 20;
  /// The data set's name, for messages; empty: the file's.
  std::string name;
};

namespace detail {

/// One field of a CSV line: its text (inside the quotes when quoted, with "" still doubled), the
/// offset of its first byte in the line, and whether it holds a doubled quote.
struct CsvField {
  std::string_view text;
  std::size_t pos = 0;
  bool quoted = false;
  bool escaped = false;
};

/// Which field of a line is what.
struct CsvColumns {
  std::vector<std::string> names;     // the header's, unquoted
  std::vector<std::size_t> features;  // field indices, in the inputs' order
  std::vector<std::size_t> targets;
  std::size_t label = std::numeric_limits<std::size_t>::max();
};

/// Splits one line (without its newline and '\r') into fields; throws DataError at a quoted field
/// that does not end on the line or has text after its closing quote.
FLOTILLA_DECL void split_csv_line(std::string_view text, char delimiter, const std::string& file, const Line& line,
                                  std::vector<CsvField>& out);

/// A field's text with "" turned into ".
FLOTILLA_DECL std::string unquote_csv(const CsvField& f);

/// Matches the options' column names with the header's; throws DataError at the header line for a
/// name the header lacks or holds twice, or an unnamed column that would be read as a feature.
FLOTILLA_DECL CsvColumns resolve_csv_columns(std::vector<std::string> names, const CsvOptions& options, const std::string& file,
                                             const Line& header);

FLOTILLA_DECL void check_csv_options(const CsvOptions& options);

/// "line 7, column 3 (\"width\"): " + what, at the field's offset.
[[noreturn]] inline void csv_error(const std::string& file, const Line& line, std::size_t pos, std::size_t column,
                                   const std::string& name, const std::string& what) {
  throw DataError(file, line.offset + pos,
                  "line " + std::to_string(line.number) + ", column " + std::to_string(column + 1) + " (" + quote_field(name) +
                      "): " + what);
}

/// Parses a finite (or, when allowed, any) number of type T from a field.
template <class T>
inline T parse_csv_number(const CsvField& f, bool allow_non_finite, const std::string& file, const Line& line, std::size_t column,
                          const std::string& name) {
  std::string_view s = f.text;
  if (s.empty()) csv_error(file, line, f.pos, column, name, "empty field: missing values are not supported");
  if (s[0] == '+') s.remove_prefix(1);
  T value{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (r.ptr != s.data() + s.size() || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) || s.empty() || f.escaped)
    csv_error(file, line, f.pos, column, name, "not a number: found " + quote_field(f.text));
  if (r.ec == std::errc::result_out_of_range) {
    // Out of range is also what a value too small for T reports; that one rounds to zero or a
    // subnormal, as a cast from a wider type would.
    long double wide = 0;
    const auto w = std::from_chars(s.data(), s.data() + s.size(), wide);
    if (w.ec != std::errc() || !(std::fabs(wide) < 1))
      csv_error(file, line, f.pos, column, name,
                std::string("out of range for ") + (sizeof(T) == 4 ? "float" : "double") + ": found " + quote_field(f.text));
    value = static_cast<T>(wide);
  }
  if (!allow_non_finite && !std::isfinite(value))
    csv_error(file, line, f.pos, column, name,
              "not a finite number: found " + quote_field(f.text) + " (set CsvOptions::allow_non_finite to accept NaN and infinity)");
  return value;
}

FLOTILLA_DECL std::int32_t parse_csv_label(const CsvField& f, const CsvOptions& options, const std::string& file, const Line& line,
                                           std::size_t column, const std::string& name);

/// Reads the lines of `lines` into a data set.
template <class T>
inline Dataset<T> read_csv_dataset(LineReader& lines, const CsvOptions& options) {
  static_assert(std::is_floating_point_v<T>, "Dataset values are floating point");
  check_csv_options(options);
  const std::string& file = lines.name();
  const auto blank = [](std::string_view t) { return t.find_first_not_of(" \t") == std::string_view::npos; };
  Line line;
  std::vector<CsvField> fields;
  std::string_view text;
  const auto next_line = [&]() -> bool {
    while (lines.next(line)) {
      if (line.too_long)
        throw DataError(file, line.offset, "line " + std::to_string(line.number) + ": longer than max_line_bytes = " +
                                               std::to_string(options.max_line_bytes) + " bytes");
      text = line.text;
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      if (line.number == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") {
        text.remove_prefix(3);
        line.offset += 3;
        line.text = line.text.substr(3);
      }
      if (!blank(text)) return true;
    }
    return false;
  };

  if (!next_line()) throw DataError(file, 0, "empty: no header row (the first line must name the columns)");
  split_csv_line(text, options.delimiter, file, line, fields);
  std::vector<std::string> names;
  names.reserve(fields.size());
  for (const auto& f : fields) names.push_back(unquote_csv(f));
  const CsvColumns columns = resolve_csv_columns(std::move(names), options, file, line);
  const std::size_t width = columns.names.size();

  Dataset<T> data;
  data.name = options.name.empty() ? file : options.name;
  std::vector<T> inputs, targets;
  std::int32_t largest = -1;
  std::uint64_t end = line.offset + line.text.size();
  while (next_line()) {
    split_csv_line(text, options.delimiter, file, line, fields);
    if (fields.size() < width)
      throw DataError(file, line.offset + text.size(),
                      "line " + std::to_string(line.number) + ", column " + std::to_string(fields.size() + 1) + ": " +
                          std::to_string(fields.size()) + " fields, the header names " + std::to_string(width) + " columns");
    if (fields.size() > width)
      throw DataError(file, line.offset + fields[width].pos,
                      "line " + std::to_string(line.number) + ", column " + std::to_string(width + 1) + ": " +
                          std::to_string(fields.size()) + " fields, the header names " + std::to_string(width) + " columns");
    for (const std::size_t c : columns.features)
      inputs.push_back(parse_csv_number<T>(fields[c], options.allow_non_finite, file, line, c, columns.names[c]));
    for (const std::size_t c : columns.targets)
      targets.push_back(parse_csv_number<T>(fields[c], options.allow_non_finite, file, line, c, columns.names[c]));
    if (columns.targets.empty()) {
      const std::size_t c = columns.label;
      const std::int32_t label = parse_csv_label(fields[c], options, file, line, c, columns.names[c]);
      data.labels.push_back(label);
      largest = std::max(largest, label);
    }
    end = line.offset + line.text.size();
  }
  const std::size_t samples = data.labels.size() + (columns.targets.empty() ? 0 : targets.size() / columns.targets.size());
  if (samples == 0) throw DataError(file, end, "no data rows after the header");
  // Row-major samples are the column-major (features x samples) matrix as they are.
  data.inputs = ConstMatrixView<T>(inputs.data(), static_cast<Eigen::Index>(columns.features.size()), static_cast<Eigen::Index>(samples));
  if (!columns.targets.empty()) {
    data.targets =
        ConstMatrixView<T>(targets.data(), static_cast<Eigen::Index>(columns.targets.size()), static_cast<Eigen::Index>(samples));
  } else {
    data.classes = options.classes != 0            ? options.classes
                   : !options.class_names.empty() ? options.class_names.size()
                                                   : static_cast<std::size_t>(largest) + 1;
  }
  return data;
}

}  // namespace detail

/// Loads a data set from a CSV file with a header row (plain or gzip-compressed). Throws DataError
/// naming the file, the byte offset, the line and column of the problem; ConfigError for options
/// that cannot work (neither or both of label and targets, a column chosen twice).
template <class T>
inline Dataset<T> load_csv_dataset(const std::filesystem::path& path, const CsvOptions& options) {
  detail::check_csv_options(options);
  LineReaderOptions lo;
  lo.max_line_bytes = options.max_line_bytes;
  LineReader lines(path.string(), lo);
  return detail::read_csv_dataset<T>(lines, options);
}

/// The same from CSV text in memory; `name` is what errors call it.
template <class T>
inline Dataset<T> parse_csv_dataset(std::string name, std::span<const std::uint8_t> bytes, const CsvOptions& options) {
  detail::check_csv_options(options);
  LineReaderOptions lo;
  lo.max_line_bytes = options.max_line_bytes;
  lo.chunk_bytes = std::min<std::size_t>(lo.chunk_bytes, std::max<std::size_t>(bytes.size(), 1));
  LineReader lines(std::move(name), bytes, lo);
  return detail::read_csv_dataset<T>(lines, options);
}

#if FLOTILLA_IMPLEMENTATION
namespace detail {

FLOTILLA_DECL void split_csv_line(std::string_view text, char delimiter, const std::string& file, const Line& line,
                                  std::vector<CsvField>& out) {
  out.clear();
  const auto space = [delimiter](char c) { return (c == ' ' || c == '\t') && c != delimiter; };
  const std::size_t n = text.size();
  std::size_t pos = 0;
  for (;;) {
    CsvField f;
    std::size_t s = pos;
    while (s < n && space(text[s])) ++s;
    std::size_t next = n;  // where the next field starts, after the delimiter; n + 1: none follows
    if (s < n && text[s] == '"') {
      f.quoted = true;
      std::size_t i = s + 1;
      while (i < n) {
        if (text[i] != '"') {
          ++i;
        } else if (i + 1 < n && text[i + 1] == '"') {
          f.escaped = true;
          i += 2;
        } else {
          break;
        }
      }
      if (i >= n)
        throw DataError(file, line.offset + s,
                        "line " + std::to_string(line.number) + ", column " + std::to_string(out.size() + 1) +
                            ": the quoted field does not end on its line (line breaks inside quotes are not supported): found " +
                            quote_field(text.substr(s)));
      f.text = text.substr(s + 1, i - s - 1);
      f.pos = s + 1;
      std::size_t j = i + 1;
      while (j < n && space(text[j])) ++j;
      if (j < n && text[j] != delimiter)
        throw DataError(file, line.offset + j,
                        "line " + std::to_string(line.number) + ", column " + std::to_string(out.size() + 1) +
                            ": text after the closing quote: found " + quote_field(text.substr(j)));
      next = j < n ? j + 1 : n + 1;
    } else {
      const std::size_t d = text.find(delimiter, s);
      std::size_t e = d == std::string_view::npos ? n : d;
      while (e > s && space(text[e - 1])) --e;
      f.text = text.substr(s, e - s);
      f.pos = s;
      next = d == std::string_view::npos ? n + 1 : d + 1;
    }
    out.push_back(f);
    if (next > n) break;
    pos = next;
  }
}

FLOTILLA_DECL std::string unquote_csv(const CsvField& f) {
  std::string s;
  s.reserve(f.text.size());
  for (std::size_t i = 0; i < f.text.size(); ++i) {
    s += f.text[i];
    if (f.text[i] == '"' && i + 1 < f.text.size() && f.text[i + 1] == '"') ++i;
  }
  return s;
}

FLOTILLA_DECL void check_csv_options(const CsvOptions& o) {
  if (o.label.empty() == o.targets.empty())
    throw ConfigError(o.label.empty() ? "CsvOptions: name the label column (classification) or the target columns (regression)"
                                      : "CsvOptions: give a label column or target columns, not both");
  if (o.delimiter == '"' || o.delimiter == '\n' || o.delimiter == '\r')
    throw ConfigError("CsvOptions: the delimiter cannot be a quote or a line break");
  if (o.classes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ConfigError("CsvOptions: classes must be below 2^31, got " + std::to_string(o.classes));
  if (!o.class_names.empty() && o.classes != 0 && o.classes != o.class_names.size())
    throw ConfigError("CsvOptions: " + std::to_string(o.class_names.size()) + " class_names but classes = " + std::to_string(o.classes));
  if (!o.class_names.empty() && !o.targets.empty()) throw ConfigError("CsvOptions: class_names are for a label column, not targets");
  for (std::size_t i = 0; i < o.class_names.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.class_names[i] == o.class_names[j]) throw ConfigError("CsvOptions: class name \"" + o.class_names[i] + "\" is given twice");
  if (o.max_line_bytes == 0 || o.max_line_bytes > (std::size_t{1} << 30))
    throw ConfigError("CsvOptions: max_line_bytes must be between 1 and 2^30, not " + std::to_string(o.max_line_bytes));
  // A column may play one part only.
  std::vector<std::pair<std::string, const char*>> chosen;
  if (!o.label.empty()) chosen.emplace_back(o.label, "the label");
  for (const auto& t : o.targets) chosen.emplace_back(t, "a target");
  for (const auto& f : o.features) chosen.emplace_back(f, "a feature");
  for (const auto& g : o.ignore) chosen.emplace_back(g, "ignored");
  for (std::size_t i = 0; i < chosen.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (chosen[i].first == chosen[j].first)
        throw ConfigError("CsvOptions: column \"" + chosen[i].first + "\" is chosen as " + chosen[j].second + " and as " +
                          chosen[i].second);
}

FLOTILLA_DECL CsvColumns resolve_csv_columns(std::vector<std::string> names, const CsvOptions& options, const std::string& file,
                                             const Line& header) {
  CsvColumns c;
  c.names = std::move(names);
  const auto header_error = [&](const std::string& what) {
    throw DataError(file, header.offset, "line " + std::to_string(header.number) + " (the header): " + what);
  };
  const auto listing = [&] {
    std::string s;
    for (std::size_t i = 0; i < c.names.size() && i < 20; ++i) s += (i == 0 ? "" : ", ") + quote_field(c.names[i]);
    return s + (c.names.size() > 20 ? ", ..." : "");
  };
  const auto find = [&](const std::string& name, const char* part) {
    std::size_t at = c.names.size();
    for (std::size_t i = 0; i < c.names.size(); ++i) {
      if (c.names[i] != name) continue;
      if (at != c.names.size())
        header_error("columns " + std::to_string(at + 1) + " and " + std::to_string(i + 1) + " are both named " + quote_field(name) +
                     ", so " + part + " column is ambiguous");
      at = i;
    }
    if (at == c.names.size()) header_error(std::string("no column named ") + quote_field(name) + " for " + part + " (the columns are " + listing() + ")");
    return at;
  };
  std::vector<bool> taken(c.names.size(), false);
  if (!options.label.empty()) taken[c.label = find(options.label, "the label")] = true;
  for (const auto& t : options.targets) {
    const std::size_t i = find(t, "a target");
    c.targets.push_back(i);
    taken[i] = true;
  }
  for (const auto& g : options.ignore) taken[find(g, "an ignored")] = true;
  if (!options.features.empty()) {
    for (const auto& f : options.features) c.features.push_back(find(f, "a feature"));
  } else {
    for (std::size_t i = 0; i < c.names.size(); ++i) {
      if (taken[i]) continue;
      if (c.names[i].empty())
        header_error("column " + std::to_string(i + 1) +
                     " has no name, so it is not clear it holds a feature (a pandas index? write the file with index=False, "
                     "or list \"\" in CsvOptions::ignore)");
      c.features.push_back(i);
    }
  }
  if (c.features.empty()) header_error("no feature columns are left (the columns are " + listing() + ")");
  return c;
}

FLOTILLA_DECL std::int32_t parse_csv_label(const CsvField& f, const CsvOptions& options, const std::string& file, const Line& line,
                                           std::size_t column, const std::string& name) {
  if (!options.class_names.empty()) {
    const std::string s = f.escaped ? unquote_csv(f) : std::string(f.text);
    for (std::size_t i = 0; i < options.class_names.size(); ++i)
      if (options.class_names[i] == s) return static_cast<std::int32_t>(i);
    csv_error(file, line, f.pos, column, name, "label " + quote_field(s) + " is not one of CsvOptions::class_names");
  }
  std::string_view s = f.text;
  if (s.empty()) csv_error(file, line, f.pos, column, name, "empty field: a label is missing");
  if (s[0] == '+') s.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  const bool number = !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(v);
  if (!number || v < 0 || v != std::floor(v) || v >= static_cast<double>(std::numeric_limits<std::int32_t>::max()))
    csv_error(file, line, f.pos, column, name,
              "a label must be a non-negative integer class number: found " + quote_field(f.text) +
                  (number ? std::string() : std::string(" (for class names, give CsvOptions::class_names)")));
  if (options.classes != 0 && v >= static_cast<double>(options.classes))
    csv_error(file, line, f.pos, column, name,
              "label " + quote_field(f.text) + " is outside [0, " + std::to_string(options.classes) + "), CsvOptions::classes");
  return static_cast<std::int32_t>(v);
}

}  // namespace detail
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_CSV_HPP_INCLUDED
