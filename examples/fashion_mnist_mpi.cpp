// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The distributed Fashion-MNIST example under MPI: one process per rank, started by mpirun.
//
//   mpirun -np 2 ./fashion_mnist_mpi --policy sync
//   mpirun -np 4 --hostfile hosts ./fashion_mnist_mpi --policy sync-ps --servers 1
// where `hosts` lists the machines (one "hostname slots=N" line each); every host needs the program
// at the same path and the data set (or --data pointing at a copy). Everything else is
// fashion_mnist_distributed.
#include <flotilla/transport/mpi.hpp>

#include "distributed_common.hpp"

int main(int argc, char** argv) { return example::run_example<flotilla::transport::Mpi>(argc, argv, "fashion_mnist_mpi"); }
