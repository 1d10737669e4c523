// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_BACKEND_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_BACKEND_HPP_INCLUDED
// The MPI transport as a backend of the Transport concept (Backend, transport::Mpi): run() hosts
// this process's rank of a job started by mpirun, and ends the whole job when the rank fails.
#include <mpi.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/transport/mpi/endpoint.hpp"
#include "flotilla/transport/mpi/options.hpp"
#include "flotilla/transport/mpi/environment.hpp"

namespace flotilla::transport::mpi {

/// The MPI backend: run() hosts this process's one rank of a job started by mpirun.
struct Backend {
  static constexpr std::string_view name = "mpi";
  static constexpr bool in_process = false;
  using options = Options;
  using endpoint = Endpoint;

  /// How many processes the job was started with (initialising MPI if the program has not): the
  /// `ranks` to pass to run() when the launcher's -n, rather than the program, decides.
  static std::size_t launched_ranks(MPI_Comm communicator = MPI_COMM_WORLD) {
    detail::mpi_ensure_initialized();
    int n = 0;
    MPI_Comm_size(communicator, &n);
    return static_cast<std::size_t>(n);
  }

  /// Initialises MPI if the program has not, checks that the job has `ranks` processes (any number
  /// when `ranks` is 0), and calls `body` with this process's endpoint. A failure in `body` on one
  /// rank of several is logged (core/log.hpp: stderr by default), naming the rank, and ends the job
  /// with MPI_Abort (unless options.abort_on_failure is false; see MpiOptions).
  static void run(const options& o, std::size_t ranks, const std::function<void(endpoint&)>& body) {
    detail::mpi_ensure_initialized();
    if (o.communicator == MPI_COMM_NULL) throw ConfigError("Mpi::run: the communicator is MPI_COMM_NULL");
    int world = 0;
    MPI_Comm_size(o.communicator, &world);
    // ranks == 0: the job is as mpirun launched it.
    if (ranks != 0 && static_cast<std::size_t>(world) != ranks)
      throw ConfigError("Mpi::run: the job needs " + std::to_string(ranks) + " ranks, but it was started with " +
                        std::to_string(world) + " MPI processes: start it with mpirun -n " + std::to_string(ranks) +
                        " (or the -n/-np option of your launcher)");
    endpoint e(o.communicator, o);
    try {
      body(e);
    } catch (const std::exception& ex) {
      fail(e, o, ex.what());
      throw;
    } catch (...) {
      fail(e, o, "an exception not derived from std::exception");
      throw;
    }
  }

 private:
  static void fail(const endpoint& e, const options& o, const char* what) {
    if (!o.abort_on_failure || e.size() == 1) return;
    // Logged before MPI_Abort, which may end this process before it returns: the default sink
    // writes each line at once, whole.
    const std::string who = "mpi rank " + std::to_string(e.rank()) + " of " + std::to_string(e.size());
    log_message(LogLevel::error, who, std::string("failed: ") + what);
    log_message(LogLevel::error, who, "calling MPI_Abort to stop the other ranks");
    // MPI_COMM_WORLD even when flotilla runs on a part of it: the rest of the job would otherwise
    // wait for these ranks forever.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
};

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_BACKEND_HPP_INCLUDED
