// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DEVICE_HPP_INCLUDED
#define FLOTILLA_CORE_DEVICE_HPP_INCLUDED
// Where a model's arithmetic runs: the last template argument of Model<Net, Loss, Optimizer, T,
// Device>. The same layer, loss and optimizer types serve every device; the device picks the engine
// that runs them (train/detail/engine.hpp), and everything above the engine (policies, transports,
// checkpoints) sees the same flat host buffers whichever it is.
namespace flotilla::device {

/// The CPU: Eigen and flotilla's own GEMM, on the cores of this process (the default).
struct Cpu {};

/// One CUDA GPU: cuBLAS and flotilla's kernels. Needs <flotilla/cuda/engine.hpp>, a translation
/// unit compiled by nvcc and the target flotilla::cuda (see docs/gpu.md).
struct Cuda {};

}  // namespace flotilla::device
#endif  // FLOTILLA_CORE_DEVICE_HPP_INCLUDED
