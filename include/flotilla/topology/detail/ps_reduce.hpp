// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TOPOLOGY_DETAIL_PSREDUCE_HPP_INCLUDED
#define FLOTILLA_TOPOLOGY_DETAIL_PSREDUCE_HPP_INCLUDED
// Reductions among the workers of a parameter-server job (epoch metrics, evaluation, barriers)
// through server 0 instead of among the workers themselves.
//
// Why through a server: a worker may die mid-epoch while the others go on (asynchronous training,
// or synchronous training that continues with the survivors). A collective among the workers
// would then fail or hang on the dead one, and the survivors could disagree on who took part.
// Server 0 already sees every worker, and drops a dead one from its set: it answers a round once
// every worker it still counts has contributed, and tells each contributor who they were. Every
// worker of a round gets the same answer, so all agree on the live set without a consensus
// protocol of their own. A worker that dies after contributing is still counted in that round
// (its numbers are valid); the next round leaves it out.
//
// Messages (the header is ps_header.hpp's):
//   worker -> server 0, tag ps_push:  Header{reduce, version = round, steps_ahead = values,
//                                     staleness = values summed (the rest are maximised)}, padded
//                                     to the size of that tag's messages
//   worker -> server 0, tag ps_reduce: the values, as doubles (absent when there are none)
//   server 0 -> worker, tag ps_reduce_reply: Header{reply, version = round, steps_ahead = number
//                                     of contributors} + the reduced values + one byte per worker
//                                     (1: contributed)
// The count of values a peer announces is bounded (ps_reduce_max_values) and must be the same for
// every contributor of a round.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/topology/detail/ps_header.hpp"
#include "flotilla/topology/detail/ring.hpp"

namespace flotilla::detail {

/// The most values one reduction may carry: bounds what a peer's announcement can make server 0
/// allocate (an epoch's metrics and a confusion matrix of a few hundred classes fit).
inline constexpr std::size_t ps_reduce_max_values = std::size_t{1} << 20;

/// The reduction of one round, as a worker receives it.
struct PsReduceAnswer {
  std::uint64_t round = 0;
  /// The workers (job ranks) whose values are in the result, in rank order.
  std::vector<std::size_t> contributors;
};

/// Server 0's side: collects each round's contributions and answers them.
class PsReduceRounds {
 public:
  explicit PsReduceRounds(std::size_t workers) : values_(workers), contributed_(workers, 0) {}

  std::uint64_t round() const noexcept { return round_; }
  /// Whether some worker has contributed to the current round (it is waiting for the others).
  bool open() const noexcept { return any_; }

  /// Worker `w` announced a contribution (`h`, read from a ps_push message): receives its values.
  template <Transport E>
  void receive(E& e, std::size_t w, const PsHeader& h) {
    const std::string where = "parameter server " + std::to_string(e.rank()) + ": reduction from worker " + std::to_string(w);
    if (w >= contributed_.size()) throw TransportError(where + ", which is not a worker");
    if (h.version != round_)
      throw TransportError(where + " is for round " + std::to_string(h.version) + ", this server is at round " +
                           std::to_string(round_) + " (the workers disagree on how many reductions they ran)");
    if (contributed_[w]) throw TransportError(where + ": it contributed twice to round " + std::to_string(round_));
    if (h.steps_ahead > ps_reduce_max_values || h.staleness > h.steps_ahead)
      throw TransportError(where + " announces " + std::to_string(h.steps_ahead) + " values (" + std::to_string(h.staleness) +
                           " summed); at most " + std::to_string(ps_reduce_max_values) + " are allowed");
    const auto count = static_cast<std::size_t>(h.steps_ahead), summed = static_cast<std::size_t>(h.staleness);
    if (any_) {
      if (count != count_ || summed != summed_)
        throw TransportError(where + " has " + std::to_string(count) + " values (" + std::to_string(summed) +
                             " summed), the others of round " + std::to_string(round_) + " " + std::to_string(count_) +
                             " (" + std::to_string(summed_) + " summed)");
    } else {
      count_ = count;
      summed_ = summed;
    }
    values_[w].assign(count, 0.0);
    if (count) e.recv(w, protocol_tags::ps_reduce, std::as_writable_bytes(std::span<double>(values_[w])));
    contributed_[w] = 1;
    any_ = true;
  }

  /// Answers the round when every worker not yet `gone` (finished or dropped) has contributed:
  /// sums (in worker order, so the result does not depend on arrival order) and maxima go to every
  /// contributor. A contributor lost while being answered is passed to `drop` (PeerLostError).
  template <Transport E, class Drop>
  void answer_if_complete(E& e, const std::vector<char>& gone, Drop&& drop) {
    if (!any_) return;
    for (std::size_t w = 0; w < contributed_.size(); ++w)
      if (!contributed_[w] && !gone[w]) return;
    const std::size_t workers = contributed_.size();
    std::vector<double> result(count_, 0.0);
    bool first = true;
    std::size_t contributors = 0;
    for (std::size_t w = 0; w < workers; ++w) {
      if (!contributed_[w]) continue;
      ++contributors;
      for (std::size_t i = 0; i < count_; ++i) {
        if (i < summed_) {
          result[i] += values_[w][i];
        } else {
          result[i] = first ? values_[w][i] : std::max(result[i], values_[w][i]);
        }
      }
      first = false;
    }
    std::vector<std::byte> reply(PsHeader::size + count_ * sizeof(double) + workers);
    PsHeader{PsHeader::reply, 0, round_, contributors, 0}.write(reply.data());
    if (count_) std::memcpy(reply.data() + PsHeader::size, result.data(), count_ * sizeof(double));
    for (std::size_t w = 0; w < workers; ++w)
      reply[PsHeader::size + count_ * sizeof(double) + w] = std::byte{static_cast<unsigned char>(contributed_[w])};
    // The round is over before anyone is answered: a drop while answering must not find it open.
    const std::vector<char> to = contributed_;
    std::fill(contributed_.begin(), contributed_.end(), 0);
    any_ = false;
    ++round_;
    for (std::size_t w = 0; w < workers; ++w) {
      if (!to[w]) continue;
      try {
        e.send(w, protocol_tags::ps_reduce_reply, reply);
      } catch (const PeerLostError& err) {
        drop(err);
      }
    }
  }

 private:
  std::vector<std::vector<double>> values_;
  std::vector<char> contributed_;
  std::size_t count_ = 0, summed_ = 0;
  bool any_ = false;
  std::uint64_t round_ = 0;
};

/// A worker's side: contributes `values` (the first `summed` summed, the rest maximised) to round
/// `round` at server 0 (job rank `server0`, which also equals the number of workers), and replaces
/// them by the result. `announce` is scratch of the size of a ps_push message to server 0.
template <Transport E>
PsReduceAnswer ps_reduce(E& e, std::size_t server0, std::uint64_t round, std::span<double> values, std::size_t summed,
                         std::span<std::byte> announce) {
  const std::size_t workers = server0;
  if (values.size() > ps_reduce_max_values || summed > values.size())
    throw ConfigError("ps_reduce: " + std::to_string(values.size()) + " values (" + std::to_string(summed) +
                      " summed); at most " + std::to_string(ps_reduce_max_values));
  std::fill(announce.begin(), announce.end(), std::byte{0});
  PsHeader{PsHeader::reduce, 0, round, values.size(), summed}.write(announce.data());
  e.send(server0, protocol_tags::ps_push, announce);
  if (!values.empty()) e.send(server0, protocol_tags::ps_reduce, std::as_bytes(values));
  std::vector<std::byte> reply(PsHeader::size + values.size() * sizeof(double) + workers);
  e.recv(server0, protocol_tags::ps_reduce_reply, reply);
  const PsHeader h = PsHeader::read(reply.data());
  if (h.kind != PsHeader::reply || h.version != round)
    throw TransportError("worker " + std::to_string(e.rank()) + ": server " + std::to_string(server0) +
                         " answered reduction round " + std::to_string(round) + " with a message of kind " +
                         std::to_string(h.kind) + " for round " + std::to_string(h.version));
  if (!values.empty()) std::memcpy(values.data(), reply.data() + PsHeader::size, values.size() * sizeof(double));
  PsReduceAnswer a;
  a.round = round;
  for (std::size_t w = 0; w < workers; ++w)
    if (reply[PsHeader::size + values.size() * sizeof(double) + w] != std::byte{0}) a.contributors.push_back(w);
  if (a.contributors.size() != h.steps_ahead ||
      std::find(a.contributors.begin(), a.contributors.end(), e.rank()) == a.contributors.end())
    throw TransportError("worker " + std::to_string(e.rank()) + ": server " + std::to_string(server0) +
                         "'s answer to reduction round " + std::to_string(round) + " is inconsistent (" +
                         std::to_string(h.steps_ahead) + " contributors announced, " +
                         std::to_string(a.contributors.size()) + " listed, this worker " +
                         (std::find(a.contributors.begin(), a.contributors.end(), e.rank()) == a.contributors.end()
                              ? "not among them)"
                              : "among them)"));
  return a;
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TOPOLOGY_DETAIL_PSREDUCE_HPP_INCLUDED
