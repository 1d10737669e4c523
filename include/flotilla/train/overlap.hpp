// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_OVERLAP_HPP_INCLUDED
#define FLOTILLA_TRAIN_OVERLAP_HPP_INCLUDED
// Whether a worker's gradient communication overlaps its backward pass (TrainerOptions::overlap),
// and how `automatic` decides.
//
// Overlap runs each bucket's allreduce (or each shard's push) on a thread of its own as soon as
// backward has finished the bucket's layers. That hides communication only if the thread finds a
// core nobody computes on. Where every core already runs a compute thread (two single-thread
// ranks on a 2-core machine), the communication thread takes turns with backward on the same
// cores: the work is not hidden, and the switches and the waits for a peer's thread, itself
// waiting for a core, add to it. There the worker does better to finish backward first and then
// move every bucket at once, on the training thread, with its peers doing the same.
#include <cstddef>
#include <string>
#include <string_view>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "flotilla/core/error.hpp"

namespace flotilla {

/// When gradient communication overlaps backward (TrainerOptions::overlap).
enum class Overlap {
  /// Overlap when this host has a core to spare for it: when the cores this process may run on
  /// outnumber the compute threads of the job's ranks on this host (see detail::overlap_pays).
  /// Models on a GPU always overlap: their host threads mostly wait for the device.
  automatic,
  /// Always, on a thread of the worker's own, during backward.
  always,
  /// Never: after backward, on the training thread.
  never,
};

/// "auto", "always" or "never" (a flag's or a setting's text); ConfigError naming `where` else.
inline Overlap parse_overlap(std::string_view text, std::string_view where) {
  if (text == "auto" || text == "automatic") return Overlap::automatic;
  if (text == "always") return Overlap::always;
  if (text == "never") return Overlap::never;
  throw ConfigError(std::string(where) + ": '" + std::string(text) + "' is not auto, always or never");
}

namespace detail {

/// The cores this process may run on: its CPU affinity mask where the platform has one (a
/// container or `taskset` may allow fewer than the machine has), else the hardware's count.
inline std::size_t usable_cores() noexcept {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

/// `automatic`'s rule for a CPU model: overlap when `cores` exceed the compute threads of the
/// `ranks_on_host` ranks sharing them, `threads` each, so that a communication thread has a core.
inline bool overlap_pays(std::size_t cores, std::size_t ranks_on_host, std::size_t threads) noexcept {
  return cores > ranks_on_host * threads;
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_OVERLAP_HPP_INCLUDED
