// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The distributed Fashion-MNIST example with one process per rank over TCP (Boost.Asio).
//
// On one machine, with the launcher (it sets each process's rank, the world size and the
// coordinator's address):
//   flotilla-launch -n 2 -- ./fashion_mnist_tcp --policy sync
//   flotilla-launch -n 3 -- ./fashion_mnist_tcp --policy async --servers 1   (2 workers, 1 server)
//   flotilla-launch -n 3 --keep-going -- ./fashion_mnist_tcp --policy sync --on-worker-loss continue
// On several machines, start one process per rank by hand with --rank, --world-size,
// --coordinator <rank 0's host>:<port>, --bind <this host's address> and --secret-file (or their
// FLOTILLA_* variables; see docs/transports.md). --help lists every flag: the transport's
// (tcp_program_flags.hpp), and fashion_mnist_distributed's.
#include "tcp_program_flags.hpp"

int main(int argc, char** argv) {
  return example::run_example<flotilla::transport::Tcp, example::Model, example::TcpProgramFlags>(argc, argv,
                                                                                                 "fashion_mnist_tcp");
}
