// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_OPTIONS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_OPTIONS_HPP_INCLUDED
// The settings of an MPI job (Options): its communicator, the timeout of every wait (with
// FLOTILLA_TIMEOUT_MS as the default), what a failure does (and what the watchdog of a blocking
// collective does when it fires: WatchdogTimeout, Options::on_timeout), and the MPI tags flotilla
// may use.
#include <mpi.h>

#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"

namespace flotilla::transport::mpi {

namespace detail {

/// The environment variable that overrides the default timeout of every wait (milliseconds).
inline constexpr const char* mpi_timeout_variable = "FLOTILLA_TIMEOUT_MS";

/// 30 s, or FLOTILLA_TIMEOUT_MS when set. A value that is not a positive whole number is a
/// ConfigError rather than silently the default: a typo would otherwise go unnoticed until a job hangs
/// for the wrong length of time.
inline std::chrono::milliseconds mpi_default_timeout() {
  const char* text = std::getenv(mpi_timeout_variable);
  if (text == nullptr || *text == '\0') return std::chrono::seconds(30);
  const std::string_view s(text);
  long long ms = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
  if (ec != std::errc() || end != s.data() + s.size() || ms <= 0)
    throw ConfigError(std::string(mpi_timeout_variable) + "=\"" + text +
                      "\": expected a positive whole number of milliseconds");
  return std::chrono::milliseconds(ms);
}

}  // namespace detail

/// A blocking collective that outlasted the timeout, as the watchdog found it (Options::on_timeout).
struct WatchdogTimeout {
  std::string operation;                ///< the collective: "allreduce_sum", "reduce_to_host_leader", ...
  std::size_t rank = 0;                 ///< this rank in the job's communicator
  std::size_t ranks = 0;                ///< the job's ranks
  std::uint64_t values = 0;             ///< the elements it was summing or sending
  std::chrono::milliseconds timeout{};  ///< how long it had (Options::timeout)
  std::string message;                  ///< what the default logs: all of the above, and which ranks it waited on
};

/// What the watchdog does by default, before it ends the process: `t.message` as an error record
/// of "mpi rank <r> of <n>" to the log sink (core/log.hpp). A handler of the program's own may call
/// it too.
inline void log_watchdog_timeout(const WatchdogTimeout& t) noexcept {
  try {
    log_message(LogLevel::error, "mpi rank " + std::to_string(t.rank) + " of " + std::to_string(t.ranks), t.message);
  } catch (...) {
  }
}

struct Options {
  /// The longest any wait (send, receive, barrier, allreduce) may last before it fails with
  /// TransportError. Default 30 s, or the environment variable FLOTILLA_TIMEOUT_MS when set (read
  /// when the options are constructed; a value assigned here wins over both).
  std::chrono::milliseconds timeout = detail::mpi_default_timeout();
  /// The processes of the job; run() checks that it has `ranks` of them. A program that runs flotilla
  /// on part of its processes passes a communicator of its own (MPI_Comm_split).
  MPI_Comm communicator = MPI_COMM_WORLD;
  /// When the body throws on one rank of a job of several: true (default) prints the error and calls
  /// MPI_Abort, which ends every process of the job; false rethrows on this rank only and leaves the
  /// others to time out, for programs that handle failures themselves. A job of one rank always
  /// rethrows: there is nobody to stop. With true, an allreduce_sum that outlasts the timeout ends
  /// the job the same way, from a watchdog thread, rather than throw; with false it throws, at the
  /// price of a barrier per call, and a rank whose allreduce_sum timed out may let the others into
  /// an MPI_Allreduce it never joins, where they wait unbounded (see MpiEndpoint::allreduce).
  bool abort_on_failure = true;
  /// With abort_on_failure, called from the watchdog's thread when a blocking collective outlasts
  /// the timeout; empty: log_watchdog_timeout. The process ends when it returns (or throws), with
  /// status 1, whatever it did: the main thread is blocked inside MPI, a blocked MPI call cannot
  /// be cancelled, and no other MPI call may be made meanwhile (MPI_THREAD_SERIALIZED), so neither
  /// this rank nor the others waiting for it in the collective can go on; only the process's end
  /// makes mpirun stop the job. A handler may record the failure in a program's own way (flush its
  /// logs, write a marker, notify a supervisor), or end the process itself with a status of its
  /// choosing (std::_Exit). It must not call MPI, and it should not wait long: the job hangs until
  /// it is done.
  std::function<void(const WatchdogTimeout&)> on_timeout;
  /// The largest MPI tag flotilla uses: the smaller of this and the library's MPI_TAG_UB counts.
  /// Flotilla tags beyond it are folded (see MpiEndpoint::route), so lowering it changes nothing but
  /// speed; the tests lower it to 0 to exercise the folding on an MPI whose MPI_TAG_UB is large.
  /// Every rank must use the same value.
  std::uint32_t max_mpi_tag = 0x7fffffffu;
  /// collective::ring_allreduce hands sums up to this many bytes to MPI_Allreduce and runs flotilla's
  /// ring over point-to-point messages above it. Measured with Open MPI 4.1 on one host
  /// (docs/benchmarks.md, "flotilla's MPI transport against bare MPI_Allreduce"): the ring was ahead of MPI_Allreduce
  /// from 32 MiB up, over shared memory and over TCP, and behind it at 8 and 16 MiB over TCP. Every
  /// rank must use the same value.
  std::size_t native_allreduce_max_bytes = std::size_t{16} << 20;
  /// Whether a job over several hosts, some with several ranks, sums float buffers hierarchically
  /// (HostHierarchy, collective/hierarchical_allreduce.hpp): each host's ranks into its lowest with
  /// MPI_Reduce over the host's communicator (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED), a ring
  /// of those leaders over point-to-point messages, MPI_Bcast back; in pieces of
  /// host_piece_bytes. On the emulated cluster it ran ahead of MPI_Allreduce over TCP at every size
  /// from 4 KiB (docs/benchmarks.md, "Across hosts"). Every rank must use the same values.
  bool hierarchical = true;
  std::size_t host_piece_bytes = std::size_t{4} << 20;
  /// Across hosts, sums smaller than this go to MPI_Allreduce instead: one collective's latency
  /// where the hierarchical sum has three. On the emulated cluster MPI_Allreduce was ahead at 4 KiB
  /// (0.78 of the link rate against 0.61) and behind from 16 KiB (1.05 against 1.17).
  std::size_t hierarchical_min_bytes = std::size_t{8} << 10;
};

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_OPTIONS_HPP_INCLUDED
