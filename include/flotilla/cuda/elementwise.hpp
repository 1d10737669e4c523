// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_ELEMENTWISE_HPP_INCLUDED
#define FLOTILLA_CUDA_ELEMENTWISE_HPP_INCLUDED
// Element-wise kernels: the bias of a (rows x cols) output, dropout's mask, products, sums and
// fills; the activations run the CPU layers' own element functions (cuda/layers.hpp). Each is a
// host function that launches on a stream.
#include <cstddef>
#include <cstdint>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

/// y(r, c) += b(r) for a column-major (rows x cols) y.
inline void add_bias(cudaStream_t s, float* y, const float* b, std::size_t rows, std::size_t cols) {
  const auto r = static_cast<index_t>(rows);
  for_each_index(s, rows * cols, "add_bias", [=] __device__(index_t i) { y[i] += b[i % r]; });
}

/// scale(j, s) = dropout multiplier of feature j of sample s (ids[s], or s when ids is null).
inline void dropout_mask(cudaStream_t s, float* scale, std::size_t rows, std::size_t cols, const std::uint64_t* ids,
                         std::uint64_t key, double rate, float keep_scale) {
  const auto r = static_cast<index_t>(rows);
  for_each_index(s, rows * cols, "dropout_mask", [=] __device__(index_t i) {
    const index_t sample = i / r;
    const std::uint64_t id = ids ? ids[sample] : static_cast<std::uint64_t>(sample);
    scale[i] = dropout_scale(key, id, static_cast<std::uint64_t>(i % r), rate, keep_scale);
  });
}

/// z = x * y element-wise.
inline void multiply(cudaStream_t s, const float* x, const float* y, float* z, std::size_t n) {
  for_each_index(s, n, "multiply", [=] __device__(index_t i) { z[i] = x[i] * y[i]; });
}

/// y += x.
inline void add(cudaStream_t s, const float* x, float* y, std::size_t n) {
  for_each_index(s, n, "add", [=] __device__(index_t i) { y[i] += x[i]; });
}

/// x = v.
inline void fill(cudaStream_t s, float* x, float v, std::size_t n) {
  for_each_index(s, n, "fill", [=] __device__(index_t i) { x[i] = v; });
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_ELEMENTWISE_HPP_INCLUDED
