#pragma once
// The losses on the GPU, one thread per sample: the fused softmax cross-entropy (the gradient
// softmax(z) - onehot(label), from logits shifted by their maximum, and the loss logsumexp(z) -
// z[label]) and the mean squared error, as loss/softmax_cross_entropy.hpp and loss/mse.hpp compute
// them. Each writes the per-sample loss (and, for classifiers, the arg-max class), which the engine
// copies back and sums in double as the CPU does.
#include <cstddef>
#include <cstdint>

#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

/// For each sample s of logits (classes x batch): loss[s], predicted[s] (first arg-max), and, when
/// grad is not null, grad(:, s) = scale * (softmax(z) - onehot(label)). Labels were checked on the host.
inline void softmax_cross_entropy(cudaStream_t st, const float* logits, const std::int32_t* labels, std::size_t classes,
                                  std::size_t batch, float* grad, float scale, float* loss, std::int32_t* predicted) {
  const auto k = static_cast<index_t>(classes);
  for_each_index(st, batch, "softmax_cross_entropy", [=] __device__(index_t s) {
    const float* z = logits + s * k;
    float m = z[0];
    index_t best = 0;
    for (index_t j = 1; j < k; ++j)
      if (z[j] > m) m = z[j], best = j;
    float sum = 0;
    if (grad) {
      float* g = grad + s * k;
      for (index_t j = 0; j < k; ++j) sum += (g[j] = expf(z[j] - m));
      const float f = scale / sum;
      for (index_t j = 0; j < k; ++j) g[j] *= f;
      g[labels[s]] -= scale;
    } else {
      for (index_t j = 0; j < k; ++j) sum += expf(z[j] - m);
    }
    loss[s] = logf(sum) + m - z[labels[s]];
    predicted[s] = static_cast<std::int32_t>(best);
  });
}

/// For each sample s of y and targets t (outputs x batch): loss[s] = mean_j (y - t)^2, and when
/// grad is not null, grad = (y - t) * 2 scale / outputs.
inline void mean_squared_error(cudaStream_t st, const float* y, const float* t, std::size_t outputs, std::size_t batch,
                               float* grad, float scale, float* loss) {
  const auto k = static_cast<index_t>(outputs);
  const float factor = 2.0f * scale / static_cast<float>(outputs);
  for_each_index(st, batch, "mean_squared_error", [=] __device__(index_t s) {
    double sum = 0;
    for (index_t j = 0; j < k; ++j) {
      const float d = y[s * k + j] - t[s * k + j];
      sum += static_cast<double>(d) * d;
      if (grad) grad[s * k + j] = d * factor;
    }
    loss[s] = static_cast<float>(sum / static_cast<double>(k));
  });
}

}  // namespace flotilla::cuda::detail
