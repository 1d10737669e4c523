// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_WORKERLOSS_HPP_INCLUDED
#define FLOTILLA_TRAIN_WORKERLOSS_HPP_INCLUDED
// TrainerOptions::on_worker_loss: what the others do when a worker dies or stalls. Only the TCP
// transport can go on without a peer; over MPI (without ULFM) and in-process the job stops.
//
// How each topology goes on is its own business: parameter-server workers learn the live set from
// server 0 (train/detail/live_workers.hpp); ring workers agree on it among themselves and re-form the
// ring (train/detail/ring_recovery.hpp). docs/reliability.md, "Recovery", has the whole story.
namespace flotilla {

enum class WorkerLoss {
  /// The policy's natural choice: asynchronous and bounded-staleness training (parameter servers)
  /// go on without the lost worker; synchronous training stops, as with `stop`.
  by_policy,
  /// Every survivor stops with an error naming the lost rank, its host and the operation.
  stop,
  /// The others go on. Synchronous steps then average the gradients of the workers left: the
  /// effective batch shrinks by the lost workers' share, and each survivor logs it. Ring jobs
  /// re-form the ring over the survivors; parameter-server jobs' servers count the workers left.
  continue_with_survivors,
};

namespace detail {

/// Whether the workers of a parameter-server job go on without a lost one (`aggregate`: the policy
/// averages every worker's gradient in a step, i.e. is synchronous).
constexpr bool continues_without_lost_workers(WorkerLoss choice, bool aggregate) noexcept {
  return choice == WorkerLoss::continue_with_survivors || (choice == WorkerLoss::by_policy && !aggregate);
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_WORKERLOSS_HPP_INCLUDED
