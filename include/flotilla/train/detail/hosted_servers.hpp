// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_HOSTEDSERVERS_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_HOSTEDSERVERS_HPP_INCLUDED
// The parameter servers a Trainer's process hosts: each holds a shard of the parameters and its
// optimizer state, made from worker 0's state when first asked for (or from the shard file of the
// checkpoint set being resumed), kept across fit() calls, and saved as that set's shard files.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/detail/checkpoint_saving.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/detail/model_checkpoint.hpp"

namespace flotilla::detail {

template <class M, class Codec>
class HostedServers {
 public:
  using T = typename M::scalar_type;
  using shard_type = ParameterServerShard<T, typename M::optimizer, Codec>;

  /// Server `s` of `servers`, made when missing (or when the shard layout changed, or a checkpoint
  /// was loaded since) from `parameters` and `optimizer_buffers()` (the whole model's: worker 0's,
  /// asked for only then: a GPU engine copies them to the host), unless resume_from() left a shard
  /// file for it.
  template <class OptimizerBuffers>
  shard_type& get(std::size_t s, std::size_t servers, std::span<const T> parameters, OptimizerBuffers&& optimizer_buffers) {
    const std::lock_guard lock(mutex_);
    if (rebuild_ || shards_.size() != servers) {
      shards_.clear();
      rebuild_ = false;
    }
    if (shards_.empty()) shards_.resize(servers);
    if (!shards_[s]) {
      const auto ranges = balanced_shards(M::parameter_count, servers);
      const Range r = ranges[s];
      shards_[s] = std::make_unique<shard_type>(r, parameters.subspan(r.begin, r.size()),
                                                tensors_within(M::network::tensors, r));
      auto dst = shards_[s]->optimizer_buffers().buffers();
      if (s < pending_.size()) {
        // resume_from() verified it: this shard's parameters, optimizer state and update count.
        const checkpoint::Reader& f = pending_[s];
        f.array_into<T>("parameters", shards_[s]->parameters());
        for (std::size_t i = 0; i < dst.size(); ++i) f.array_into<T>("optimizer." + std::to_string(i), dst[i]);
        shards_[s]->set_updates(f.u64("updates"));
      } else {
        // A restored single-file checkpoint's optimizer state belongs on the shards that serve it.
        const std::vector<std::span<const T>> src = optimizer_buffers();
        for (std::size_t i = 0; i < dst.size(); ++i)
          std::copy_n(src[i].begin() + static_cast<std::ptrdiff_t>(r.begin), r.size(), dst[i].begin());
      }
    }
    return *shards_[s];
  }

  bool empty() const noexcept { return shards_.empty(); }

  /// Copies every hosted shard's optimizer state into `out` (the whole model's buffers).
  void gather_optimizer_state(std::vector<std::vector<T>>& out) const {
    for (const auto& shard : shards_) {
      if (!shard) continue;
      auto buffers = shard->optimizer_buffers().buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        std::copy(buffers[i].begin(), buffers[i].end(), out[i].begin() + static_cast<std::ptrdiff_t>(shard->shard().begin));
    }
  }

  /// The state changed under the servers (a checkpoint was loaded): they are made again, from
  /// `shard_files` where given (a resumed set's, verified by check_shard_file).
  void reset(std::vector<checkpoint::Reader> shard_files = {}) {
    const std::lock_guard lock(mutex_);
    shards_.clear();
    rebuild_ = true;
    pending_ = std::move(shard_files);
  }
  /// The resumed set's shard files are consumed once fit() has made its servers.
  void forget_shard_files() { pending_.clear(); }

  /// A shard file must be shard `index` of `servers` of this model's parameters.
  static void check_shard_file(const checkpoint::Reader& r, std::size_t index, std::size_t servers) {
    check_checkpoint<M>(r);
    const auto shards = balanced_shards(M::parameter_count, servers);
    const std::uint64_t got_index = r.u64("shard_index"), got_count = r.u64("shard_count");
    const std::uint64_t begin = r.u64("shard_begin"), end = r.u64("shard_end");
    if (got_index != index || got_count != servers || begin != shards[index].begin || end != shards[index].end)
      throw CheckpointError(r.source() + ": holds shard " + std::to_string(got_index) + " of " + std::to_string(got_count) +
                            " (parameters " + std::to_string(begin) + ".." + std::to_string(end) + "), this job needs shard " +
                            std::to_string(index) + " of " + std::to_string(servers) + " (parameters " +
                            std::to_string(shards[index].begin) + ".." + std::to_string(shards[index].end) + ")");
    if (r.count("parameters") != end - begin)
      throw CheckpointError(r.source() + ": record 'parameters' has " + std::to_string(r.count("parameters")) +
                            " elements for a shard of " + std::to_string(end - begin));
  }

  /// Writes server `index`'s shard as part of the set of `step`, rotates its older files, and
  /// says whether it worked; a failure is noted in `failures`, not thrown: the server goes on
  /// serving and the set of that step stays incomplete.
  static bool save(shard_type& shard, std::size_t index, std::size_t servers, std::uint64_t step, const FitOptions& fit,
                   CheckpointFailures& failures) {
    const auto& cp = fit.checkpoints;
    if (!cp.enabled()) return false;
    const std::string part = checkpoint::server_part(index, servers);
    const auto path = checkpoint::set_file(cp.directory, step, part);
    return save_set_file(cp, step, part, checkpoint::trainer_parts(servers), "parameter server " + std::to_string(index),
                         failures, fit.log, [&] {
      checkpoint::Writer w;
      add_model_records<M>(w);
      w.add_u64("step", step);
      w.add_u64("updates", shard.updates());
      w.add_u64("shard_index", index);
      w.add_u64("shard_count", servers);
      w.add_u64("shard_begin", shard.shard().begin);
      w.add_u64("shard_end", shard.shard().end);
      w.add_array<T>("parameters", std::span<const T>(shard.parameters()));
      auto buffers = shard.optimizer_buffers().buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        w.add_array<T>("optimizer." + std::to_string(i), std::span<const T>(buffers[i]));
      w.commit(path);
    });
  }

 private:
  std::vector<std::unique_ptr<shard_type>> shards_;
  std::vector<checkpoint::Reader> pending_;
  bool rebuild_ = false;
  mutable std::mutex mutex_;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_HOSTEDSERVERS_HPP_INCLUDED
