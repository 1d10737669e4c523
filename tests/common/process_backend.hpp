// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// The transport of a test program built once per process backend: FLOTILLA_TEST_TCP or
// FLOTILLA_TEST_MPI picks it, and backend_options() gives the options every rank starts with.
#if defined(FLOTILLA_TEST_TCP)
#include "flotilla/transport/tcp.hpp"
namespace flotilla_test {
using Backend = flotilla::transport::Tcp;
inline Backend::options backend_options() { return Backend::options::from_environment(); }
}  // namespace flotilla_test
#elif defined(FLOTILLA_TEST_MPI)
#include "flotilla/transport/mpi.hpp"
namespace flotilla_test {
using Backend = flotilla::transport::Mpi;
inline Backend::options backend_options() { return {}; }
}  // namespace flotilla_test
#else
#error "define FLOTILLA_TEST_TCP or FLOTILLA_TEST_MPI"
#endif

#include <cstddef>
#include <utility>

namespace flotilla_test {

/// This process's rank and the job's size, before any Trainer runs.
inline std::pair<std::size_t, std::size_t> rank_and_size() {
#if defined(FLOTILLA_TEST_TCP)
  const auto o = backend_options();
  return {o.rank, o.world_size};
#else
  flotilla::transport::mpi::detail::mpi_ensure_initialized();  // as the Trainer's job would
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return {static_cast<std::size_t>(r), static_cast<std::size_t>(n)};
#endif
}

}  // namespace flotilla_test
