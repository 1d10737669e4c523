#pragma once
// Element-wise kernels: activations forward and backward, the bias of a (rows x cols) output,
// dropout's mask, products, sums and fills. Each is a host function that launches on a stream.
#include <cstddef>
#include <cstdint>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

enum class Activation { relu, tanh, sigmoid };

/// y = f(x), n values.
inline void activation_forward(cudaStream_t s, Activation a, const float* x, float* y, std::size_t n) {
  switch (a) {
    case Activation::relu:
      for_each_index(s, n, "relu_forward", [=] __device__(index_t i) { y[i] = fmaxf(x[i], 0.0f); });
      break;
    case Activation::tanh:
      for_each_index(s, n, "tanh_forward", [=] __device__(index_t i) { y[i] = tanhf(x[i]); });
      break;
    case Activation::sigmoid:
      for_each_index(s, n, "sigmoid_forward", [=] __device__(index_t i) { y[i] = 1.0f / (1.0f + expf(-x[i])); });
      break;
  }
}

/// dx = f'(x) dy, from the saved output y (as the CPU layers do).
inline void activation_backward(cudaStream_t s, Activation a, const float* y, const float* dy, float* dx, std::size_t n) {
  switch (a) {
    case Activation::relu:
      for_each_index(s, n, "relu_backward", [=] __device__(index_t i) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; });
      break;
    case Activation::tanh:
      for_each_index(s, n, "tanh_backward", [=] __device__(index_t i) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); });
      break;
    case Activation::sigmoid:
      for_each_index(s, n, "sigmoid_backward", [=] __device__(index_t i) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); });
      break;
  }
}

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
