// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_BLAS_HPP_INCLUDED
#define FLOTILLA_CUDA_BLAS_HPP_INCLUDED
// Single-precision matrix products through cuBLAS on column-major views, in the CPU backend's
// terms (core/gemm.hpp): C = op(A) op(B) (+ C), and y += A x.
#if !__has_include(<cublas_v2.h>)
#error "flotilla/cuda/blas.hpp needs the CUDA toolkit's headers: link your target to flotilla::cuda (see docs/gpu.md)"
#endif
#include <cublas_v2.h>

#include <cstddef>

#include "flotilla/cuda/check.hpp"

namespace flotilla::cuda::detail {

/// C (m x n, leading dimension ldc) = op(A) op(B) + (accumulate ? C : 0), where op(A) is m x k and
/// op(B) is k x n; A and B are stored column-major with leading dimensions lda and ldb.
inline void gemm(cublasHandle_t h, bool transpose_a, bool transpose_b, std::size_t m, std::size_t n, std::size_t k,
                 const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc,
                 bool accumulate) {
  if (m == 0 || n == 0) return;
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  FLOTILLA_CUBLAS_CHECK(cublasSgemm(h, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, a,
                                    static_cast<int>(lda), b, static_cast<int>(ldb), &beta, c, static_cast<int>(ldc)));
}

/// y (m) += A (m x n, column-major, leading dimension m) x (n): row sums of A when x is all ones
/// (bias gradients).
inline void gemv_accumulate(cublasHandle_t h, std::size_t m, std::size_t n, const float* a, const float* x, float* y) {
  if (m == 0 || n == 0) return;
  const float one = 1.0f;
  FLOTILLA_CUBLAS_CHECK(cublasSgemv(h, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), &one, a,
                                    static_cast<int>(m), x, 1, &one, y, 1));
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_BLAS_HPP_INCLUDED
