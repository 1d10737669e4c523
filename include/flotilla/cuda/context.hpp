// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_CONTEXT_HPP_INCLUDED
#define FLOTILLA_CUDA_CONTEXT_HPP_INCLUDED
// Context: what one engine computes with on its GPU: the device, a compute stream, a copy stream
// (host <-> device transfers that overlap the computation), and a cuBLAS handle bound to the
// compute stream. Event: an owning cudaEvent_t (timing disabled: only ordering is wanted).
#if !__has_include(<cuda_runtime.h>)
#error "flotilla/cuda/context.hpp needs the CUDA toolkit's headers: link your target to flotilla::cuda (see docs/gpu.md)"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <utility>

#include "flotilla/cuda/check.hpp"

namespace flotilla::cuda {

class Event {
 public:
  Event() { FLOTILLA_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      if (e_) (void)cudaEventDestroy(e_);
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e_) (void)cudaEventDestroy(e_);
  }
  cudaEvent_t get() const noexcept { return e_; }
  void record(cudaStream_t s) { FLOTILLA_CUDA_CHECK(cudaEventRecord(e_, s)); }
  void synchronize() const { FLOTILLA_CUDA_CHECK(cudaEventSynchronize(e_)); }

 private:
  cudaEvent_t e_ = nullptr;
};

class Context {
 public:
  /// Uses `device` (default: the first) for everything this context creates and launches.
  explicit Context(int device = 0) : device_(device) {
    FLOTILLA_CUDA_CHECK(cudaSetDevice(device_));
    FLOTILLA_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    FLOTILLA_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    FLOTILLA_CUBLAS_CHECK(cublasCreate(&blas_));
    FLOTILLA_CUBLAS_CHECK(cublasSetStream(blas_, compute_));
    // Full float precision: no TF32 tensor-core shortcut, so results agree with the CPU backend to
    // float rounding (the tests compare at 1e-5). NVIDIA_TF32_OVERRIDE=1 in the environment would
    // still force TF32; docs/gpu.md says so.
    FLOTILLA_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
    if (blas_) (void)cublasDestroy(blas_);
    if (copy_) (void)cudaStreamDestroy(copy_);
    if (compute_) (void)cudaStreamDestroy(compute_);
  }

  int device() const noexcept { return device_; }
  cudaStream_t compute() const noexcept { return compute_; }
  cudaStream_t copy() const noexcept { return copy_; }
  cublasHandle_t blas() const noexcept { return blas_; }
  /// Makes this context's device current on the calling thread (trainer threads call from many).
  void activate() const { FLOTILLA_CUDA_CHECK(cudaSetDevice(device_)); }
  void synchronize() const { FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(compute_)); }

 private:
  int device_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_CONTEXT_HPP_INCLUDED
