// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_FASHIONMNIST_HPP_INCLUDED
#define FLOTILLA_DATA_FASHIONMNIST_HPP_INCLUDED
// Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017): 28x28 grey images of clothing in 10 classes,
// 60000 for training and 10000 for testing, as the four IDX files the authors distribute.
//
// The files are looked for in $FLOTILLA_FASHION_MNIST if it is set, else in
// /usr/share/datasets/fashion-mnist, where the Debian package dataset-fashion-mnist puts them.
// Compressed (.gz) and uncompressed copies are both accepted.
#include <array>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/data/dataset.hpp"

namespace flotilla::data::fashion_mnist {

using data::Split;

inline constexpr std::size_t classes = 10;
inline constexpr std::size_t height = 28;
inline constexpr std::size_t width = 28;
/// Values per sample: one grey channel of 28x28 pixels, scaled to [0, 1].
inline constexpr std::size_t features = height * width;

/// Class names, indexed by label.
inline constexpr std::array<std::string_view, classes> class_names = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

/// The environment variable that overrides default_directory().
inline constexpr const char* directory_variable = "FLOTILLA_FASHION_MNIST";
inline constexpr const char* system_directory = "/usr/share/datasets/fashion-mnist";

/// $FLOTILLA_FASHION_MNIST if set and not empty, else /usr/share/datasets/fashion-mnist.
inline std::filesystem::path default_directory() {
  const char* env = std::getenv(directory_variable);
  return (env != nullptr && *env != '\0') ? std::filesystem::path(env) : std::filesystem::path(system_directory);
}

namespace detail {
/// `dir/stem.gz`, or `dir/stem` when only the uncompressed file is there; throws if neither is.
FLOTILLA_DECL std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& stem);
}  // namespace detail

/// Loads the training (60000) or test (10000) samples: inputs (784 x samples) in [0, 1], labels in
/// [0, 10). Throws DataError when a file is missing (saying how to install it) or malformed.
template <class T = float>
inline Dataset<T> load(Split split, const std::filesystem::path& dir = default_directory()) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::filesystem::path images = detail::find_file(dir, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels = detail::find_file(dir, prefix + "-labels-idx1-ubyte");
  Dataset<T> data = load_idx_classification<T>(images, labels, classes, T(1) / T(255),
                                               split == Split::train ? "fashion-mnist/train" : "fashion-mnist/test");
  if (data.feature_size() != features)
    throw DataError(images.string(), 4,
                    "Fashion-MNIST images are 28x28 (784 values), this file's are " + std::to_string(data.feature_size()));
  return data;
}

#if FLOTILLA_IMPLEMENTATION
namespace detail {
FLOTILLA_DECL std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& stem) {
  const std::filesystem::path gz = dir / (stem + ".gz");
  const std::filesystem::path plain = dir / stem;
  std::error_code ec;
  if (std::filesystem::is_regular_file(gz, ec)) return gz;
  if (std::filesystem::is_regular_file(plain, ec)) return plain;
  throw DataError(gz.string(), 0,
                  "Fashion-MNIST file not found. Install the data set with `apt-get install dataset-fashion-mnist`, or set " +
                      std::string(directory_variable) + " to a directory that holds train-images-idx3-ubyte.gz, " +
                      "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz");
}
}  // namespace detail
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla::data::fashion_mnist
#endif  // FLOTILLA_DATA_FASHIONMNIST_HPP_INCLUDED
