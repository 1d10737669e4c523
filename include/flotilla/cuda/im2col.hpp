// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_IM2COL_HPP_INCLUDED
#define FLOTILLA_CUDA_IM2COL_HPP_INCLUDED
// im2col and col2im for Conv2D on the GPU, in the CPU backend's channels-last layout (see
// cuda/index_math.hpp, which holds the index arithmetic and is checked against nn/conv2d.hpp).
// The GPU materialises the im2col matrix and lets cuBLAS multiply it: memory is plentiful there,
// and a plain GEMM on it is what cuBLAS is fastest at.
#include <cstddef>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda::detail {

/// cols (patch x pixels*batch) from images x (in_size x batch), zero where a patch is in the padding.
inline void im2col(cudaStream_t s, const ConvGeometry& g, const float* x, float* cols, std::size_t batch) {
  const index_t patch = g.patch(), pixels = g.pixels(), in = g.in_size();
  for_each_index(s, static_cast<std::size_t>(patch * pixels) * batch, "im2col", [=] __device__(index_t i) {
    const index_t p = i % patch, rest = i / patch, q = rest % pixels, sample = rest / pixels;
    const index_t from = g.im2col_source(p, q);
    cols[i] = from < 0 ? 0.0f : x[sample * in + from];
  });
}

/// dx (in_size x batch) = the sum, per input value, of the dcols values im2col took from it.
inline void col2im(cudaStream_t s, const ConvGeometry& g, const float* dcols, float* dx, std::size_t batch) {
  const index_t in = g.in_size(), per_sample = g.patch() * g.pixels();
  for_each_index(s, static_cast<std::size_t>(in) * batch, "col2im", [=] __device__(index_t i) {
    const index_t sample = i / in;
    dx[i] = g.col2im_gather(i % in, dcols + sample * per_sample);
  });
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_IM2COL_HPP_INCLUDED
