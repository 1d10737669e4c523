// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_DATASET_HPP_INCLUDED
#define FLOTILLA_DATA_DATASET_HPP_INCLUDED
// Dataset<T>: samples in memory, one per column, with their class labels or target values, and the
// loader for classification data sets stored as a pair of IDX files (images, labels).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/idx.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla::data {

/// Which part of a data set that ships pre-split.
enum class Split { train, test };

/// A data set held in memory. Sample i is column i of `inputs` and, for regression, of `targets`.
template <class T>
struct Dataset {
  Matrix<T> inputs;                  ///< (features x samples)
  std::vector<std::int32_t> labels;  ///< classification: one label per sample in [0, classes); else empty
  Matrix<T> targets;                 ///< regression: (outputs x samples); else empty
  std::size_t classes = 0;           ///< number of classes when labels are used
  std::string name;                  ///< for messages, e.g. "fashion-mnist/train"

  std::size_t size() const noexcept { return static_cast<std::size_t>(inputs.cols()); }
  std::size_t feature_size() const noexcept { return static_cast<std::size_t>(inputs.rows()); }
  std::size_t target_size() const noexcept { return static_cast<std::size_t>(targets.rows()); }
  bool empty() const noexcept { return size() == 0; }
  /// Values when `targets` has rows, labels otherwise.
  TargetKind target_kind() const noexcept { return targets.rows() > 0 ? TargetKind::values : TargetKind::labels; }

  /// Checks that the parts agree: one label (in [0, classes)) or one target column per sample, and
  /// not both. Throws ShapeError for counts that disagree, ConfigError for bad labels.
  void validate() const {
    const std::string what = "Dataset '" + name + "': ";
    if (target_kind() == TargetKind::values) {
      if (!labels.empty()) throw ShapeError(what + "has both labels and target values; a data set holds one kind");
      if (static_cast<std::size_t>(targets.cols()) != size())
        throw ShapeError(what + std::to_string(targets.cols()) + " target columns for " + std::to_string(size()) + " samples");
      return;
    }
    if (labels.size() != size())
      throw ShapeError(what + std::to_string(labels.size()) + " labels for " + std::to_string(size()) + " samples");
    if (classes == 0 && !labels.empty()) throw ConfigError(what + "has labels but `classes` is 0");
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= classes)
        throw ConfigError(what + "sample " + std::to_string(i) + " has label " + std::to_string(labels[i]) + ", outside [0, " +
                          std::to_string(classes) + ")");
  }
};

/// Samples [first, first + count) of `data`, copied, e.g. to hold out a validation set.
template <class T>
inline Dataset<T> subset(const Dataset<T>& data, std::size_t first, std::size_t count) {
  if (first > data.size() || count > data.size() - first)
    throw ConfigError("subset of '" + data.name + "': samples [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                      std::to_string(count) + ") are not within its " + std::to_string(data.size()) + " samples");
  data.validate();
  const auto f = static_cast<Eigen::Index>(first);
  const auto c = static_cast<Eigen::Index>(count);
  Dataset<T> out;
  out.inputs = data.inputs.middleCols(f, c);
  if (!data.labels.empty()) out.labels.assign(data.labels.begin() + f, data.labels.begin() + f + c);
  if (data.target_kind() == TargetKind::values) out.targets = data.targets.middleCols(f, c);
  out.classes = data.classes;
  out.name = data.name + "[" + std::to_string(first) + ":" + std::to_string(first + count) + "]";
  return out;
}

/// The first `first_count` samples and the rest, as two data sets (train / validation).
template <class T>
inline std::pair<Dataset<T>, Dataset<T>> split(const Dataset<T>& data, std::size_t first_count) {
  if (first_count > data.size())
    throw ConfigError("split of '" + data.name + "': cannot take " + std::to_string(first_count) + " samples of " +
                      std::to_string(data.size()));
  return {subset(data, 0, first_count), subset(data, first_count, data.size() - first_count)};
}

/// Loads a classification data set from an IDX file of inputs and an IDX file of labels (either may
/// be gzip-compressed). The inputs file has shape (samples x d1 x d2 ...), rank >= 2, and each sample
/// is flattened (row-major, as stored) into one column, times `scale` (1/255 maps bytes to [0, 1]).
/// The labels file has shape (samples), integer type, each label in [0, classes). Throws DataError
/// naming the file, the byte offset and, for a bad label, the sample.
template <class T>
inline Dataset<T> load_idx_classification(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                                          std::size_t classes, T scale = T(1) / T(255), std::string name = {}) {
  if (classes == 0 || classes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ConfigError("load_idx_classification: classes must be in [1, 2^31), got " + std::to_string(classes));
  // Labels first: they are small, so a bad pair of files is reported before the large one is read.
  const IdxFile labels = read_idx(labels_path);
  if (labels.rank() != 1)
    throw labels.error(3, "labels must have 1 dimension (one label per sample), this file has shape " + labels.shape_string());
  if (!idx_type_is_integer(labels.type()))
    throw labels.error(2, "labels must be integers, this file holds " + std::string(idx_type_name(labels.type())));
  Dataset<T> data;
  data.classes = classes;
  data.name = name.empty() ? images_path.string() : std::move(name);
  data.labels.resize(labels.count());
  for (std::size_t i = 0; i < labels.count(); ++i) {
    const auto v = labels.at<std::int64_t>(i);
    if (v < 0 || static_cast<std::uint64_t>(v) >= classes)
      throw labels.error(labels.offset_of(i), "sample " + std::to_string(i) + " has label " + std::to_string(v) + ", outside [0, " +
                                                   std::to_string(classes) + ")");
    data.labels[i] = static_cast<std::int32_t>(v);
  }

  const IdxFile images = read_idx(images_path);
  if (images.rank() < 2)
    throw images.error(3, "inputs must have at least 2 dimensions (samples x features...), this file has shape " +
                              images.shape_string());
  const std::size_t samples = images.dims()[0];
  if (samples != labels.count())
    throw labels.error(4, "holds " + std::to_string(labels.count()) + " labels but " + images.name() + " holds " +
                              std::to_string(samples) + " samples");
  const std::size_t features = images.count() / samples;
  data.inputs.resize(static_cast<Eigen::Index>(features), static_cast<Eigen::Index>(samples));
  images.copy_to(std::span<T>(data.inputs.data(), images.count()), scale);
  return data;
}

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_DATASET_HPP_INCLUDED
