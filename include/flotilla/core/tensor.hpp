// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_TENSOR_HPP_INCLUDED
#define FLOTILLA_CORE_TENSOR_HPP_INCLUDED
// Views of batches and parameters as Eigen matrices.
//
// A batch of activations is a column-major matrix of (features x batch): each sample is one
// contiguous column. Parameters and gradients live in one flat buffer each (see nn/parameters.hpp);
// layers map their tensors out of it with these views, so nothing is copied layer by layer.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <span>
#include <vector>

#include <Eigen/Core>

namespace flotilla {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// A mutable (rows x cols) view, column-major.
template <class T>
using MatrixView = Eigen::Map<Matrix<T>>;
/// A read-only (rows x cols) view, column-major.
template <class T>
using ConstMatrixView = Eigen::Map<const Matrix<T>>;
template <class T>
using VectorView = Eigen::Map<Vector<T>>;
template <class T>
using ConstVectorView = Eigen::Map<const Vector<T>>;

/// Views a span as a (rows x cols) column-major matrix. The span must hold rows * cols values.
template <class T>
inline MatrixView<T> as_matrix(std::span<T> s, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  return MatrixView<T>(s.data(), rows, cols);
}
template <class T>
inline ConstMatrixView<T> as_matrix(std::span<const T> s, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  return ConstMatrixView<T>(s.data(), rows, cols);
}
template <class T>
inline VectorView<T> as_vector(std::span<T> s) {
  return VectorView<T>(s.data(), static_cast<std::ptrdiff_t>(s.size()));
}
template <class T>
inline ConstVectorView<T> as_vector(std::span<const T> s) {
  return ConstVectorView<T>(s.data(), static_cast<std::ptrdiff_t>(s.size()));
}

/// An empty view, used where an optional output is not wanted (e.g. the input gradient of the
/// first layer).
template <class T>
inline MatrixView<T> empty_view() {
  return MatrixView<T>(nullptr, 0, 0);
}

namespace detail {

/// Cache-line aligned allocator: flat buffers start on a 64-byte boundary so that vector loads
/// of the first elements never straddle lines, and so that two threads' buffers never share one.
template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  static constexpr std::size_t alignment = 64;
  CacheAlignedAllocator() noexcept = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    if (n == 0) return nullptr;
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignment}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    if (p) ::operator delete(p, std::align_val_t{alignment});
  }
  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace detail

/// A contiguous, cache-line aligned buffer of scalars.
template <class T>
using Buffer = std::vector<T, detail::CacheAlignedAllocator<T>>;

}  // namespace flotilla
#endif  // FLOTILLA_CORE_TENSOR_HPP_INCLUDED
