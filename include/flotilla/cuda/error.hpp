// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_ERROR_HPP_INCLUDED
#define FLOTILLA_CUDA_ERROR_HPP_INCLUDED
// CudaError: a failed CUDA runtime or cuBLAS call, named by the call as written, its source file and
// line, and the library's name and description of the status. This header needs no CUDA (the
// status arrives as numbers and strings), so the message format is tested on machines without it;
// cuda/check.hpp turns real statuses into these.
#include <string>
#include <utility>

#include "flotilla/core/error.hpp"

namespace flotilla::cuda {

/// A CUDA runtime, kernel launch or cuBLAS call that failed.
class CudaError : public Error {
 public:
  CudaError(std::string call, std::string file, int line, int code, std::string status_name, const std::string& description)
      : Error(message(call, file, line, code, status_name, description)),
        call_(std::move(call)),
        file_(std::move(file)),
        line_(line),
        code_(code),
        status_name_(std::move(status_name)) {}

  /// The call as written at the call site, e.g. "cudaMalloc(&p, bytes)" or "kernel relu_forward".
  const std::string& call() const noexcept { return call_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  /// The numeric status (cudaError_t or cublasStatus_t).
  int code() const noexcept { return code_; }
  /// The status's symbolic name, e.g. "cudaErrorMemoryAllocation".
  const std::string& status_name() const noexcept { return status_name_; }

  /// "<file>:<line>: <call> failed: <name> (<code>): <description>"
  static std::string message(const std::string& call, const std::string& file, int line, int code,
                             const std::string& status_name, const std::string& description) {
    std::string m = file;
    m += ':';
    m += std::to_string(line);
    m += ": ";
    m += call;
    m += " failed: ";
    m += status_name;
    m += " (";
    m += std::to_string(code);
    m += ')';
    if (!description.empty()) {
      m += ": ";
      m += description;
    }
    return m;
  }

 private:
  std::string call_;
  std::string file_;
  int line_;
  int code_;
  std::string status_name_;
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_ERROR_HPP_INCLUDED
