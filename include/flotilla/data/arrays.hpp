// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_ARRAYS_HPP_INCLUDED
#define FLOTILLA_DATA_ARRAYS_HPP_INCLUDED
// A Dataset from values a program already holds in memory, in the row-major layout most data is
// kept in (one sample per row, as a NumPy array, a CSV file or a std::vector of records has it):
// from_rows() copies them into the sample-per-column matrix that Dataset and the trainer use, and
// checks what a file loader would check (sizes that agree, labels in range, finite values), so that
// a mistake is a message at construction rather than a wrong loss later.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/dataset.hpp"

namespace flotilla::data {

namespace detail {

template <class T>
inline void check_rows(std::span<const T> values, std::size_t rows, std::size_t cols, const std::string& name,
                       const char* what) {
  static_assert(std::is_floating_point_v<T>, "Dataset values are floating point");
  if (rows == 0 || cols == 0)
    throw ShapeError("from_rows '" + name + "': " + std::to_string(rows) + " rows of " + std::to_string(cols) +
                     " values: a data set needs at least one sample and one feature");
  if (rows > std::numeric_limits<std::size_t>::max() / cols || values.size() != rows * cols)
    throw ShapeError("from_rows '" + name + "': " + std::to_string(values.size()) + " " + what + " are not " + std::to_string(rows) +
                     " rows of " + std::to_string(cols));
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw ConfigError("from_rows '" + name + "': " + what + " row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols) +
                        " is " + std::to_string(values[i]) + ", not a finite number");
}

template <class T>
inline Matrix<T> columns_of(std::span<const T> values, std::size_t rows, std::size_t cols) {
  // Row r of a row-major (rows x cols) array is column r of the column-major (cols x rows) matrix,
  // so the copy is one pass in order.
  Matrix<T> m(static_cast<Eigen::Index>(cols), static_cast<Eigen::Index>(rows));
  std::copy(values.begin(), values.end(), m.data());
  return m;
}

}  // namespace detail

/// A classification data set from `rows` samples of `cols` features each, stored row by row in
/// `values` (sample r's feature c at values[r * cols + c]), and one label per sample. `classes` 0
/// means the largest label + 1. Throws ShapeError when the sizes disagree, ConfigError for a
/// negative or out-of-range label or a value that is NaN or infinite.
template <class T>
inline Dataset<T> from_rows(std::span<const T> values, std::size_t rows, std::size_t cols, std::span<const std::int32_t> labels,
                            std::size_t classes = 0, std::string name = "in-memory") {
  detail::check_rows(values, rows, cols, name, "values");
  if (labels.size() != rows)
    throw ShapeError("from_rows '" + name + "': " + std::to_string(labels.size()) + " labels for " + std::to_string(rows) + " rows");
  if (classes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ConfigError("from_rows '" + name + "': classes must be below 2^31, got " + std::to_string(classes));
  std::int32_t largest = -1;
  for (std::size_t i = 0; i < rows; ++i) {
    if (labels[i] < 0 || (classes != 0 && static_cast<std::size_t>(labels[i]) >= classes))
      throw ConfigError("from_rows '" + name + "': row " + std::to_string(i) + " has label " + std::to_string(labels[i]) +
                        (classes != 0 ? ", outside [0, " + std::to_string(classes) + ")" : ", which is negative"));
    largest = std::max(largest, labels[i]);
  }
  Dataset<T> data;
  data.inputs = detail::columns_of(values, rows, cols);
  data.labels.assign(labels.begin(), labels.end());
  data.classes = classes != 0 ? classes : static_cast<std::size_t>(largest) + 1;
  data.name = std::move(name);
  return data;
}

/// A regression data set from `rows` samples of `cols` features each, stored row by row in
/// `values`, and `outputs` target values per sample, stored row by row in `targets` (sample r's
/// target k at targets[r * outputs + k]). Throws ShapeError when the sizes disagree, ConfigError
/// for a value or target that is NaN or infinite.
template <class T>
inline Dataset<T> from_rows(std::span<const T> values, std::size_t rows, std::size_t cols, std::span<const T> targets,
                            std::size_t outputs, std::string name = "in-memory") {
  detail::check_rows(values, rows, cols, name, "values");
  if (outputs == 0 || rows > std::numeric_limits<std::size_t>::max() / outputs || targets.size() != rows * outputs)
    throw ShapeError("from_rows '" + name + "': " + std::to_string(targets.size()) + " target values are not " +
                     std::to_string(rows) + " rows of " + std::to_string(outputs));
  detail::check_rows(targets, rows, outputs, name, "targets");
  Dataset<T> data;
  data.inputs = detail::columns_of(values, rows, cols);
  data.targets = detail::columns_of(targets, rows, outputs);
  data.name = std::move(name);
  return data;
}

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_ARRAYS_HPP_INCLUDED
