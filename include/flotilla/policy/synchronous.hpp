// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_POLICY_SYNCHRONOUS_HPP_INCLUDED
#define FLOTILLA_POLICY_SYNCHRONOUS_HPP_INCLUDED
// policy::Synchronous: every worker's gradient of a step is averaged before one update, so N
// workers with batch B train exactly as one worker with batch N*B would (to float rounding).
#include <cstddef>
#include <limits>
#include <string_view>

#include "flotilla/core/topology.hpp"

namespace flotilla::policy {

template <class Topology = topology::Ring>
struct Synchronous;

/// Peer to peer: gradients are summed by allreduce, bucket by bucket during backward (the last
/// layers' buckets travel while the first layers are still being differentiated), then every
/// worker applies the same optimizer step.
template <>
struct Synchronous<topology::Ring> {
  static constexpr std::string_view name = "synchronous";
  using topology = topology::Ring;
  static constexpr bool reduce_gradients_in_backward = true;
  /// Gradients are sent in buckets of at least this many bytes: small layers together, a large
  /// layer cut into pieces (no more than about eight; detail::make_buckets), the bucket at the
  /// start of the buffer whatever is left. Small buckets start communication earlier; large ones
  /// pay less per message.
  std::size_t bucket_bytes = 256 * 1024;

  template <class Context>
  void step(Context& ctx) {
    ctx.apply_optimizer();
  }
};

/// Parameter servers: each server waits for one push from every worker, sums them (in worker
/// order, so the sum is deterministic), updates its shard once, and answers every worker.
template <>
struct Synchronous<topology::ParameterServer> {
  static constexpr std::string_view name = "synchronous";
  using topology = topology::ParameterServer;
  static constexpr bool aggregate = true;
  static constexpr std::size_t staleness_bound = 0;
};

}  // namespace flotilla::policy
#endif  // FLOTILLA_POLICY_SYNCHRONOUS_HPP_INCLUDED
