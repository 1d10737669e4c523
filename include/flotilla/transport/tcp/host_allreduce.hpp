// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_HOSTALLREDUCE_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_HOSTALLREDUCE_HPP_INCLUDED
// The TCP transport's sums through shared memory (TcpOptions::shared_memory), one segment per
// host: where every rank is on one host, the whole sum goes through that segment
// (shared_memory.hpp); where the job spans hosts, the segments serve the two steps of
// collective/hierarchical_allreduce.hpp that stay inside a host (the HostHierarchy ability):
//   reduce_to_leader:      the ranks of the host sum into its leader (its lowest rank);
//   broadcast_from_leader: the leader hands the total, which the leaders' ring formed between
//                          these two calls, to the ranks of its host.
// A host with one rank has no segment: both calls leave its values as they are.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/transport/tcp/shared_memory.hpp"

namespace flotilla::transport::tcp::detail {

class HostAllreduce {
 public:
  using Watch = SharedMemoryAllreduce::Watch;

  /// `members`: the job's ranks on this host, ascending, `rank` among them; `leaders`: the lowest
  /// rank of every host, ascending; `segment`: the host's (none when `rank` is alone on it);
  /// `piece_bytes`: the job's agreed piece.
  HostAllreduce(std::size_t rank, std::vector<std::size_t> members, std::vector<std::size_t> leaders,
                std::optional<SharedMemoryAllreduce> segment, std::size_t piece_bytes)
      : rank_(rank),
        members_(std::move(members)),
        leaders_(std::move(leaders)),
        segment_(std::move(segment)),
        piece_bytes_(piece_bytes) {}

  /// Whether the job spans hosts (the leaders' ring runs between the two halves).
  bool across_hosts() const noexcept { return leaders_.size() > 1; }
  /// Whether this rank is its host's leader (the lowest of its ranks).
  bool leader() const noexcept { return members_.front() == rank_; }
  /// The hosts' leaders, ascending: the ring between the two halves.
  const std::vector<std::size_t>& leaders() const noexcept { return leaders_; }
  /// This leader's place in the ring of leaders.
  std::size_t leader_index() const noexcept {
    return static_cast<std::size_t>(std::find(leaders_.begin(), leaders_.end(), rank_) - leaders_.begin());
  }

  /// Sums `values` over every rank of a job on one host (not across_hosts()), in pieces of the
  /// segment's capacity. Adds the bytes read through shared memory to `counted`.
  template <class T>
  void allreduce_sum(std::span<T> values, const Watch& w, TrafficCounters& counted) {
    segment_->allreduce_sum(values, local_watch(w), counted);
  }

  /// Across hosts, at most the agreed piece: the leader ends with the sum of its host's values.
  /// Each rank reads as much of the others' as they read of its (a leader its members' values, a
  /// member the total), so one count serves both directions.
  template <class T>
  void reduce_to_leader(std::span<T> values, const Watch& w, TrafficCounters& counted) {
    if (segment_) count(segment_->reduce_to_first(values, local_watch(w)) * sizeof(T), counted);
  }
  /// Across hosts, after reduce_to_leader and the leaders' ring: every rank ends with its leader's values.
  template <class T>
  void broadcast_from_leader(std::span<T> values, const Watch& w, TrafficCounters& counted) {
    if (segment_) count(segment_->broadcast_from_first(values, local_watch(w)) * sizeof(T), counted);
  }
  /// The agreed piece: the most either half takes at once.
  std::size_t piece_bytes() const noexcept { return piece_bytes_; }

 private:
  static void count(std::size_t bytes, TrafficCounters& counted) noexcept {
    counted.shared_memory_bytes_sent += bytes;
    counted.shared_memory_bytes_received += bytes;
  }
  /// The segment numbers its ranks 0..members-1; the endpoint's watch speaks of the job's ranks.
  Watch local_watch(const Watch& w) const {
    Watch local = w;
    local.peer_name = [&w, this](std::size_t r) { return w.peer_name(members_[r]); };
    if (w.check_alive)
      local.check_alive = [&w, this](std::size_t r, std::chrono::steady_clock::time_point since) {
        w.check_alive(members_[r], since);
      };
    return local;
  }

  std::size_t rank_;
  std::vector<std::size_t> members_, leaders_;
  std::optional<SharedMemoryAllreduce> segment_;
  std::size_t piece_bytes_;
};

}  // namespace flotilla::transport::tcp::detail
#endif  // FLOTILLA_TRANSPORT_TCP_HOSTALLREDUCE_HPP_INCLUDED
