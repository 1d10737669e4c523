// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// A small learnable 3-class data set that the distributed tests share: 6x6 single-channel images
// whose class lights every third pixel, under Gaussian noise. Fixed by its seed.
#include <cstddef>
#include <cstdint>

#include "flotilla/core/random.hpp"
#include "flotilla/data/dataset.hpp"

namespace flotilla_test {

template <class T>
flotilla::data::Dataset<T> blobs(std::size_t n, std::uint64_t seed) {
  flotilla::Generator g(seed);
  flotilla::data::Dataset<T> d;
  d.name = "blobs";
  d.classes = 3;
  d.inputs.resize(36, static_cast<Eigen::Index>(n));
  d.labels.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    const auto label = static_cast<std::int32_t>(g.below(3));
    d.labels[s] = label;
    for (Eigen::Index i = 0; i < 36; ++i)
      d.inputs(i, static_cast<Eigen::Index>(s)) = static_cast<T>(0.5 * g.normal<double>() + (i % 3 == label ? 1.0 : 0.0));
  }
  return d;
}

}  // namespace flotilla_test
