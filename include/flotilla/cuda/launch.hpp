// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_LAUNCH_HPP_INCLUDED
#define FLOTILLA_CUDA_LAUNCH_HPP_INCLUDED
// Kernel launching for flotilla's CUDA headers: a grid-stride loop launched on a stream and checked.
// Kernel headers include this one; it stops any compiler but nvcc with a clear message.
#if !defined(__CUDACC__)
#error "flotilla/cuda/ kernel headers must be compiled by nvcc: put the code that includes them in a .cu file and link it to flotilla::cuda (see docs/gpu.md)"
#endif
#include <cuda_runtime.h>

#include <cstddef>

#include "flotilla/cuda/check.hpp"
#include "flotilla/cuda/index_math.hpp"

namespace flotilla::cuda::detail {

inline constexpr unsigned block_threads = 256;

/// Runs f(i) for every i in [0, n), each index once, across a grid-stride loop.
template <class F>
__global__ void for_each_index_kernel(index_t n, F f) {
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    f(i);
}

/// Launches f over [0, n) on stream s and checks the launch; `what` names it in errors.
template <class F>
void for_each_index(cudaStream_t s, std::size_t n, const char* what, F f) {
  if (n == 0) return;
  for_each_index_kernel<<<launch_blocks(n, block_threads), block_threads, 0, s>>>(static_cast<index_t>(n), f);
  FLOTILLA_CUDA_CHECK_LAUNCH(what);
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_LAUNCH_HPP_INCLUDED
