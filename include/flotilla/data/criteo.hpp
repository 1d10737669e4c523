// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_CRITEO_HPP_INCLUDED
#define FLOTILLA_DATA_CRITEO_HPP_INCLUDED
// The Criteo display-advertising click logs (the Kaggle challenge's train.txt, the 1 TB logs'
// day_N files): one example per line, 40 tab-separated columns: the label (0 or 1), 13 integer
// features I1..I13, 26 categorical features C1..C26 written as 32-bit hexadecimal IDs. Any
// feature may be empty, meaning missing: a missing integer reads as 0, a missing categorical
// feature has no ID in its field.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/data/line_reader.hpp"

namespace flotilla::data {

inline constexpr std::size_t criteo_columns = 1 + criteo_dense_features + criteo_categorical_fields;

namespace detail {

// A decimal integer with an optional '-', with no other character; false if it is not one or
// does not fit in 64 bits.
inline bool parse_decimal(std::string_view s, std::int64_t& value) noexcept {
  std::size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  if (i == s.size()) return false;
  std::uint64_t v = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return false;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::uint64_t{1} << 63) / 10 || v * 10 > (std::uint64_t{1} << 63) - d) return false;
    v = v * 10 + d;
  }
  if (!negative && v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  value = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

inline int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace detail

/// Parses one Criteo line into `out` (its vectors are reused): 13 dense values after `transform`,
/// 26 fields of zero or one ID each, no values. Throws DataError at the offending column's byte
/// offset, naming the line and the 1-based column and quoting what was found. A trailing '\r'
/// (a file written on Windows) is accepted.
inline void parse_criteo_line(const Line& line, const std::string& file, DenseTransform transform, CtrExample& out) {
  std::string_view text = line.text;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty())
    detail::line_error(file, line, line.offset, 1, "empty line (expected " + std::to_string(criteo_columns) + " tab-separated columns)");
  out.dense.assign(criteo_dense_features, 0.0F);
  out.offsets.assign(1, 0);
  out.ids.clear();
  out.values.clear();
  std::size_t start = 0;
  std::size_t column = 1;
  for (;; ++column) {
    const std::size_t tab = text.find('\t', start);
    const std::string_view field = text.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start);
    const std::uint64_t offset = line.offset + start;
    if (column > criteo_columns)
      detail::line_error(file, line, offset, column,
                         "more than " + std::to_string(criteo_columns) + " tab-separated columns (extra column " +
                             detail::quote_field(field) + ")");
    if (column == 1) {
      if (field != "0" && field != "1")
        detail::line_error(file, line, offset, column, "label must be 0 or 1, found " + detail::quote_field(field));
      out.label = field == "1" ? 1.0F : 0.0F;
    } else if (column <= 1 + criteo_dense_features) {
      const std::size_t i = column - 2;
      if (!field.empty()) {
        std::int64_t x = 0;
        if (!detail::parse_decimal(field, x))
          detail::line_error(file, line, offset, column,
                             "integer feature I" + std::to_string(i + 1) + " is not a 64-bit decimal integer: found " +
                                 detail::quote_field(field));
        out.dense[i] = transform == DenseTransform::log1p
                           ? static_cast<float>(std::log1p(static_cast<double>(x < 0 ? 0 : x)))
                           : static_cast<float>(x);
      }
    } else {
      const std::size_t f = column - 2 - criteo_dense_features;
      if (!field.empty()) {
        if (field.size() > 8)
          detail::line_error(file, line, offset, column,
                             "categorical feature C" + std::to_string(f + 1) + " is longer than 8 hex digits (32 bits): found " +
                                 detail::quote_field(field));
        std::uint64_t id = 0;
        for (const char c : field) {
          const int d = detail::hex_digit(c);
          if (d < 0)
            detail::line_error(file, line, offset, column,
                               "categorical feature C" + std::to_string(f + 1) + " is not hexadecimal: found " +
                                   detail::quote_field(field));
          id = id << 4 | static_cast<std::uint64_t>(d);
        }
        out.ids.push_back(id);
      }
      out.offsets.push_back(static_cast<std::uint32_t>(out.ids.size()));
    }
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (column < criteo_columns)
    detail::line_error(file, line, line.offset + text.size(), column + 1,
                       "only " + std::to_string(column) + " tab-separated columns, expected " + std::to_string(criteo_columns) +
                           " (label, 13 integer features, 26 categorical IDs)");
}

/// The line format of CtrReader for Criteo's TSV.
struct CriteoFormat {
  static bool parse(const Line& line, const std::string& file, const ReaderOptions& options, CtrExample& out) {
    parse_criteo_line(line, file, options.dense_transform, out);
    return true;
  }
};

/// Criteo examples from a plain or gzip file, sharded and optionally shuffled (see ctr_reader.hpp).
using CriteoReader = CtrReader<CriteoFormat>;

/// Every example of one shard of a Criteo file, in the order a reader gives them in epoch 0
/// (Criteo is the format read_ctr_file() reads when none is named).
inline std::vector<CtrExample> read_ctr_file(const std::string& path, const ReaderOptions& options = {}) {
  return read_ctr_file<CriteoFormat>(path, options);
}

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_CRITEO_HPP_INCLUDED
