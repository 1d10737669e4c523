// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_LAYOUT_HPP_INCLUDED
#define FLOTILLA_PIPELINE_LAYOUT_HPP_INCLUDED
// Where the stages of D pipeline replicas sit among a job's D x P ranks: replica d's stage s is
// rank d * P + s. A replica's stages are consecutive ranks (neighbours in the pipeline are
// neighbours in the job: on TCP, usually one machine), and stage s's replicas, the ranks that
// average their gradients with each other, are P apart.
#include <cstddef>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/message_tags.hpp"

namespace flotilla::pipeline {

/// The pipeline's message tags: entries of the registry of reserved tags (core/message_tags.hpp).
namespace default_tags {
inline constexpr Tag activations = flotilla::detail::reserved_tag("pipeline_activations");
inline constexpr Tag gradients = flotilla::detail::reserved_tag("pipeline_gradients");
inline constexpr Tag replica_allreduce = flotilla::detail::reserved_tag("pipeline_replica_allreduce");
inline constexpr Tag replica_barrier = flotilla::detail::reserved_tag("pipeline_replica_barrier");
/// pipeline::Trainer: per-epoch metrics, and the parameters gathered from the stages.
inline constexpr Tag trainer_metrics = flotilla::detail::reserved_tag("pipeline_trainer_metrics");
inline constexpr Tag trainer_gather = flotilla::detail::reserved_tag("pipeline_trainer_gather");
}  // namespace default_tags

struct Layout {
  std::size_t stages = 1;
  std::size_t replicas = 1;

  std::size_t ranks() const noexcept { return stages * replicas; }
  std::size_t stage_of(std::size_t rank) const noexcept { return rank % stages; }
  std::size_t replica_of(std::size_t rank) const noexcept { return rank / stages; }
  std::size_t rank_of(std::size_t replica, std::size_t stage) const noexcept { return replica * stages + stage; }
  /// The ranks holding stage `stage`, in replica order.
  std::vector<std::size_t> stage_group(std::size_t stage) const {
    std::vector<std::size_t> r;
    for (std::size_t d = 0; d < replicas; ++d) r.push_back(rank_of(d, stage));
    return r;
  }

  /// ConfigError unless a job of `job_ranks` ranks is exactly this layout.
  void check(std::size_t job_ranks) const {
    if (stages == 0 || replicas == 0)
      throw ConfigError("pipeline::Layout: " + std::to_string(stages) + " stages x " + std::to_string(replicas) +
                        " replicas; both must be at least 1");
    if (job_ranks != ranks())
      throw ConfigError("pipeline::Layout: the job has " + std::to_string(job_ranks) + " ranks, but " +
                        std::to_string(stages) + " stages x " + std::to_string(replicas) + " replicas need " +
                        std::to_string(ranks()));
  }
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_LAYOUT_HPP_INCLUDED
