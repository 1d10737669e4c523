// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_AVGPOOL_HPP_INCLUDED
#define FLOTILLA_CUDA_AVGPOOL_HPP_INCLUDED
// AvgPool2D and GlobalAvgPool on the GPU: window and channel means, and their gradients spread back
// evenly (index arithmetic in cuda/index_math.hpp, checked against nn/avg_pool2d.hpp and
// nn/global_avg_pool.hpp on the CPU).
#include <cstddef>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

inline void avg_pool_forward(cudaStream_t s, const AvgPoolGeometry& g, const float* x, float* y, std::size_t batch) {
  const index_t in = g.in_size(), out = g.out_size();
  for_each_index(s, static_cast<std::size_t>(out) * batch, "avg_pool_forward", [=] __device__(index_t i) {
    y[i] = g.window_mean(i % out, x + i / out * in);
  });
}

/// dx = each window's dy / (K * K), summed over the windows that hold it (a gather per input
/// value: deterministic, no atomics).
inline void avg_pool_backward(cudaStream_t s, const AvgPoolGeometry& g, const float* dy, float* dx, std::size_t batch) {
  const index_t in = g.in_size(), out = g.out_size();
  for_each_index(s, static_cast<std::size_t>(in) * batch, "avg_pool_backward", [=] __device__(index_t i) {
    dx[i] = g.backward_gather(i % in, dy + i / in * out);
  });
}

/// One thread per (sample, channel): it sums the channel's pixels in order.
inline void global_avg_pool_forward(cudaStream_t s, const GlobalPoolGeometry& g, const float* x, float* y,
                                    std::size_t batch) {
  const index_t in = g.in_size(), C = g.C;
  for_each_index(s, static_cast<std::size_t>(C) * batch, "global_avg_pool_forward", [=] __device__(index_t i) {
    y[i] = g.channel_mean(i % C, x + i / C * in);
  });
}

inline void global_avg_pool_backward(cudaStream_t s, const GlobalPoolGeometry& g, const float* dy, float* dx,
                                     std::size_t batch) {
  const index_t in = g.in_size(), C = g.C;
  for_each_index(s, static_cast<std::size_t>(in) * batch, "global_avg_pool_backward", [=] __device__(index_t i) {
    dx[i] = g.backward_value(i % in, dy + i / in * C);
  });
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_AVGPOOL_HPP_INCLUDED
