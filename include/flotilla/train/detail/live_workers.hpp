// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_LIVEWORKERS_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_LIVEWORKERS_HPP_INCLUDED
// How the workers of a parameter-server job that lose one of theirs agree on who is left
// (TrainerOptions::on_worker_loss, train/worker_loss.hpp; docs/reliability.md, "Recovery").
//
// The servers drop a lost worker (topology/detail/parameter_server.hpp). The workers never talk to one
// another: their epoch-end reductions (metrics, evaluation, barriers) go through server 0
// (topology/detail/ps_reduce.hpp), whose answers list the workers that took part, the same list on
// each of them. That list is the live set: evaluation is split over it, and the metrics are those
// of the workers in it. The transport may notice a death earlier (a closed connection): that is
// logged at once, so that the log says when it happened, not only at the end of the epoch.
#include <algorithm>
#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/core/thread_pool.hpp"
#include "flotilla/train/detail/engine.hpp"
#include "flotilla/train/worker_loss.hpp"

namespace flotilla {
namespace detail {

/// One worker's view of the workers still training; logs each lost one once.
class LiveWorkers {
 public:
  /// `batch`: samples per worker per step; `synchronous`: whether a step averages every worker's
  /// gradient (then the loss shrinks the effective batch, which the log says).
  LiveWorkers(std::size_t workers, std::size_t self, std::size_t batch, bool synchronous, std::ostream* log)
      : workers_(workers), self_(self), batch_(batch), synchronous_(synchronous), log_(log), lost_(workers, 0),
        watched_(workers, 0) {
    for (std::size_t w = 0; w < workers; ++w) members_.push_back(w);
  }

  /// The workers (job ranks) of the last reduction, in rank order.
  const std::vector<std::size_t>& members() const noexcept { return members_; }
  /// This worker's position among them.
  std::size_t index() const {
    return static_cast<std::size_t>(std::find(members_.begin(), members_.end(), self_) - members_.begin());
  }
  /// Workers known lost, from either source.
  std::size_t lost() const noexcept { return static_cast<std::size_t>(std::count(lost_.begin(), lost_.end(), 1)); }

  /// Logs the workers the transport has lost since the last call (transports that track them).
  /// Once per peer: a worker that rejoins comes back through the servers, and the link between two
  /// workers (which never talk) stays lost.
  template <class E>
  void watch(E& e) {
    if constexpr (ListsLostPeers<E>) {
      for (const std::size_t p : e.lost_peers())
        if (p < workers_ && !std::exchange(watched_[p], 1)) note(e, p);
    }
  }
  /// This worker rejoined a running job: the peers its transport did not reconnect to (the other
  /// workers) are not losses to report.
  template <class E>
  void rejoined(E& e) {
    if constexpr (ListsLostPeers<E>) {
      for (const std::size_t p : e.lost_peers())
        if (p < workers_) watched_[p] = 1;
    }
  }

  /// Takes the live set from a reduction's answer (server 0's word: the same on every worker).
  template <class E>
  void update(E& e, const std::vector<std::size_t>& contributors) {
    for (const std::size_t w : members_)
      if (std::find(contributors.begin(), contributors.end(), w) == contributors.end()) note(e, w);
    for (const std::size_t w : contributors) {
      if (w >= workers_ || !lost_[w]) continue;
      lost_[w] = 0;  // it restarted and rejoined (parameter_server.hpp)
      log_to(log_, LogLevel::info, "worker " + std::to_string(self_),
             "worker " + std::to_string(w) + " rejoined; training goes on with " + std::to_string(workers_ - lost()) +
                 " of " + std::to_string(workers_) + " workers");
    }
    members_ = contributors;
  }

 private:
  template <class E>
  void note(E& e, std::size_t w) {
    if (lost_[w]) return;
    lost_[w] = 1;
    std::string who = "worker " + std::to_string(w);
    if constexpr (NamesPeers<E>) who += " (rank " + std::to_string(w) + " at " + e.address(w) + ")";
    const std::size_t left = workers_ - lost();
    std::string line = "lost " + who + ", which died or stalled; training goes on without it, " + std::to_string(left) +
                       " of " + std::to_string(workers_) + " workers left";
    if (synchronous_)
      line += "; a synchronous step now averages " + std::to_string(left) + " x " + std::to_string(batch_) + " = " +
              std::to_string(left * batch_) + " samples instead of " + std::to_string(workers_ * batch_);
    log_to(log_, LogLevel::warning, "worker " + std::to_string(self_), line);
  }

  std::size_t workers_, self_, batch_;
  bool synchronous_;
  std::ostream* log_;  // a program's own stream takes the messages; else the log sink (log_to)
  std::vector<char> lost_;
  std::vector<char> watched_;  // peers whose loss the transport reported (watch)
  std::vector<std::size_t> members_;
};

/// The epoch's `sums` summed and `maxima` maximised over the workers still training, through
/// server 0 (`client`: the worker's ParameterServerClient).
template <class E, class Client>
void reduce_epoch_metrics(E& e, Client& client, LiveWorkers& live, std::span<double> sums, std::span<double> maxima) {
  std::vector<double> v(sums.begin(), sums.end());
  v.insert(v.end(), maxima.begin(), maxima.end());
  const auto answer = client.reduce(e, std::span<double>(v), sums.size());
  std::copy(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(sums.size()), sums.begin());
  std::copy(v.begin() + static_cast<std::ptrdiff_t>(sums.size()), v.end(), maxima.begin());
  live.update(e, answer.contributors);
}

/// Evaluation of `samples` samples shared by the workers still training: each evaluates its share
/// (`evaluate(first, count)`), and the parts are summed through server 0. When a worker was lost
/// in between, its share is missing from the sum: the survivors split the set again and repeat
/// (all of them, since all get the same answer). Ends: each repeat needs another worker lost.
template <class E, class Client, class Evaluate>
EvaluationPart reduce_evaluation(E& e, Client& client, LiveWorkers& live, std::size_t samples, Evaluate&& evaluate) {
  for (;;) {
    const std::vector<std::size_t> members = live.members();
    const auto [first, last] = split_range(samples, members.size(), live.index());
    EvaluationPart part = evaluate(first, last - first);
    std::vector<double> v(2 + part.confusion.size());
    v[0] = part.loss_sum;
    v[1] = static_cast<double>(part.samples);
    for (std::size_t i = 0; i < part.confusion.size(); ++i) v[2 + i] = static_cast<double>(part.confusion[i]);
    const auto answer = client.reduce(e, std::span<double>(v), v.size());
    live.update(e, answer.contributors);
    if (answer.contributors != members) continue;
    part.loss_sum = v[0];
    part.samples = static_cast<std::size_t>(v[1]);
    for (std::size_t i = 0; i < part.confusion.size(); ++i) part.confusion[i] = static_cast<std::uint64_t>(v[2 + i]);
    return part;
  }
}

/// Waits until every worker still training has arrived (a reduction of nothing).
template <class E, class Client>
void barrier_through_server(E& e, Client& client, LiveWorkers& live) {
  live.update(e, client.reduce(e, std::span<double>(), 0).contributors);
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_DETAIL_LIVEWORKERS_HPP_INCLUDED
