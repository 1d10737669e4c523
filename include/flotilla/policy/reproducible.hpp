// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_POLICY_REPRODUCIBLE_HPP_INCLUDED
#define FLOTILLA_POLICY_REPRODUCIBLE_HPP_INCLUDED
// policy::Reproducible: synchronous training whose parameters have the same bits whatever the
// number of workers, the transport and the number of cores per worker.
//
// Synchronous training is the same arithmetic as one worker with the N-times batch only up to the
// order of its sums: a ring adds each chunk in a different order of the workers, and a worker adds
// its cores' parts in core order, so 3 workers and 4 workers end a run some ulps apart, and the
// runs drift further with every step. Here the global batch is cut into virtual shards of
// `shard_samples` samples (the last of a partial batch shorter); each shard's gradient is computed
// by one core alone, the same arithmetic wherever it runs; and the shards' gradients are added in
// the fixed order of a binary tree over the shards (collective/sum_tree.hpp), the part of the tree
// above a worker's own shards by collective::tree_allreduce. Then every worker applies the same
// optimizer step.
//
// What it asks: the global batch (batch_size x workers) is the same in the runs to compare, and
// batch_size a multiple of shard_samples; the CPU engine (on one instruction set: a binary built
// for AVX-512 and one for AVX2 multiply differently); no normalisation statistics over the global
// batch (SyncBatchNorm): BatchNorm normalises each shard over its own samples. What it costs is in
// docs/reproducibility.md: the cores work on shards of shard_samples samples, and the sum is one
// more pass over the gradients, not overlapped with backward.
#include <cstddef>
#include <string_view>

#include "flotilla/core/topology.hpp"

namespace flotilla::policy {

struct Reproducible {
  static constexpr std::string_view name = "reproducible";
  using topology = topology::Ring;
  /// The gradients are summed after backward, shard by shard in the tree's order, not bucket by
  /// bucket during it; step() receives the mean over the global batch all the same.
  static constexpr bool reduce_gradients_in_backward = false;
  /// Samples per virtual shard: the unit of work of a core, and the leaf of the sum. Smaller
  /// shards spread a batch over more cores and workers; larger ones multiply faster.
  std::size_t shard_samples = 8;

  template <class Context>
  void step(Context& ctx) {
    ctx.apply_optimizer();
  }
};

}  // namespace flotilla::policy
#endif  // FLOTILLA_POLICY_REPRODUCIBLE_HPP_INCLUDED
