// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_LIVEGROUP_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_LIVEGROUP_HPP_INCLUDED
// A group of ranks that can re-form without some of its members: the workers of a synchronous ring
// that goes on after a worker was lost (TrainerOptions::on_worker_loss).
//
// Like transport::Group, group rank i is job rank members()[i] and every collective works on it.
// What it adds is reform(): the group continues with fewer members, as a new generation, and each
// generation's messages carry tags of their own (tag + generation * generation_stride). Messages of
// an operation that the loss interrupted may still arrive, or wait in a queue, with the old tags:
// nothing of a later generation ever receives them, and the transport's per-tag operation counts
// (transport/operation.hpp) start afresh on the new tags, the same on every survivor.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::transport {

template <Transport E>
class LiveGroup {
 public:
  /// Room for every tag flotilla's trainers use (bucket tags included) within one generation.
  static constexpr Tag generation_stride = Tag{1} << 20;
  /// Generations a job can go through; the tags of the last stay below 2^32.
  static constexpr std::uint32_t max_generations = 0x7FF;

  /// `members` are job ranks in group order; this endpoint's rank must be one of them.
  LiveGroup(E& endpoint, std::vector<std::size_t> members, Tag barrier_tag)
      : e_(&endpoint), barrier_tag_(barrier_tag) {
    set_members(std::move(members));
  }

  std::size_t rank() const noexcept { return rank_; }
  std::size_t size() const noexcept { return members_.size(); }
  TrafficCounters counters() const { return e_->counters(); }
  /// The job rank of group rank `r`.
  std::size_t job_rank(std::size_t r) const { return members_.at(r); }
  const std::vector<std::size_t>& members() const noexcept { return members_; }
  E& endpoint() noexcept { return *e_; }
  /// 0 for the group as first formed, one more after each reform().
  std::uint32_t generation() const noexcept { return generation_; }
  /// The tag that `tag` becomes on the wire in this generation.
  Tag wire_tag(Tag tag) const noexcept { return tag + generation_ * generation_stride; }

  /// Continues as the group of `members` (job ranks, this one among them), in the next generation.
  void reform(std::vector<std::size_t> members) {
    if (generation_ == max_generations)
      throw TransportError("transport::LiveGroup: the group has re-formed " + std::to_string(max_generations) +
                           " times, which uses up its tags");
    set_members(std::move(members));
    ++generation_;
  }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) { e_->send(job(peer), wire_tag(tag), bytes); }
  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) { e_->recv(job(peer), wire_tag(tag), buffer); }
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    e_->sendrecv(job(to), wire_tag(tag), out, job(from), in);
  }
  std::size_t recv_any(Tag tag, std::span<std::byte> buffer) {
    const std::size_t from = e_->recv_any(wire_tag(tag), buffer);
    const auto it = std::find(members_.begin(), members_.end(), from);
    if (it == members_.end())
      throw TransportError("rank " + std::to_string(e_->rank()) + ": message with tag " + std::to_string(tag) +
                           " from rank " + std::to_string(from) + ", which is not in this group");
    return static_cast<std::size_t>(it - members_.begin());
  }

  void begin_operation(Tag tag, OpKind kind, std::uint64_t elements)
    requires OperationAware<E>
  {
    e_->begin_operation(wire_tag(tag), kind, elements);
  }
  void end_operation(Tag tag) noexcept
    requires OperationAware<E>
  {
    e_->end_operation(wire_tag(tag));
  }

  /// The endpoint's own allreduce (NativeAllreduce), when this generation's members are the whole
  /// job in job order: collective::ring_allreduce then uses it up to native_allreduce_max_bytes().
  /// A group of part of the job cannot (the endpoint's collective would wait for every rank of the
  /// job), so its limit is 0 and flotilla's algorithms run over its messages.
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
  /// The endpoint's hierarchy of hosts (HostHierarchy), as transport::Group has it: only while
  /// the group is the whole job in job order.
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

  /// A dissemination barrier among the members: log2(size) rounds of one message each way.
  void barrier() { flotilla::detail::dissemination_barrier(*this, barrier_tag_); }

 private:
  void set_members(std::vector<std::size_t> members) {
    const auto it = std::find(members.begin(), members.end(), e_->rank());
    if (it == members.end())
      throw ConfigError("transport::LiveGroup: rank " + std::to_string(e_->rank()) + " is not a member of the group");
    rank_ = static_cast<std::size_t>(it - members.begin());
    members_ = std::move(members);
  }
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
  std::uint32_t generation_ = 0;
};

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_LIVEGROUP_HPP_INCLUDED
