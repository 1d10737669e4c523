// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_HIERARCHICALALLREDUCE_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_HIERARCHICALALLREDUCE_HPP_INCLUDED
// The sum of a job that spans hosts, as Horovod's hierarchical allreduce forms it, over a
// transport whose ranks on one host share memory (HostHierarchy: the TCP transport's segments,
// transport/tcp/host_allreduce.hpp). A piece at a time (the transport's host_piece_bytes()):
//   1. the ranks of each host sum into the host's leader, its lowest rank, through their memory;
//   2. the leaders, one a host, run the ring allreduce among themselves (collective::ring_allreduce
//      passes its ring, ring_allreduce.hpp);
//   3. each leader hands the total to the ranks of its host.
// With H hosts each leader sends 2(H-1)/H of the buffer and the others send nothing, so a host's
// link carries 2(H-1)/H of the buffer each way, where a flat ring of n ranks in host order carries
// 2(n-1)/n: 0.8 times as much for 3 hosts of 2 ranks (docs/collectives.md, "Across hosts").
// Every rank ends with the same bits: the leaders' ring gives each of them the same total, and
// the others copy their leader's.
#include <algorithm>
#include <cstddef>
#include <span>

#include "flotilla/concepts/transport.hpp"

namespace flotilla::detail {

/// Part of a job's ranks (`members`, ascending) as a transport of its own, numbered by their
/// place among them: what a ring over part of the job sends through.
template <class E>
struct Subgroup {
  E& e;
  std::span<const std::size_t> members;
  std::size_t index;
  std::size_t rank() const noexcept { return index; }
  std::size_t size() const noexcept { return members.size(); }
  void send(std::size_t to, Tag tag, std::span<const std::byte> bytes) { e.send(members[to], tag, bytes); }
  void recv(std::size_t from, Tag tag, std::span<std::byte> buffer) { e.recv(members[from], tag, buffer); }
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    e.sendrecv(members[to], tag, out, members[from], in);
  }
};

/// The sum of `data` over every rank of e (see above); `leaders_ring(group, part)` sums a piece
/// over the leaders, `group` being their Subgroup<E>. The caller divides for a mean.
template <HostHierarchy E, class LeadersRing>
void hierarchical_allreduce(E& e, std::span<float> data, LeadersRing&& leaders_ring) {
  const std::span<const std::size_t> leaders = e.host_leaders();
  const auto place = std::find(leaders.begin(), leaders.end(), e.rank());
  const bool leader = place != leaders.end();
  Subgroup<E> group{e, leaders, leader ? static_cast<std::size_t>(place - leaders.begin()) : 0};
  const std::size_t piece = std::max<std::size_t>(1, e.host_piece_bytes() / sizeof(float));
  for (std::size_t at = 0; at < data.size(); at += piece) {
    const std::span<float> part = data.subspan(at, std::min(piece, data.size() - at));
    e.reduce_to_host_leader(part);
    if (leader) leaders_ring(group, part);
    e.broadcast_from_host_leader(part);
  }
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_COLLECTIVE_HIERARCHICALALLREDUCE_HPP_INCLUDED
