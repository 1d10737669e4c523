// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Distributed training of a CNN on Fashion-MNIST, on several workers of this machine, with no setup.
//
// The workers are threads of this process (flotilla's embedded default transport). Each takes its
// share of every global batch; the update policy decides what happens to their gradients:
//   --policy sync       synchronous, peer to peer: gradients summed by ring allreduce, in buckets
//                       sent while backward is still running (the default)
//   --policy sync-fp16  the same with fp16 on the wire (half the bytes)
//   --policy sync-ps    synchronous, through a parameter server
//   --policy async      asynchronous, through a parameter server: no worker waits for another
// The same program runs as separate processes with the TCP transport (fashion_mnist_tcp) or MPI
// (fashion_mnist_mpi): see distributed_common.hpp, which all three share, and the README.
//
// It first times one worker for a few hundred steps, then trains with --workers workers and reports
// test accuracy, samples per second and the speed-up over one worker.
#include "distributed_common.hpp"

int main(int argc, char** argv) {
  return example::run_example<flotilla::transport::InProcess>(argc, argv, "fashion_mnist_distributed");
}
