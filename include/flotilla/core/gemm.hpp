// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_GEMM_HPP_INCLUDED
#define FLOTILLA_CORE_GEMM_HPP_INCLUDED
// The one place where layers multiply matrices. Layers call gemm() rather than writing Eigen
// products inline, so that the kernel behind it can be replaced or specialised for a backend
// without touching any layer.
//
// Single-precision products of matrices that lie in memory (Maps, possibly transposed) go to
// flotilla's own packed GEMM (core/detail/sgemm.hpp) when the target has one (AVX-512 or AVX2+FMA);
// everything else (double, other expressions, plain x86-64 builds) goes to Eigen's product.
#include <cassert>
#include <cstddef>
#include <type_traits>

#include <Eigen/Core>

#include "flotilla/core/detail/sgemm.hpp"

namespace flotilla::detail {
inline namespace FLOTILLA_SGEMM_ISA {

/// True for float expressions whose values lie in memory at data() + i + j * outerStride(), or
/// at data() + i * outerStride() + j when row-major (the transpose of a column-major Map is).
/// Decided at compile time, so that a product that takes the fast path never instantiates
/// Eigen's float product as well.
template <class X>
inline constexpr bool sgemm_operand = std::is_same_v<typename X::Scalar, float> &&
                                      (X::Flags & Eigen::DirectAccessBit) != 0 && X::InnerStrideAtCompileTime == 1;

template <class Dst, class Lhs, class Rhs>
inline constexpr bool sgemm_product = sgemm_has_kernel && sgemm_operand<Dst> && sgemm_operand<Lhs> &&
                                      sgemm_operand<Rhs> && !Dst::IsRowMajor;

template <class Dst, class Lhs, class Rhs>
inline void sgemm_views(Dst& c, const Lhs& a, const Rhs& b, bool accumulate, const float* bias) {
  // A row-major operand is the transpose of the column-major matrix with the same storage.
  sgemm(Lhs::IsRowMajor, Rhs::IsRowMajor, c.rows(), c.cols(), a.cols(), a.data(), a.outerStride(), b.data(),
        b.outerStride(), c.data(), c.outerStride(), accumulate, bias);
}

/// c = a * b, or c += a * b when `accumulate`. `a` and `b` may be transposed Eigen expressions;
/// `c` must not alias either.
template <class Dst, class Lhs, class Rhs>
inline void gemm(Dst&& c, const Lhs& a, const Rhs& b, bool accumulate) {
  assert(c.rows() == a.rows() && c.cols() == b.cols() && a.cols() == b.rows());
  if constexpr (sgemm_product<std::remove_cvref_t<Dst>, Lhs, Rhs>) {
    sgemm_views(c, a, b, accumulate, nullptr);
  } else if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

/// c = a * b + bias 1^T: every column of the product plus the vector `bias` (a layer's forward
/// pass). The fast path adds the bias inside the kernel, saving a pass over c.
template <class Dst, class Lhs, class Rhs, class Bias>
inline void gemm_bias(Dst&& c, const Lhs& a, const Rhs& b, const Bias& bias) {
  assert(c.rows() == a.rows() && c.cols() == b.cols() && a.cols() == b.rows() && bias.size() == c.rows());
  if constexpr (sgemm_product<std::remove_cvref_t<Dst>, Lhs, Rhs> && sgemm_operand<Bias>) {
    sgemm_views(c, a, b, false, bias.data());
  } else {
    c.colwise() = bias;
    c.noalias() += a * b;
  }
}

/// sums[i] += sum_j x[i + j * rows] for an x of rows x cols, column-major: a bias gradient,
/// db += dY 1. Column by column, so that the inner loop runs over contiguous values (a row-wise
/// reduction of the column-major dY would walk it with a stride).
template <class T>
inline void add_row_sums(const T* x, std::ptrdiff_t rows, std::ptrdiff_t cols, T* sums) {
  for (std::ptrdiff_t j = 0; j < cols; ++j)
    for (std::ptrdiff_t i = 0; i < rows; ++i) sums[i] += x[i + j * rows];
}

}  // namespace FLOTILLA_SGEMM_ISA
}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_GEMM_HPP_INCLUDED
