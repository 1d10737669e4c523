// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// cuda::CudaError's message, which needs no GPU: it names the file, line, call and status.
#include <doctest/doctest.h>

#include <string>

#include "flotilla/cuda/error.hpp"

TEST_CASE("CudaError names the file, line, call and status") {
  const flotilla::cuda::CudaError e("cudaMalloc(&p, bytes)", "engine.hpp", 42, 2, "cudaErrorMemoryAllocation", "out of memory");
  CHECK(std::string(e.what()) == "engine.hpp:42: cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation (2): out of memory");
  CHECK(e.call() == "cudaMalloc(&p, bytes)");
  CHECK(e.file() == "engine.hpp");
  CHECK(e.line() == 42);
  CHECK(e.code() == 2);
  CHECK(e.status_name() == "cudaErrorMemoryAllocation");
  const flotilla::Error& base = e;  // caught as any flotilla error
  CHECK(std::string(base.what()).find("cudaErrorMemoryAllocation") != std::string::npos);
  const flotilla::cuda::CudaError bare("launch of kernel im2col", "im2col.hpp", 7, 9, "cudaErrorInvalidConfiguration", "");
  CHECK(std::string(bare.what()) == "im2col.hpp:7: launch of kernel im2col failed: cudaErrorInvalidConfiguration (9)");
}
