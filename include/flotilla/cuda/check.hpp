// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_CHECK_HPP_INCLUDED
#define FLOTILLA_CUDA_CHECK_HPP_INCLUDED
// Checked CUDA calls: every runtime call, kernel launch and cuBLAS call in flotilla goes through one
// of these macros, which throw cuda::CudaError naming the call, the file and the line.
//
//   FLOTILLA_CUDA_CHECK(cudaMalloc(&p, n));        a runtime call
//   my_kernel<<<blocks, threads, 0, s>>>(...);
//   FLOTILLA_CUDA_CHECK_LAUNCH("my_kernel");       the launch just made (configuration errors)
//   FLOTILLA_CUBLAS_CHECK(cublasSgemm(...));       a cuBLAS call
//
// Errors inside a kernel surface asynchronously, at the next synchronizing call, which is checked
// too and then names that call: run with CUDA_LAUNCH_BLOCKING=1 to have them name the kernel.
#if !__has_include(<cuda_runtime.h>)
#error "flotilla/cuda/check.hpp needs the CUDA toolkit's headers: link your target to flotilla::cuda (configure flotilla where nvcc is found; see docs/gpu.md)"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <optional>
#include <string>

#include "flotilla/cuda/error.hpp"

namespace flotilla::cuda::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  throw CudaError(call, file, line, static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e));
}
inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) {
    // A failed runtime call also leaves its error in the thread's last-error slot (seen on an H100:
    // cudaSetDevice's cudaErrorInvalidDevice). Consume it, or the next FLOTILLA_CUDA_CHECK_LAUNCH
    // would blame this error on an innocent kernel. (A sticky error, a kernel's fault, stays in the
    // context and surfaces again at the next call anyway.)
    (void)cudaGetLastError();
    throw_cuda_error(e, call, file, line);
  }
}
inline void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, (std::string("launch of kernel ") + kernel).c_str(), file, line);
}
inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(call, file, line, static_cast<int>(s), cublasGetStatusName(s), cublasGetStatusString(s));
}

}  // namespace flotilla::cuda::detail

#define FLOTILLA_CUDA_CHECK(call) ::flotilla::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define FLOTILLA_CUDA_CHECK_LAUNCH(kernel) ::flotilla::cuda::detail::check_launch((kernel), __FILE__, __LINE__)
#define FLOTILLA_CUBLAS_CHECK(call) ::flotilla::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)

namespace flotilla::cuda {

/// Why no CUDA device can be used here ("no CUDA device: <reason>"), or nothing when one can.
/// Tests skip with this message; programs can print it.
inline std::optional<std::string> no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  if (count == 0) return std::string("no CUDA device: ") + cudaGetErrorString(cudaErrorNoDevice);
  return std::nullopt;
}

/// The current device's name and compute capability, e.g. "NVIDIA H100 80GB HBM3 (sm_90)".
inline std::string device_description() {
  int device = 0;
  FLOTILLA_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p{};
  FLOTILLA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_CHECK_HPP_INCLUDED
