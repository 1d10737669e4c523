// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_PEERPATH_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_PEERPATH_HPP_INCLUDED
// A worker's gradient path on a ring of peers (peer-to-peer policies): each bucket backward
// finishes goes to the policy's exchange (an allreduce, by default), then the policy's step()
// updates, through a context that offers the workers' collectives and the optimizer.
//
//   backward -> bucket ready (ReadyRunner) -> exchange.exchange(bucket) -> policy.step(ctx) -> optimizer
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/topology/detail/ring.hpp"
#include "flotilla/train/detail/divergence.hpp"
#include "flotilla/train/detail/ready_runner.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/trainer_options.hpp"

namespace flotilla::detail {

/// The context a peer-to-peer policy's step() works with (see concepts/update_policy.hpp).
template <class M, class Codec, class G, class State>
class PeerContext {
 public:
  using T = typename M::scalar_type;
  PeerContext(const TrainerOptions<M>& options, G& group, State& s) : o_(options), g_(group), s_(s) {}
  std::size_t rank() const { return g_.rank(); }
  std::size_t workers() const { return g_.size(); }
  std::uint64_t step() const { return s_.step; }
  std::span<T> parameters() { return s_.engine.parameters(); }
  std::span<T> gradients() { return s_.engine.gradients(); }
  /// Sums (or averages) `values` over the workers, with the policy's codec on the wire.
  void allreduce(std::span<T> values, bool average = false) {
    if (g_.size() == 1) return;
    collective::RingOptions o;
    o.tag = protocol_tags::policy_collective;
    o.average = average;
    collective::ring_allreduce<Codec>(g_, values, o);
  }
  void broadcast(std::span<T> values, std::size_t root = 0) {
    if (g_.size() > 1) collective::broadcast(g_, values, root, protocol_tags::policy_collective);
  }
  /// One optimizer step on this worker with gradients(), at the scheduled learning rate.
  void apply_optimizer() {
    s_.engine.apply_optimizer(o_.optimizer, s_.opt, std::span<const TensorInfo>(M::network::tensors), o_.step_info(s_.step));
    ++s_.step;
  }

 private:
  const TrainerOptions<M>& o_;
  G& g_;
  State& s_;
};

/// One worker's path: buckets to the exchange during backward (or after it, without overlap),
/// then the policy's update.
template <class M, class Policy, class Codec, class G, class State>
class PeerPath {
 public:
  using T = typename M::scalar_type;

  /// `background`: exchange buckets on a thread of their own while backward runs.
  PeerPath(const TrainerOptions<M>& options, Policy& policy, G& group, State& s, Timeline& timeline, std::size_t worker,
           std::size_t workers, bool background)
      : options_(options), policy_(policy), group_(group), s_(s), timeline_(timeline), worker_(worker) {
    // A policy that combines gradients itself (reduce_gradients_in_backward = false) exchanges none.
    if (workers > 1 && Policy::reduce_gradients_in_backward) {
      auto buckets = make_buckets(M::network::parameter_offsets, M::network::parameter_counts,
                                  std::max<std::size_t>(bucket_bytes() / sizeof(T), 1));
      // Each bucket has a tag of its own, from a range of the registry (core/message_tags.hpp).
      if (buckets.size() > protocol_tags::max_buckets)
        throw ConfigError("policy " + std::string(Policy::name) + ": buckets of " + std::to_string(bucket_bytes()) +
                          " bytes cut this model's gradients into " + std::to_string(buckets.size()) +
                          " buckets; at most " + std::to_string(protocol_tags::max_buckets) +
                          " have tags: make bucket_bytes larger");
      runner_ = std::make_unique<ReadyRunner>(std::move(buckets), [this](std::size_t i, Range r) { exchange(i, r); },
                                              background);
    }
  }

  /// What hands finished buckets on (null: nothing to exchange during backward).
  ReadyRunner* runner() const noexcept { return runner_.get(); }
  /// Whether the last update() skipped its step (its gradient was not finite).
  bool skipped() const noexcept { return skipped_; }

  /// After every bucket is exchanged: the policy's step. Returns the seconds it took.
  /// With NonFiniteLoss::skip_update, an exchanged gradient that is not finite skips the step
  /// (skipped() says so) and spends the update's number. The exchanged gradient is the same bits on
  /// every worker (the ring forms each chunk once), so every worker skips the same updates.
  double update() {
    PeerContext<M, Codec, G, State> ctx(options_, group_, s_);
    const auto t0 = Timeline::clock::now();
    skipped_ = options_.on_non_finite_loss == NonFiniteLoss::skip_update &&
               !all_finite(std::span<const T>(std::as_const(s_.engine).gradients()));
    if (skipped_) {
      ++s_.step;
      return 0;
    }
    policy_.step(ctx);
    const auto t1 = Timeline::clock::now();
    timeline_.record("update", "update", worker_, 0, t0, t1);
    return std::chrono::duration<double>(t1 - t0).count();
  }

 private:
  void exchange(std::size_t index, Range r) {
    const auto t0 = Timeline::clock::now();
    GradientBucket<T, G> bucket{index, r.begin, s_.engine.gradients().subspan(r.begin, r.size()), group_,
                                protocol_tags::bucket_base + static_cast<Tag>(index)};
    s_.exchange.exchange(bucket);
    timeline_.record("allreduce bucket " + std::to_string(index), "communication", worker_, 1, t0, Timeline::clock::now());
  }

  std::size_t bucket_bytes() const {
    if constexpr (requires { policy_.bucket_bytes; }) {
      return policy_.bucket_bytes;
    } else {
      return std::size_t{256} * 1024;
    }
  }

  const TrainerOptions<M>& options_;
  Policy& policy_;
  G& group_;
  State& s_;
  Timeline& timeline_;
  std::size_t worker_;
  std::unique_ptr<ReadyRunner> runner_;
  bool skipped_ = false;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_PEERPATH_HPP_INCLUDED
