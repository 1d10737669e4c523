// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_MAXPOOL_HPP_INCLUDED
#define FLOTILLA_CUDA_MAXPOOL_HPP_INCLUDED
// MaxPool2D on the GPU: the window maxima and where they are, and the gradient routed back to them
// (index arithmetic in cuda/index_math.hpp, checked against nn/maxpool2d.hpp on the CPU).
#include <cstddef>
#include <cstdint>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

inline void maxpool_forward(cudaStream_t s, const PoolGeometry& g, const float* x, float* y, std::uint32_t* arg,
                            std::size_t batch) {
  const index_t in = g.in_size(), out = g.out_size();
  for_each_index(s, static_cast<std::size_t>(out) * batch, "maxpool_forward", [=] __device__(index_t i) {
    const index_t sample = i / out;
    std::uint32_t at = 0;
    y[i] = g.window_max(i % out, x + sample * in, at);
    arg[i] = at;
  });
}

/// dx = dy routed to each window's maximum (a gather per input value: deterministic, no atomics).
inline void maxpool_backward(cudaStream_t s, const PoolGeometry& g, const float* dy, const std::uint32_t* arg, float* dx,
                             std::size_t batch) {
  const index_t in = g.in_size(), out = g.out_size();
  for_each_index(s, static_cast<std::size_t>(in) * batch, "maxpool_backward", [=] __device__(index_t i) {
    const index_t sample = i / in;
    dx[i] = g.backward_gather(i % in, dy + sample * out, arg + sample * out);
  });
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_MAXPOOL_HPP_INCLUDED
