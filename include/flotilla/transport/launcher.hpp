// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_LAUNCHER_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_LAUNCHER_HPP_INCLUDED
// Which launcher started this process, and as which rank of how many: flotilla-launch's
// FLOTILLA_* variables, or the conventions of the launchers a cluster already has, so that a job
// started by them forms without flotilla's own variables:
//
//   flotilla-launch     FLOTILLA_RANK, FLOTILLA_WORLD_SIZE, FLOTILLA_LOCAL_RANK, FLOTILLA_COORDINATOR
//   torchrun            RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR + MASTER_PORT
//   Open MPI's mpirun   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm's srun        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (tasks of a job step: SLURM_STEP_ID
//                       set; a batch script run directly is one process, whatever its allocation)
//
// Open MPI and Slurm say nothing of a coordinator: MASTER_ADDR and MASTER_PORT give it there too
// (as PyTorch jobs under them do), or FLOTILLA_COORDINATOR.
//
// Launchers nest (torchrun inside an srun task; flotilla-launch inside an mpirun rank), so several
// conventions may be present at once. The innermost one is the job's: flotilla's, then torchrun's,
// Open MPI's, Slurm's, in that order. An outer launcher started at most as many processes as the
// inner one's job has, and at the same count they are the same processes: a world size above the
// job's, or the same size with another rank, contradicts it, and stops with an error naming both
// sets of variables, as does a convention given in part (a rank without a world size) or one whose
// values do not fit (a rank past the world size, a port that is not one).
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::transport {

/// Which program's variables say what this process is.
enum class Launcher { none, flotilla, torchrun, open_mpi, slurm };

/// The launcher's name as messages give it.
constexpr std::string_view launcher_name(Launcher l) noexcept {
  switch (l) {
    case Launcher::flotilla: return "flotilla-launch";
    case Launcher::torchrun: return "torchrun";
    case Launcher::open_mpi: return "Open MPI";
    case Launcher::slurm: return "Slurm";
    case Launcher::none: break;
  }
  return "no launcher";
}

/// This process as its launcher started it.
struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  std::size_t rank = 0;
  /// How many processes the launcher started for the job (1: this one alone).
  std::size_t world_size = 1;
  /// The process's index among the job's processes on its host, when the launcher says it.
  std::optional<std::size_t> local_rank;
  /// host:port where rank 0 listens, when the variables give it.
  std::optional<std::string> coordinator;
  /// The variables read, as NAME=value, for messages ("RANK=1 WORLD_SIZE=4").
  std::string variables;

  /// Whether the launcher started other processes for the same job.
  bool several() const noexcept { return world_size > 1; }
};

/// A variable's value, or none when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const char*)>;

namespace detail {

struct LauncherConvention {
  Launcher launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* coordinator;  // host:port in one variable, or nullptr (MASTER_ADDR + MASTER_PORT)
  /// For the convention to count, one of these must be set (none: nullptr); Slurm's job step
  /// under its present name and its older one.
  const char* requires_set[2];
};

/// Innermost first: the first one present is the job's.
inline constexpr LauncherConvention launcher_conventions[] = {
    {Launcher::flotilla, "FLOTILLA_RANK", "FLOTILLA_WORLD_SIZE", "FLOTILLA_LOCAL_RANK", "FLOTILLA_COORDINATOR", {}},
    {Launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", nullptr, {}},
    {Launcher::open_mpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", nullptr, {}},
    {Launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, {"SLURM_STEP_ID", "SLURM_STEPID"}},
};

inline std::size_t launcher_count(const std::string& name, const std::string& text, const std::string& what) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v > 0xFFFFFFFFu)
    throw ConfigError(name + "=" + text + " is not " + what);
  return static_cast<std::size_t>(v);
}

/// One convention's reading: nullopt when none of its variables is set.
inline std::optional<LaunchEnvironment> read_convention(const LauncherConvention& c, const EnvironmentLookup& get);

/// flotilla's own variables: what the TCP transport reads and checks with messages of its own
/// (transport/tcp/options.hpp), so a value that does not parse leaves the world size unknown (0)
/// here instead of failing twice; a local rank inherited from another rank's environment (a
/// program that starts a rank itself) is dropped rather than refused.
inline std::optional<LaunchEnvironment> read_own_convention(const LauncherConvention& c, const EnvironmentLookup& get) {
  const auto rank = get(c.rank), size = get(c.world_size);
  if (!rank && !size) return std::nullopt;
  try {
    auto e = read_convention(c, get);
    if (e && e->local_rank && *e->local_rank > e->rank) e->local_rank.reset();
    return e;
  } catch (const ConfigError&) {
    LaunchEnvironment e;
    e.launcher = c.launcher;
    e.world_size = 0;
    return e;
  }
}

inline std::optional<LaunchEnvironment> read_convention(const LauncherConvention& c, const EnvironmentLookup& get) {
  if (c.requires_set[0] && !get(c.requires_set[0]) && !(c.requires_set[1] && get(c.requires_set[1]))) return std::nullopt;
  const auto rank = get(c.rank), size = get(c.world_size), local = get(c.local_rank);
  if (!rank && !size && !local) return std::nullopt;
  const std::string who(launcher_name(c.launcher));
  LaunchEnvironment e;
  e.launcher = c.launcher;
  const auto note = [&e](const char* name, const std::optional<std::string>& v) {
    if (!v) return;
    if (!e.variables.empty()) e.variables += ' ';
    e.variables += std::string(name) + "=" + *v;
  };
  note(c.rank, rank);
  note(c.world_size, size);
  note(c.local_rank, local);
  if (!rank || !size)
    throw ConfigError(who + "'s variables are set in part (" + e.variables + "): " + (rank ? c.world_size : c.rank) +
                      " is missing, so this process cannot tell which rank of which job it is");
  e.rank = launcher_count(c.rank, *rank, "a rank (a whole number from 0)");
  e.world_size = launcher_count(c.world_size, *size, "a number of processes");
  if (e.world_size == 0) throw ConfigError(std::string(c.world_size) + "=0: a job has at least one process");
  if (e.rank >= e.world_size)
    throw ConfigError(who + "'s " + e.variables + ": the rank is not below the world size (ranks are 0 to " +
                      std::to_string(e.world_size - 1) + ")");
  if (local) {
    e.local_rank = launcher_count(c.local_rank, *local, "a local rank (a whole number from 0)");
    if (*e.local_rank > e.rank)
      throw ConfigError(who + "'s " + e.variables + ": the local rank is above the rank (a host's ranks are some of the job's)");
  }
  if (c.coordinator) {
    if (const auto v = get(c.coordinator)) e.coordinator = *v;
  } else {
    const auto addr = get("MASTER_ADDR"), port = get("MASTER_PORT");
    if (addr || port) {
      const std::string seen = std::string(addr ? "MASTER_ADDR=" + *addr : "") + (addr && port ? " " : "") +
                               (port ? "MASTER_PORT=" + *port : "");
      if (!addr || !port || addr->empty())
        throw ConfigError(seen + ": the coordinator needs both MASTER_ADDR (its host) and MASTER_PORT (its port)");
      const std::size_t p = launcher_count("MASTER_PORT", *port, "a port (1 to 65535)");
      if (p == 0 || p > 65535) throw ConfigError("MASTER_PORT=" + *port + " is not a port (1 to 65535)");
      // An IPv6 address goes in brackets, as host:port parsers read it.
      const bool v6 = addr->find(':') != std::string::npos && addr->front() != '[';
      e.coordinator = (v6 ? "[" + *addr + "]" : *addr) + ":" + *port;
      e.variables += " " + seen;
    }
  }
  return e;
}

}  // namespace detail

/// What the launchers' variables say, read through `get`; LaunchEnvironment{} (one process alone)
/// when none is set. A ConfigError when they contradict one another or themselves (see the top
/// of this file), naming the variables.
inline LaunchEnvironment launch_environment(const EnvironmentLookup& get) {
  std::optional<LaunchEnvironment> job;
  for (const auto& c : detail::launcher_conventions) {
    const auto found = c.launcher == Launcher::flotilla ? detail::read_own_convention(c, get) : detail::read_convention(c, get);
    if (!found) continue;
    if (!job) {
      job = found;
      continue;
    }
    if (job->world_size == 0) break;  // flotilla's own, unreadable: the TCP transport names the problem
    // An outer launcher: it started the job's processes, or some of them.
    if (found->world_size > job->world_size || (found->world_size == job->world_size && found->rank != job->rank))
      throw ConfigError(std::string(launcher_name(job->launcher)) + "'s " + job->variables + " and " +
                        std::string(launcher_name(found->launcher)) + "'s " + found->variables +
                        " contradict each other: an outer launcher starts at most the job's processes, and at the "
                        "same count the same ones; unset the variables that do not describe this job");
  }
  return job ? *job : LaunchEnvironment{};
}

/// The same, from this process's environment.
inline LaunchEnvironment launch_environment() {
  return launch_environment([](const char* name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
  });
}

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_LAUNCHER_HPP_INCLUDED
