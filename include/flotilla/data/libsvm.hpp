// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_LIBSVM_HPP_INCLUDED
#define FLOTILLA_DATA_LIBSVM_HPP_INCLUDED
// The libsvm / svmlight format: one example per line,
//
//   <label> [qid:<n>] <index>:<value> <index>:<value> ... [# comment]
//
// separated by spaces or tabs (a '\r' ending the line is accepted). The label is 0 or 1, or -1
// or +1 (-1 reads as 0); it may be written as a decimal number ("1.0"). A qid (query id, for
// ranking) is checked and ignored. Indices are unsigned 64-bit integers in any order, values finite
// decimal numbers. An example has no dense features and one field, field 0, holding the indices as
// IDs and the values as their weights. A line that is blank or only a comment holds no example and is passed over.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/line_reader.hpp"

namespace flotilla::data {

namespace detail {

inline bool parse_finite(std::string_view s, double& value) noexcept {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(value);
}

inline bool parse_unsigned(std::string_view s, std::uint64_t& value) noexcept {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace detail

/// Parses one libsvm line into `out` (its vectors are reused). Returns false for a blank or
/// comment-only line. Throws DataError at the offending token's byte offset, naming the line and
/// the 1-based column (the whitespace-separated token's number) and quoting what was found.
inline bool parse_libsvm_line(const Line& line, const std::string& file, CtrExample& out) {
  std::string_view text = line.text;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (const auto hash = text.find('#'); hash != std::string_view::npos) text = text.substr(0, hash);
  out.dense.clear();
  out.offsets.assign(1, 0);
  out.ids.clear();
  out.values.clear();
  std::size_t column = 0;
  std::size_t pos = 0;
  for (;;) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    if (pos == text.size()) break;
    std::size_t end = pos;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t') ++end;
    const std::string_view token = text.substr(pos, end - pos);
    const std::uint64_t offset = line.offset + pos;
    ++column;
    if (column == 1) {
      double label = 0;
      if (!detail::parse_finite(token, label) || (label != 0 && label != 1 && label != -1))
        detail::line_error(file, line, offset, column, "label must be 0, 1, -1 or +1, found " + detail::quote_field(token));
      out.label = label == 1 ? 1.0F : 0.0F;
    } else {
      const std::size_t colon = token.find(':');
      if (colon == std::string_view::npos)
        detail::line_error(file, line, offset, column, "expected index:value, found " + detail::quote_field(token));
      const std::string_view key = token.substr(0, colon);
      const std::string_view val = token.substr(colon + 1);
      if (key == "qid") {
        std::uint64_t qid = 0;
        if (column != 2)
          detail::line_error(file, line, offset, column, "qid must come right after the label, found " + detail::quote_field(token));
        if (!detail::parse_unsigned(val, qid))
          detail::line_error(file, line, offset, column, "qid is not an unsigned integer: found " + detail::quote_field(token));
        pos = end;
        continue;
      }
      std::uint64_t index = 0;
      if (!detail::parse_unsigned(key, index))
        detail::line_error(file, line, offset, column,
                           "feature index is not an unsigned 64-bit integer: found " + detail::quote_field(token));
      double value = 0;
      if (!detail::parse_finite(val, value) || std::abs(value) > 3.4e38)
        detail::line_error(file, line, offset, column,
                           "feature value is not a finite single-precision number: found " + detail::quote_field(token));
      out.ids.push_back(index);
      out.values.push_back(static_cast<float>(value));
    }
    pos = end;
  }
  if (column == 0) return false;
  out.offsets.push_back(static_cast<std::uint32_t>(out.ids.size()));
  return true;
}

/// The line format of CtrReader for libsvm.
struct LibsvmFormat {
  static bool parse(const Line& line, const std::string& file, const ReaderOptions&, CtrExample& out) {
    return parse_libsvm_line(line, file, out);
  }
};

/// libsvm examples from a plain or gzip file, sharded and optionally shuffled (see ctr_reader.hpp).
using LibsvmReader = CtrReader<LibsvmFormat>;

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_LIBSVM_HPP_INCLUDED
