// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_GROUP_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_GROUP_HPP_INCLUDED
// A subset of a job's ranks seen as a job of its own: the workers of a parameter-server job run
// their collectives (metrics, evaluation) among themselves through it, without the servers.
//
// Group rank i is job rank members[i]. It satisfies Transport, so every collective works on it.
// Its messages use the tags of the endpoint beneath, so groups that overlap must use different
// tags; recv_any only ever returns a member (a non-member that sends with a group's tag breaks
// that group's protocol, and is reported as such).
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::detail {

/// Whether a group's `members` (job ranks in group order) are all of e's job, in job order: only
/// then can the endpoint's own collectives serve the group.
template <class E>
bool is_whole_job(const E& e, const std::vector<std::size_t>& members) noexcept {
  if (members.size() != e.size()) return false;
  for (std::size_t r = 0; r < members.size(); ++r)
    if (members[r] != r) return false;
  return true;
}

template <class E>
void group_native_allreduce(E& e, const std::vector<std::size_t>& members, std::span<float> values) {
  if (!is_whole_job(e, members))
    throw TransportError("rank " + std::to_string(e.rank()) +
                         ": the endpoint's own allreduce over a group of part of the job would wait for the others");
  e.allreduce_sum(values);
}

template <class E>
std::size_t group_native_max_bytes(const E& e, const std::vector<std::size_t>& members) {
  if (!is_whole_job(e, members)) return 0;
  if constexpr (BoundedNativeAllreduce<E>) {
    return e.native_allreduce_max_bytes();
  } else {
    return static_cast<std::size_t>(-1);
  }
}

/// The endpoint's hosts' leaders (HostHierarchy) for a group: its own when the group is the whole
/// job in job order (group ranks are then job ranks), none otherwise: a group of part of the job
/// sums over its messages.
template <class E>
std::span<const std::size_t> group_host_leaders(const E& e, const std::vector<std::size_t>& members) {
  if (!is_whole_job(e, members)) return {};
  return e.host_leaders();
}

/// One of HostHierarchy's steps inside a host, which every rank of the job must take.
template <class E>
void group_host_step(E& e, const std::vector<std::size_t>& members, std::span<float> values, bool reduce) {
  if (!is_whole_job(e, members))
    throw TransportError("rank " + std::to_string(e.rank()) +
                         ": a step of the hierarchical sum over a group of part of the job would wait for the others");
  reduce ? e.reduce_to_host_leader(values) : e.broadcast_from_host_leader(values);
}

/// A dissemination barrier among the ranks of g: in round k each rank signals rank + 2^k and waits
/// for rank - 2^k; after ceil(log2 N) rounds every rank has heard, indirectly, from every other.
template <class G>
void dissemination_barrier(G& g, Tag tag) {
  const std::size_t n = g.size(), rank = g.rank();
  std::byte token{};
  for (std::size_t d = 1; d < n; d *= 2)
    g.sendrecv((rank + d) % n, tag, std::span<const std::byte>(&token, 1), (rank + n - d) % n,
               std::span<std::byte>(&token, 1));
}

}  // namespace flotilla::detail

namespace flotilla::transport {

template <Transport E>
class Group {
 public:
  /// `members` are job ranks in group order; this endpoint's rank must be one of them.
  Group(E& endpoint, std::vector<std::size_t> members, Tag barrier_tag)
      : e_(&endpoint), members_(std::move(members)), barrier_tag_(barrier_tag) {
    const auto it = std::find(members_.begin(), members_.end(), endpoint.rank());
    if (it == members_.end())
      throw ConfigError("transport::Group: rank " + std::to_string(endpoint.rank()) + " is not a member of the group");
    rank_ = static_cast<std::size_t>(it - members_.begin());
  }

  std::size_t rank() const noexcept { return rank_; }
  std::size_t size() const noexcept { return members_.size(); }
  TrafficCounters counters() const { return e_->counters(); }
  /// The job rank of group rank `r`.
  std::size_t job_rank(std::size_t r) const { return members_.at(r); }
  E& endpoint() noexcept { return *e_; }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) { e_->send(job(peer), tag, bytes); }
  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) { e_->recv(job(peer), tag, buffer); }
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    e_->sendrecv(job(to), tag, out, job(from), in);
  }
  std::size_t recv_any(Tag tag, std::span<std::byte> buffer) {
    const std::size_t from = e_->recv_any(tag, buffer);
    const auto it = std::find(members_.begin(), members_.end(), from);
    if (it == members_.end())
      throw TransportError("rank " + std::to_string(e_->rank()) + ": message with tag " + std::to_string(tag) +
                           " from rank " + std::to_string(from) + ", which is not in this group");
    return static_cast<std::size_t>(it - members_.begin());
  }

  /// Operations declared on the group are declared on its endpoint (transport/operation.hpp).
  void begin_operation(Tag tag, OpKind kind, std::uint64_t elements)
    requires OperationAware<E>
  {
    e_->begin_operation(tag, kind, elements);
  }
  void end_operation(Tag tag) noexcept
    requires OperationAware<E>
  {
    e_->end_operation(tag);
  }

  /// The endpoint's own allreduce (NativeAllreduce), when the group is the whole job in job order:
  /// collective::ring_allreduce then uses it up to native_allreduce_max_bytes(). A group of part of
  /// the job cannot (the endpoint's collective would wait for every rank of the job), so its limit
  /// is 0 and flotilla's algorithms run over its messages.
  void allreduce_sum(std::span<float> values)
    requires NativeAllreduce<E>
  {
    flotilla::detail::group_native_allreduce(*e_, members_, values);
  }
  std::size_t native_allreduce_max_bytes() const
    requires NativeAllreduce<E>
  {
    return flotilla::detail::group_native_max_bytes(*e_, members_);
  }

  /// The endpoint's hierarchy of hosts (HostHierarchy), when the group is the whole job in job
  /// order: collective::ring_allreduce then sums hierarchically across hosts. A group of part of
  /// the job has no hosts' leaders, and sums over its messages.
  std::span<const std::size_t> host_leaders() const
    requires HostHierarchy<E>
  {
    return flotilla::detail::group_host_leaders(*e_, members_);
  }
  std::size_t host_piece_bytes() const
    requires HostHierarchy<E>
  {
    return e_->host_piece_bytes();
  }
  std::size_t hierarchical_min_bytes() const
    requires HostHierarchy<E> && requires(const E& ce) { ce.hierarchical_min_bytes(); }
  {
    return e_->hierarchical_min_bytes();
  }
  void reduce_to_host_leader(std::span<float> values)
    requires HostHierarchy<E>
  {
    flotilla::detail::group_host_step(*e_, members_, values, true);
  }
  void broadcast_from_host_leader(std::span<float> values)
    requires HostHierarchy<E>
  {
    flotilla::detail::group_host_step(*e_, members_, values, false);
  }

  /// A dissemination barrier: log2(size) rounds of one message each way.
  void barrier() { flotilla::detail::dissemination_barrier(*this, barrier_tag_); }

 private:
  std::size_t job(std::size_t peer) const {
    if (peer >= members_.size())
      throw TransportError("rank " + std::to_string(e_->rank()) + ": group rank " + std::to_string(peer) +
                           " is outside a group of " + std::to_string(members_.size()));
    return members_[peer];
  }

  E* e_;
  std::vector<std::size_t> members_;
  Tag barrier_tag_;
  std::size_t rank_ = 0;
};

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_GROUP_HPP_INCLUDED
