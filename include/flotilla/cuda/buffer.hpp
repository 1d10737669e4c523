// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_BUFFER_HPP_INCLUDED
#define FLOTILLA_CUDA_BUFFER_HPP_INCLUDED
// Owning buffers of CUDA memory: DeviceBuffer<T> (device memory, cudaMalloc) and PinnedBuffer<T>
// (page-locked host memory, cudaMallocHost, which cudaMemcpyAsync can copy without staging and
// truly asynchronously). Move-only; freed in the destructor. Sizes are in elements.
#if !__has_include(<cuda_runtime.h>)
#error "flotilla/cuda/buffer.hpp needs the CUDA toolkit's headers: link your target to flotilla::cuda (see docs/gpu.md)"
#endif
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <utility>

#include "flotilla/cuda/check.hpp"

namespace flotilla::cuda {
namespace detail {

struct DeviceAllocator {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    FLOTILLA_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  static void release(void* p) noexcept { (void)cudaFree(p); }
};
struct PinnedAllocator {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    FLOTILLA_CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  static void release(void* p) noexcept { (void)cudaFreeHost(p); }
};

/// n elements of T from Alloc; contents uninitialized. (Frees in destructors are not checked: a
/// destructor must not throw, and a failed free leaves nothing to do.)
template <class T, class Alloc>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  explicit CudaBuffer(std::size_t n) : data_(n ? static_cast<T*>(Alloc::allocate(n * sizeof(T))) : nullptr), size_(n) {}
  CudaBuffer(CudaBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer() { reset(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }

  /// Grows to at least n elements (contents are not kept); never shrinks.
  void reserve(std::size_t n) {
    if (n > size_) *this = CudaBuffer(n);
  }

 private:
  void reset() noexcept {
    if (data_) Alloc::release(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

/// Device memory: pass data() to kernels and cuBLAS, never dereference it on the host.
template <class T>
using DeviceBuffer = detail::CudaBuffer<T, detail::DeviceAllocator>;

/// Page-locked host memory: readable and writable on the host (as a span), and the source or
/// destination of asynchronous copies.
template <class T>
using PinnedBuffer = detail::CudaBuffer<T, detail::PinnedAllocator>;

template <class T>
std::span<T> as_span(PinnedBuffer<T>& b) noexcept {
  return {b.data(), b.size()};
}
template <class T>
std::span<const T> as_span(const PinnedBuffer<T>& b) noexcept {
  return {b.data(), b.size()};
}

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_BUFFER_HPP_INCLUDED
