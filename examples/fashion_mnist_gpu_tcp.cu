// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// fashion_mnist_tcp on GPUs: the distributed example's CNN with device::Cuda, one process per
// rank over TCP. Every worker trains on the current CUDA device (CUDA_VISIBLE_DEVICES picks it per
// process on a machine with several); the gradients go through pinned host memory to the
// transport, and with --policy sync-ps-fp16 they leave the GPU as fp16 codes.
//   flotilla-launch -n 2 -- ./fashion_mnist_gpu_tcp --policy sync
//   flotilla-launch -n 3 -- ./fashion_mnist_gpu_tcp --policy sync-ps-fp16 --servers 1
// Everything else, flags included (the TCP settings, --on-worker-loss), is fashion_mnist_tcp's.
#include <flotilla/cuda/engine.hpp>  // first: the CUDA engine for device::Cuda models

#include "tcp_program_flags.hpp"

using GpuModel = flotilla::Model<example::Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam, float, flotilla::device::Cuda>;

int main(int argc, char** argv) {
  if (const auto reason = flotilla::cuda::no_device_reason()) {
    std::fprintf(stderr, "fashion_mnist_gpu_tcp: %s\n", reason->c_str());
    return 77;
  }
  return example::run_example<flotilla::transport::Tcp, GpuModel, example::TcpProgramFlags>(argc, argv,
                                                                                           "fashion_mnist_gpu_tcp");
}
