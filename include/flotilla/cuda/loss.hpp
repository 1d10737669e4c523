// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_LOSS_HPP_INCLUDED
#define FLOTILLA_CUDA_LOSS_HPP_INCLUDED
// The losses on the GPU, one thread per sample, each running the CPU loss's own per-sample body
// (SoftmaxCrossEntropy::sample, MSE::sample). Each writes the per-sample loss (and, for
// classifiers, the arg-max class), which the engine copies back and sums in double as the CPU does.
#include <cstddef>
#include <cstdint>

#include "flotilla/cuda/launch.hpp"
#include "flotilla/loss/mse.hpp"
#include "flotilla/loss/softmax_cross_entropy.hpp"

namespace flotilla::cuda::detail {

/// For each sample s of logits (classes x batch): loss[s], predicted[s] (first arg-max), and, when
/// grad is not null, grad(:, s) = scale * (softmax(z) - onehot(label)). Labels were checked on the host.
inline void softmax_cross_entropy(cudaStream_t st, const float* logits, const std::int32_t* labels, std::size_t classes,
                                  std::size_t batch, float* grad, float scale, float* loss, std::int32_t* predicted) {
  const auto k = static_cast<std::int32_t>(classes);
  for_each_index(st, batch, "softmax_cross_entropy", [=] __device__(index_t s) {
    loss[s] = SoftmaxCrossEntropy::sample<float, std::int32_t>(logits + s * k, k, labels[s], grad ? grad + s * k : nullptr,
                                                               scale, predicted + s);
  });
}

/// For each sample s of y and targets t (outputs x batch): loss[s] = mean_j (y - t)^2, and when
/// grad is not null, grad = (y - t) * 2 scale / outputs.
inline void mean_squared_error(cudaStream_t st, const float* y, const float* t, std::size_t outputs, std::size_t batch,
                               float* grad, float scale, float* loss) {
  const auto k = static_cast<index_t>(outputs);
  const float factor = 2.0f * scale / static_cast<float>(outputs);
  for_each_index(st, batch, "mean_squared_error", [=] __device__(index_t s) {
    loss[s] = MSE::sample<float, index_t>(y + s * k, t + s * k, k, grad ? grad + s * k : nullptr, factor);
  });
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_LOSS_HPP_INCLUDED
