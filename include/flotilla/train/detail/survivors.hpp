// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_SURVIVORS_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_SURVIVORS_HPP_INCLUDED
// Going on without a lost worker on a ring (TrainerOptions::on_worker_loss =
// continue_with_survivors): the survivors agree on who is left (train/detail/ring_recovery.hpp), re-form
// their group, and take the state of the survivor that got furthest, so that they continue as one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/log.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/topology/detail/ring.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/detail/ring_recovery.hpp"

namespace flotilla::detail {

/// Where a survivor goes on from once the ring has re-formed: the data position of the survivor
/// that got furthest (epoch, and samples of it trained on), its update count in this call, and
/// its last epoch record when it has one more than this worker.
struct SurvivorPosition {
  std::uint64_t epoch = 0, samples = 0, steps_this_call = 0;
  std::optional<EpochRecord> record;
};

/// This worker's progress when a loss is handled.
struct SurvivorProgress {
  std::uint64_t records = 0;          ///< epochs recorded in this fit() call
  std::uint64_t done_epoch = 0, done_batch = 0;  ///< the position after the last completed update
  std::uint64_t steps_this_call = 0;
  std::size_t batch_size = 0;         ///< samples per worker per step
  const History* history = nullptr;   ///< this worker's records (the leader sends its last)
};

/// After `lost` was lost during `during` (nullopt: the check-in at the end of training), agrees
/// with the other survivors on who is left, re-forms `group`, logs each loss once, and takes the
/// state of the survivor that got furthest. nullopt when nobody was lost (a quiet check-in).
/// Losses during this start it over; a rank that cannot go on throws.
template <class E, class G, class R, class State>
std::optional<SurvivorPosition> survive_loss(E& e, G& group, R& recovery, State& s, std::optional<std::size_t> lost,
                                             const std::string& during, bool in_update, const SurvivorProgress& at,
                                             std::ostream* log) {
  // The position in samples: batch indices count global batches, which the re-formed ring makes smaller.
  const std::uint64_t done_samples = at.done_batch * at.batch_size * group.size();
  for (;;) {
    const LossDecision d = recovery.agree(lost, LossProgress{s.step, at.records});
    if (!d.changed()) return std::nullopt;
    for (const std::size_t r : d.lost)
      flotilla::detail::log_to(log, LogLevel::warning, "",
                               "worker " + std::to_string(r) + " (host " + e.address(r) + ") lost during " + during + " at step " +
                                   std::to_string(s.step + (in_update ? 1 : 0)) + "; continuing with " +
                                   std::to_string(group.size()) + " workers, effective batch " +
                                   std::to_string(at.batch_size * group.size()));
    try {
      // Into copies: a loss in the middle of this leaves this worker's own state whole.
      std::vector<std::uint64_t> head = {s.step, at.done_epoch, done_samples, at.records, at.steps_this_call, 0};
      std::vector<std::byte> rec;
      const bool leader = group.rank() == d.leader;
      if (leader && at.records > 0 && at.history && !at.history->empty()) rec = record_bytes(at.history->back());
      head[5] = rec.size();
      const Tag tag = protocol_tags::broadcast;
      collective::broadcast(group, std::span<std::uint64_t>(head), d.leader, tag);
      std::vector<typename State::T> parameters(s.engine.parameters().begin(), s.engine.parameters().end());
      collective::broadcast(group, std::span<typename State::T>(parameters), d.leader, tag);
      s.engine.optimizer_state_to_host(s.opt);
      std::vector<std::vector<typename State::T>> buffers;
      for (auto b : s.opt.buffers()) {
        buffers.emplace_back(b.begin(), b.end());
        collective::broadcast(group, std::span<typename State::T>(buffers.back()), d.leader, tag);
      }
      rec.resize(static_cast<std::size_t>(head[5]));
      if (!rec.empty())
        collective::broadcast(group, std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(rec.data()), rec.size()),
                              d.leader, tag);
      std::copy(parameters.begin(), parameters.end(), s.engine.parameters().begin());
      auto own = s.opt.buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i) std::copy(buffers[i].begin(), buffers[i].end(), own[i].begin());
      s.engine.optimizer_state_changed();
      s.step = head[0];
      SurvivorPosition back{head[1], head[2], head[4], std::nullopt};
      if (head[3] > at.records) {
        if (head[3] != at.records + 1 || rec.empty())
          throw TransportError("worker " + std::to_string(e.rank()) + ": the leading survivor has recorded " +
                               std::to_string(head[3]) + " epochs, this one " + std::to_string(at.records) +
                               "; survivors can be one epoch apart at most");
        back.record = record_from_bytes(rec);
      }
      return back;
    } catch (const PeerLostError& x) {
      lost = x.peer();
    }
  }
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_SURVIVORS_HPP_INCLUDED
