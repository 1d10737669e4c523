// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_TRANSPORT_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_TRANSPORT_HPP_INCLUDED
// The Transport extension point: how ranks of a job exchange bytes. See docs/concepts/transport.md.
//
// flotilla needs little from a transport: point-to-point messages matched by (peer, tag) in order,
// a simultaneous send-and-receive (the step of a ring, which must not deadlock when both
// neighbours send at once), a receive from any peer (a parameter server answering whichever worker
// pushed first), and a barrier. Collectives (ring allreduce) and topologies (parameter servers) are
// built on these, so a new transport gets all of them. A transport that has a faster collective of
// its own (MPI_Allreduce) offers it through NativeAllreduce and the ring topology uses it.
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/message_tags.hpp"

namespace flotilla {

/// Bytes and messages a rank has moved. Payload and framing are counted apart, so that bytes on
/// the wire can be compared with the theory (ring allreduce: 2(N-1)/N * P per worker).
struct TrafficCounters {
  std::uint64_t payload_bytes_sent = 0;
  std::uint64_t payload_bytes_received = 0;
  std::uint64_t header_bytes_sent = 0;
  std::uint64_t header_bytes_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  /// Bytes that went between the processes of one host through shared memory rather than the wire
  /// (the TCP transport's same-host allreduce, TcpOptions::shared_memory): sent, what the other
  /// ranks read of this rank's values and sums; received, what this rank read of theirs. A sum of
  /// P bytes counts 2(N-1)/N P each way on average over the ranks, as the ring would send.
  std::uint64_t shared_memory_bytes_sent = 0;
  std::uint64_t shared_memory_bytes_received = 0;

  friend bool operator==(const TrafficCounters&, const TrafficCounters&) = default;
};

/// A TrafficCounters field and its name (the name the metrics and step logs use).
struct TrafficCounterField {
  using member_pointer = std::uint64_t TrafficCounters::*;
  std::string_view name;
  member_pointer member;
};

/// Every TrafficCounters field, in declaration order: sums, differences, the epoch metrics and the
/// step log all go through this list, so a counter added to the struct cannot be left out of one.
inline constexpr std::array<TrafficCounterField, 8> traffic_counter_fields{{
    {"payload_bytes_sent", &TrafficCounters::payload_bytes_sent},
    {"payload_bytes_received", &TrafficCounters::payload_bytes_received},
    {"header_bytes_sent", &TrafficCounters::header_bytes_sent},
    {"header_bytes_received", &TrafficCounters::header_bytes_received},
    {"messages_sent", &TrafficCounters::messages_sent},
    {"messages_received", &TrafficCounters::messages_received},
    {"shared_memory_bytes_sent", &TrafficCounters::shared_memory_bytes_sent},
    {"shared_memory_bytes_received", &TrafficCounters::shared_memory_bytes_received},
}};
static_assert(sizeof(TrafficCounters) == traffic_counter_fields.size() * sizeof(std::uint64_t),
              "traffic_counter_fields must list every TrafficCounters field");

inline TrafficCounters& operator+=(TrafficCounters& a, const TrafficCounters& b) noexcept {
  for (const auto& f : traffic_counter_fields) a.*f.member += b.*f.member;
  return a;
}

inline TrafficCounters operator-(TrafficCounters a, const TrafficCounters& b) noexcept {
  for (const auto& f : traffic_counter_fields) a.*f.member -= b.*f.member;
  return a;
}

/// One rank's endpoint of a job. Requirements:
///  - `rank()` in [0, size()), `size()` the number of ranks;
///  - `send(peer, tag, bytes)` returns once `bytes` may be reused;
///  - `recv(peer, tag, buffer)` waits for the next message from `peer` with `tag` and copies it into
///    `buffer`, whose size must equal the message's (else TransportError naming both sizes);
///    messages between two ranks with the same tag arrive in the order sent;
///  - `sendrecv(to, tag, out, from, in)` sends `out` to `to` and receives `in` from `from` at once
///    (neither waits for the other to finish first);
///  - `recv_any(tag, buffer)` receives the next message with `tag` from any peer; returns the peer;
///  - `barrier()` returns once every rank has entered it;
///  - `counters()` the traffic so far.
/// Every wait ends with TransportError after the endpoint's timeout, naming the rank, the peer and
/// the operation. An endpoint is used by one thread at a time.
template <class E>
concept Transport = requires(E& e, const E& ce, std::size_t peer, Tag tag, std::span<const std::byte> out,
                             std::span<std::byte> in) {
  { ce.rank() } -> std::same_as<std::size_t>;
  { ce.size() } -> std::same_as<std::size_t>;
  e.send(peer, tag, out);
  e.recv(peer, tag, in);
  e.sendrecv(peer, tag, out, peer, in);
  { e.recv_any(tag, in) } -> std::same_as<std::size_t>;
  e.barrier();
  { ce.counters() } -> std::convertible_to<TrafficCounters>;
};

/// A transport with a sum-allreduce of its own, used instead of flotilla's ring when present.
template <class E>
concept NativeAllreduce = Transport<E> && requires(E& e, std::span<float> f) { e.allreduce_sum(f); };

/// A NativeAllreduce that is the faster path only up to a size: larger sums go by flotilla's ring
/// over its point-to-point messages (MPI's, above 16 MiB by default: docs/benchmarks.md,
/// "flotilla's MPI transport against bare MPI_Allreduce").
template <class E>
concept BoundedNativeAllreduce = NativeAllreduce<E> && requires(const E& ce) {
  { ce.native_allreduce_max_bytes() } -> std::convertible_to<std::size_t>;
};

/// A transport whose ranks on one host can sum through memory they share, so that a sum over
/// several hosts goes hierarchically (collective/hierarchical_allreduce.hpp): each host's ranks
/// sum into its leader (reduce_to_host_leader), the leaders run a ring among themselves over the
/// transport's messages, and each leader hands the total to its host (broadcast_from_host_leader).
/// host_leaders(): the lowest rank of every host, ascending, while the job spans hosts and sums
/// this way; empty otherwise. Both calls take at most host_piece_bytes() of values, and every
/// rank of the job makes them, in the same order as its other collective calls. A transport that
/// also has an allreduce of its own may say, by `hierarchical_min_bytes()`, below which size that
/// one is the faster (MPI's).
template <class E>
concept HostHierarchy = Transport<E> && requires(E& e, const E& ce, std::span<float> f) {
  { ce.host_leaders() } -> std::convertible_to<std::span<const std::size_t>>;
  { ce.host_piece_bytes() } -> std::convertible_to<std::size_t>;
  e.reduce_to_host_leader(f);
  e.broadcast_from_host_leader(f);
};

/// A transport that can tell how many of its job's ranks run on this rank's host (this one
/// included). The trainer's TrainerOptions::overlap uses it to judge whether a thread for the
/// communication would find a core free; a transport without it counts as one rank per host.
template <class E>
concept KnowsRanksOnHost = Transport<E> && requires(const E& ce) {
  { ce.ranks_on_this_host() } -> std::convertible_to<std::size_t>;
};

// ---- Optional abilities ---------------------------------------------------------------------
// A transport offers more than the Transport concept where it can. Code that can use an ability
// asks for it by name (`if constexpr (Ability<E>)`) and does without it otherwise; each is listed
// in docs/concepts/transport.md with what uses it.

namespace transport {
/// Which collective a message belongs to, for transports that check (OperationAware).
enum class OpKind : std::uint8_t {
  none = 0,  // not declared: not checked
  ring_allreduce = 1,
  broadcast = 2,
  allreduce_small = 3,
  barrier = 4,
  ps_push = 5,
  ps_reply = 6,
  recursive_doubling = 7,
  tree_allreduce = 8,
};

inline constexpr std::string_view op_kind_name(OpKind k) noexcept {
  switch (k) {
    case OpKind::none: return "an undeclared operation";
    case OpKind::ring_allreduce: return "ring_allreduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::allreduce_small: return "allreduce_small";
    case OpKind::barrier: return "barrier";
    case OpKind::ps_push: return "parameter-server push";
    case OpKind::ps_reply: return "parameter-server reply";
    case OpKind::recursive_doubling: return "allreduce (recursive doubling)";
    case OpKind::tree_allreduce: return "tree_allreduce";
  }
  return "an unknown operation";
}
}  // namespace transport

/// Its messages carry the operation in progress on a tag, so that ranks that disagree on which
/// collective they are in get an error naming both, instead of wrong numbers.
template <class E>
concept OperationAware = requires(E& e, Tag tag, transport::OpKind kind, std::uint64_t elements) {
  e.begin_operation(tag, kind, elements);
  e.end_operation(tag);
};

/// Can be told to go on when a peer is lost (then only operations with that peer fail), rather
/// than fail every later operation.
template <class E>
concept ContinuesWithoutLostPeers = requires(E& e, bool on) { e.continue_without_lost_peers(on); };

/// Says whether it has lost a peer (also one lost silently, while another's message was read).
template <class E>
concept ReportsLostPeers = requires(const E& ce, std::size_t peer) {
  { ce.peer_lost(peer) } -> std::convertible_to<bool>;
};

/// Lists the peers it has lost.
template <class E>
concept ListsLostPeers = requires(const E& ce) {
  { ce.lost_peers() } -> std::convertible_to<std::vector<std::size_t>>;
};

/// Names a peer's host, for messages about it.
template <class E>
concept NamesPeers = requires(const E& ce, std::size_t peer) {
  { ce.address(peer) } -> std::convertible_to<std::string>;
};

/// This process was lost and started again, and rejoins the running job (parameter-server jobs
/// over TCP: TcpOptions::rejoin).
template <class E>
concept Rejoinable = requires(const E& ce) {
  { ce.rejoined() } -> std::convertible_to<bool>;
};

/// Outlives lost peers, and can stop what it is doing when any is lost: what the survivors of a
/// ring need to agree on who is left and go on (TrainerOptions::on_worker_loss).
template <class E>
concept SurvivableEndpoint = ContinuesWithoutLostPeers<E> && ListsLostPeers<E> && NamesPeers<E> &&
                             requires(E& e, bool on) { e.stop_on_any_lost_peer(on); };

/// What goes in Trainer<Model, Policy, Backend>: a transport *backend* that starts the ranks of a
/// job and hands each its endpoint.
///  - `B::name`;
///  - `B::options`: its settings (addresses, timeouts; for in-process, how many ranks to start);
///  - `B::endpoint`: a Transport;
///  - `B::run(options, ranks, body)`: calls `body(endpoint&)` for the ranks this process hosts
///    (every rank on a thread of its own in-process; this process's one rank for TCP and MPI),
///    returns when they have returned, and rethrows the first failure after the others have been
///    stopped. `ranks` is the number of ranks the job needs: the in-process backend starts that
///    many; the others check that the job was launched with that many, or take the job as
///    launched when `ranks` is 0 (which the in-process backend refuses).
///  - `B::in_process`: whether all ranks share this process (and so the data set in memory).
template <class B>
concept TransportBackend =
    requires { { B::name } -> std::convertible_to<std::string_view>; typename B::options; typename B::endpoint; } &&
    Transport<typename B::endpoint> &&
    requires(const typename B::options& o, std::size_t ranks, const std::function<void(typename B::endpoint&)>& body) {
      B::run(o, ranks, body);
      { B::in_process } -> std::convertible_to<bool>;
    };

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_TRANSPORT_HPP_INCLUDED
