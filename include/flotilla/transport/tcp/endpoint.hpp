// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_ENDPOINT_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_ENDPOINT_HPP_INCLUDED
// One rank's endpoint of a TCP job (Endpoint): its public operations, its state, and the
// bookkeeping of the operation in progress. The member functions that make up most of the
// transport live beside it, one concern each:
//   endpoint_frames.hpp      writing frames, and reading and dispatching the frames that arrive
//   endpoint_progress.hpp    the progress loop: waiting on the reactor, stalls, timeouts
//   endpoint_operations.hpp  send, recv, recv_any, sendrecv, barrier, close, abort
//   endpoint_connect.hpp     connect(), the shared-memory agreement and its allreduce, rejoins
// This header includes them at its end, and each of them includes this header first, so that
// whichever of them a translation unit includes, it gets the whole endpoint.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"
#include "flotilla/transport/tcp/launch_reports.hpp"
#include "flotilla/transport/tcp/link.hpp"
#include "flotilla/transport/tcp/options.hpp"
#include "flotilla/transport/tcp/host_allreduce.hpp"
#include "flotilla/transport/tcp/rendezvous.hpp"
#include "flotilla/transport/tcp/shared_memory.hpp"
#include "flotilla/transport/tcp/socket.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

/// One rank's endpoint of a TCP job. See the Transport concept for the semantics of each operation.
class Endpoint {
 public:
  /// Connects this process's rank to the others (the rendezvous: rendezvous.hpp). Throws
  /// ConfigError for unusable options, TransportError when the rendezvous fails or times out.
  /// Tcp::run() does this, then close() or abort(); use it directly to keep an endpoint across
  /// phases of a program.
  static Endpoint connect(const Options& options);

  Endpoint(Endpoint&&) noexcept = default;
  Endpoint& operator=(Endpoint&&) noexcept = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  /// Closes the connections without a goodbye: peers still waiting on this rank get an error
  /// naming it. Call close() for an orderly end.
  ~Endpoint() = default;

  std::size_t rank() const noexcept { return rank_; }
  std::size_t size() const noexcept { return size_; }
  /// Whether the connection to rank `peer` was lost (and not re-opened by a rejoin) and nothing it
  /// sent waits to be received any more: a receive from it could only fail. A loss that the
  /// operation in progress did not need is recorded without an error when lost peers are survived:
  /// a rank that serves many peers (a parameter server) looks here between receives.
  bool peer_lost(std::size_t peer) const noexcept {
    return peer < size_ && peer != rank_ && links_[peer].lost && links_[peer].queue.empty();
  }
  TrafficCounters counters() const noexcept { return counters_; }
  const Options& options() const noexcept { return options_; }
  /// The longest each later wait may last (TcpOptions::timeout): e.g. longer around a phase that
  /// keeps some ranks busy for a while, such as loading data or writing a checkpoint.
  void set_timeout(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) throw ConfigError("tcp: the timeout must be positive");
    options_.timeout = timeout;
  }
  /// host:port where `peer` listens (rank 0: the coordinator's address).
  const std::string& address(std::size_t peer) const { return addresses_.at(peer); }
  /// After an operation failed because another rank failed (it died, or sent why it failed):
  /// that rank, the first to fail as far as this one knows. Empty otherwise.
  std::optional<std::size_t> failed_peer() const noexcept {
    if (broken_.empty() || culprit_ == rank_ || culprit_ == detail::tcp_nobody) return std::nullopt;
    return culprit_;
  }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes);
  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer);
  std::size_t recv_any(Tag tag, std::span<std::byte> buffer);
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in);
  void barrier();

  /// Declares that messages on `tag` belong to one call of `kind` over `elements` elements, until
  /// end_operation(tag): they carry its fingerprint, and a message from a peer in another call on
  /// that tag fails the receive naming both (transport/operation.hpp; OperationScope calls these).
  void begin_operation(Tag tag, OpKind kind, std::uint64_t elements) {
    auto& t = ops_[tag];
    ++t.rounds;
    t.current = Operation{kind, t.rounds, elements}.fingerprint();
  }
  void end_operation(Tag tag) noexcept {
    if (const auto it = ops_.find(tag); it != ops_.end()) it->second.current = 0;
  }

  /// Whether the endpoint stays usable after a peer dies or stalls (default: no). Either way the
  /// operation waiting on the peer throws PeerLostError naming it; when continuing, later
  /// operations with the other peers go on, recv_any no longer waits for the lost one, and close()
  /// expects no goodbye from it. For topologies that can do without a peer (asynchronous
  /// parameter servers dropping a dead worker).
  void continue_without_lost_peers(bool on) noexcept { survive_lost_peers_ = on; }
  /// With continue_without_lost_peers: whether the loss of any peer fails the operation in
  /// progress (PeerLostError naming it), not only of a peer that operation waits on, and whether
  /// every peer's heartbeats are watched, not only the waited-for ones'. For topologies whose
  /// ranks must all stop what they are doing when one is lost, wherever they are: a synchronous
  /// ring re-forming over the survivors (a rank waiting on a live neighbour would otherwise wait
  /// for a message that neighbour, gone to re-form the ring, will never send).
  void stop_on_any_lost_peer(bool on) noexcept { stop_on_any_loss_ = on; }
  /// Whether this rank accepts, while its operations wait, a lost peer that restarted and
  /// rejoins (TcpOptions::rejoin) with the same handshake: its link is then open again, from a
  /// clean stream. A rank that is not lost is refused (told why). Ranks but 0 can (rank 0's
  /// listener was the coordinator's). The handshakes move on while operations wait, each as its
  /// bytes arrive, so a connection that is silent or slow holds up no operation; one not done
  /// within 5 s is dropped (and logged), as is the oldest beyond 64 at once.
  void accept_rejoins(bool on) noexcept { accept_rejoins_ = on && rejoin_listener_ != nullptr; }
  /// host:port where this rank accepts rejoining peers (empty for rank 0 and a rejoined rank).
  std::string rejoin_address() const { return rejoin_listener_ ? addresses_[rank_] : std::string(); }
  /// Whether this endpoint rejoined a running job (TcpOptions::rejoin) rather than starting with it.
  bool rejoined() const noexcept { return rejoined_; }
  /// The peers lost so far (empty unless continue_without_lost_peers(true)).
  std::vector<std::size_t> lost_peers() const {
    std::vector<std::size_t> out;
    for (const auto& l : links_)
      if (l.lost) out.push_back(l.peer);
    return out;
  }

  /// How many of the job's ranks run on this host, this one included (KnowsRanksOnHost): those
  /// whose connection to this rank came over loopback or from this rank's own address when the
  /// job started.
  std::size_t ranks_on_this_host() const noexcept { return ranks_on_host_; }

  /// The sum over every rank of `values`, through the shared-memory segment that
  /// TcpOptions::shared_memory sets up when every rank is on one host, in pieces of
  /// TcpOptions::shared_memory_bytes; ConfigError when it is not in use (shared_memory_active()
  /// false, or the job spans hosts: its sums are hierarchical, host_leaders()).
  /// Every rank calls it with the same count, in the same order as its other collective calls.
  void allreduce_sum(std::span<float> values);
  /// Whether the shared-memory path is in use: the job agreed on it in connect(), and no peer has
  /// been lost or has rejoined since (the ranks would no longer agree on it).
  bool shared_memory_active() const noexcept { return shared_memory_ != nullptr; }
  /// How large a sum allreduce_sum is the faster path for: any size while it is active on one
  /// host (it beats the sockets at every size measured, 4 KiB to 64 MiB: docs/benchmarks.md,
  /// "Shared-memory allreduce"), else 0: collective::ring_allreduce then uses the sockets.
  std::size_t native_allreduce_max_bytes() const noexcept {
    return shared_memory_ && !shared_memory_->across_hosts() ? std::numeric_limits<std::size_t>::max() : 0;
  }

  /// HostHierarchy, for a job over several hosts (collective/hierarchical_allreduce.hpp): the
  /// lowest rank of every host, ascending, while the shared-memory path is active across hosts;
  /// empty otherwise (one host, or the sockets alone).
  std::span<const std::size_t> host_leaders() const noexcept {
    if (shared_memory_ && shared_memory_->across_hosts()) return shared_memory_->leaders();
    return {};
  }
  /// The most values, in bytes, that the two calls below take at once: the agreed piece.
  std::size_t host_piece_bytes() const noexcept { return options_.shared_memory_bytes; }
  /// The ranks of this host sum `values` into its leader, through their segment.
  void reduce_to_host_leader(std::span<float> values);
  /// The leader's `values` go to every rank of its host, through their segment.
  void broadcast_from_host_leader(std::span<float> values);

  /// The orderly end: a goodbye to every peer, then waits (up to the timeout) for every peer's
  /// goodbye, then closes. Messages sent to this rank and never received are dropped.
  void close();
  /// The end after a failure: tells every peer `reason` (they fail with it), then closes at once.
  void abort(std::string_view reason) noexcept;

 private:
  using Link = detail::TcpLink;
  using Clock = detail::Clock;

  Endpoint(const Options& o, std::shared_ptr<detail::TcpReactor> reactor, std::vector<Link> links,
              std::vector<std::string> addresses, TrafficCounters handshake, std::optional<detail::Listener> listener,
              std::uint64_t job_id)
      : options_(o), rank_(o.rank), size_(o.world_size), reactor_(std::move(reactor)), links_(std::move(links)),
        addresses_(std::move(addresses)), counters_(handshake), job_id_(job_id) {
    if (listener)
      rejoin_listener_.reset(new detail::TcpRejoinListener{reactor_, std::move(*listener)});
    rejoined_ = !o.rejoin.empty();
    if (rejoined_) survive_lost_peers_ = true;  // the peers it did not reconnect to are gone for it
    std::vector<std::shared_ptr<detail::TcpSendGuard>> guards;
    const auto now = Clock::now();
    for (auto& l : links_) {
      l.heard = now;
      // Every peer's guard, also of a link not open: a peer that rejoins reuses it.
      if (l.peer != rank_ && l.peer != detail::tcp_nobody) guards.push_back(l.guard);
      if (!l.open()) {
        if (rejoined_ && l.peer != rank_) l.lost = true;
        continue;
      }
      std::lock_guard lock(l.guard->m);
      l.guard->fd = l.socket.native_handle();
      l.guard->beating = true;
    }
    if (!guards.empty()) heartbeat_ = std::make_unique<detail::TcpHeartbeat>(std::move(guards), options_.heartbeat_interval);
  }

  // ---- naming --------------------------------------------------------------------------------
  std::string who() const { return "tcp rank " + std::to_string(rank_) + " of " + std::to_string(size_); }
  std::string peer_name(std::size_t p) const {
    if (p == rank_) return "rank " + std::to_string(p) + " (itself)";
    return "rank " + std::to_string(p) + " at " + addresses_[p];
  }
  std::string describe_op() const {
    const auto& op = op_;
    std::string s = op.name;
    if (op.to != detail::tcp_nobody) s += " to " + peer_name(op.to);
    if (op.to != detail::tcp_nobody && op.from != detail::tcp_nobody) s += " and";
    if (op.from != detail::tcp_nobody) s += " from " + peer_name(op.from);
    if (std::string_view(op.name) == "recv_any") s += " from any rank";
    if (op.tagged) s += " (tag " + std::to_string(op.tag) + ")";
    return s;
  }
  std::string timeout_text() const { return "timed out after " + std::to_string(options_.timeout.count()) + " ms"; }

  /// Marks the endpoint failed (every later operation fails at once with the same cause) and
  /// throws. `why` names the peer; `culprit` is the rank whose failure this is (this rank's own:
  /// rank_). When it is a peer, abort() passes `why` and `culprit` on to the other ranks, so that
  /// every rank (and the launcher) names the rank that failed first.
  [[noreturn]] void fail(const std::string& why, std::size_t culprit) {
    broken_ = why;
    culprit_ = culprit;
    throw TransportError(who() + ": " + describe_op() + " failed: " + why);
  }
  [[noreturn]] void fail_link(Link& l, const std::string& why, std::size_t culprit) {
    l.close();
    fail(why, culprit);
  }
  /// The peer of `l` died or stalled: PeerLostError naming it. Unless the endpoint continues
  /// without lost peers, every later operation fails with the same cause, as after fail(). When it
  /// continues, and the operation in progress does not need the peer (`needed`), this returns: the
  /// loss shows in the operations that do need it.
  void lose_peer(Link& l, const std::string& why, bool needed) {
    const std::size_t p = l.peer;
    mark_lost(l);
    if (survive_lost_peers_ && !needed && !stop_on_any_loss_) return;
    if (!survive_lost_peers_) {
      broken_ = why;
      culprit_ = p;
    }
    throw PeerLostError(who() + ": " + describe_op() + " failed: " + why, p);
  }
  /// Closes `l` and records its peer as lost. The ranks' shared-memory calls would no longer
  /// match: from here on this rank sums through the sockets. A frame cut short by the loss is
  /// dropped with its bytes: a later receive must not take it for a message still arriving (it
  /// would wait on a closed link, or on a rejoined rank's new one). A receive reading it when
  /// the peer was lost needs the peer, and fails. Whole messages already queued stay: they were
  /// sent before the loss, and are intact.
  void mark_lost(Link& l) {
    if (!l.lost) detail::tcp_report_lost_peer(rank_, l.peer);  // a stalled rank never exits: the launcher ends it
    l.close();
    l.lost = true;
    l.in_frame = false;
    l.frame_done = 0;
    l.mac_done = 0;
    l.sink = Link::Sink::staging;
    l.user = nullptr;
    l.staging.reset();
    l.begin = l.end = 0;
    shared_memory_.reset();
  }
  /// Moves on the handshakes on the rejoin listener (accepting the connections waiting when
  /// `listener_ready`), without waiting, and admits each rank whose handshake is done.
  void serve_rejoins(bool listener_ready);
  /// A rank whose rejoin handshake is done: the lost peer's link anew, or a refusal.
  void admit_rejoiner(detail::TcpRendezvous& handshakes, detail::TcpRendezvous::Arrival a);

  [[noreturn]] void protocol_error(Link& l, const std::string& what) {
    fail_link(l, peer_name(l.peer) + " sent a bad frame: " + what + "; connection closed", rank_);
  }

  detail::TcpOp op_{};
  void begin(detail::TcpOp op) {
    op_ = op;
    if (closed_) throw TransportError(who() + ": " + describe_op() + ": the endpoint has been closed");
    if (!broken_.empty()) throw TransportError(who() + ": " + describe_op() + " abandoned: " + broken_);
    for (const std::size_t p : {op.to, op.from})
      if (p != detail::tcp_nobody && p >= size_)
        throw TransportError(who() + ": " + op.name + (p == op.to ? " to rank " : " from rank ") + std::to_string(p) +
                             ", but the job has " + std::to_string(size_) + " ranks");
  }
  Link& link(std::size_t peer) {
    Link& l = links_[peer];
    if (l.lost)
      throw PeerLostError(who() + ": " + describe_op() + ": " + peer_name(peer) + " was lost earlier (it died or stalled)",
                          peer);
    if (l.send_broken || !l.open())
      throw TransportError(who() + ": " + describe_op() + ": the connection to " + peer_name(peer) +
                           " is unusable after an earlier failure");
    return l;
  }
  Clock::time_point deadline() const { return Clock::now() + options_.timeout; }

  // ---- sending ---------------------------------------------------------------------------------
  detail::TcpOutgoing frame(Link& l, wire::FrameType type, Tag tag, std::uint32_t aux,
                            std::span<const std::byte> payload);
  std::uint64_t current_fingerprint(Tag tag) const;
  /// A message from `from` for receive `p`: both must be of one operation.
  void check_fingerprint(std::uint64_t theirs, const detail::TcpPosted& p, std::size_t from);
  /// Writes as much of `o` as the socket takes now, or `quantum` bytes; true when the socket took
  /// all that was offered (it may take more).
  bool push(detail::TcpOutgoing& o, std::size_t quantum = static_cast<std::size_t>(-1));

  // ---- receiving -------------------------------------------------------------------------------
  /// Whether the operation in progress waits for something from `l`.
  bool wanted(const Link& l) const;
  /// Whether a wait that only writes reads `l` too (see drive_loop): one frame at a time, and only
  /// while none of `l`'s is queued unreceived.
  bool absorbs(const Link& l) const;
  /// Whether the wait in progress reads `l` now: wanted() or absorbs().
  bool reads(const Link& l) const { return wanted(l) || absorbs(l); }
  /// Reads up to `most` bytes of `l` into its buffer; false when the socket has nothing now (or
  /// the peer closed after its goodbye).
  bool fill(Link& l, std::size_t most = detail::tcp_read_buffer);
  /// One read_some (recvmsg) into [p, p + n); adds what arrived to `count`.
  template <class Count>
  bool read_some(Link& l, std::byte* p, std::size_t n, Count& count);
  /// Reads and handles frames from `l` until its socket has nothing more, or, when `lazy`, until
  /// the operation in progress needs nothing more from it.
  void pump(Link& l, bool lazy);
  void start_frame(Link& l);
  void finish_frame(Link& l);
  /// Records that `p` got its message (of `size` bytes, from `from`).
  void received(detail::TcpPosted& p, std::uint64_t size, std::size_t from);
  /// Satisfies `p` from the messages that arrived before it, if one matches; else adopts a
  /// matching frame that is being read. Messages from one peer are matched in arrival order.
  void post(detail::TcpPosted& p);
  void check_size(const detail::TcpPosted& p) const;

  // ---- the progress loop -----------------------------------------------------------------------
  /// Writes `outs` and reads what the operation waits for until `done()` and every frame of
  /// `outs` is written; TransportError at `until`. `waiting` says what is missing, for the timeout.
  template <class Done, class Waiting>
  void drive(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until);
  /// After a lost peer failed an operation that the endpoint survives: writes the rest of every
  /// frame already partly written to a peer still there. Left half-written, it would make that
  /// connection unusable (its stream cannot carry another frame), and the peer still needed.
  /// The frames are written whole and never received (their operation has failed on both sides).
  void finish_frames(std::span<detail::TcpOutgoing> outs, Clock::time_point until) noexcept;
  template <class Done, class Waiting>
  void drive_loop(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until);
  /// Fails with PeerLostError when a peer this wait needs has sent nothing, not even a heartbeat,
  /// for the stall limit.
  void check_stalled(std::span<const detail::TcpOutgoing> outs);
  /// check_stalled() when half a heartbeat interval has passed since it last ran: a stalled
  /// peer is then noticed within the stall limit plus an interval of when it stopped.
  void check_stalled_if_due(std::span<const detail::TcpOutgoing> outs);
  /// A peer that has said goodbye sends nothing more: waiting for it would only end in a timeout.
  /// (An error of the program's, not of the connections: the endpoint stays usable.)
  void check_not_waiting_for_the_finished() const;
  std::string waiting_for_posted(const detail::TcpPosted& p) const;

  /// An operation in progress. It owns the operation's receive and frames, and is declared
  /// first, so that its end, also by an exception, comes after everything that uses them: a
  /// receive must not be left pointing at a buffer its caller is about to free, and a frame left
  /// half-written makes its link unusable.
  struct Scope {
    Endpoint& e;
    detail::TcpPosted recv{};
    bool posted = false;
    detail::TcpOutgoing one{};
    std::vector<detail::TcpOutgoing> many;
    std::span<detail::TcpOutgoing> outs;

    Scope(Endpoint& ep, detail::TcpOp op) : e(ep) { e.begin(op); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (posted && recv.adopted && !recv.done) {
        Link& l = *recv.adopted;
        if (l.in_frame && l.sink == Link::Sink::user) {
          // Read on into memory of the message's own; a later recv takes it from there.
          try {
            l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(l.frame.payload_length));
            if (l.frame_done > 0) std::memcpy(l.staging.get(), l.user, static_cast<std::size_t>(l.frame_done));
            l.sink = Link::Sink::staging;
          } catch (...) {  // no memory for it: the stream cannot be resumed
            l.close();
            if (e.broken_.empty()) e.broken_ = "no memory to keep a message from " + e.peer_name(l.peer);
          }
          l.user = nullptr;
        }
      }
      e.posted_ = nullptr;
      e.token_link_ = nullptr;
      e.awaiting_goodbye_ = false;
      for (auto& o : outs) {
        if (o.done()) continue;
        if (o.written == 0)
          --o.link->send_sequence;  // it never left: the stream is intact
        else
          o.link->send_broken = true;
      }
    }

    /// Posts the receive of (peer, tag) into `buffer` (peer tcp_nobody: any peer).
    detail::TcpPosted& post(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
      recv.peer = peer;
      recv.tag = tag;
      recv.buffer = buffer;
      recv.fingerprint = e.current_fingerprint(tag);
      posted = true;
      e.post(recv);
      return recv;
    }
    /// The one frame of this operation.
    std::span<detail::TcpOutgoing> out(detail::TcpOutgoing o) {
      one = o;
      outs = {&one, 1};
      return outs;
    }
  };

  Options options_;
  std::size_t rank_ = 0, size_ = 1;
  // The io_context of every link's socket. Each link holds it too, so that it outlives them. The
  // links' armed waits point at them: the vector is never resized, and moving it moves no link.
  std::shared_ptr<detail::TcpReactor> reactor_;
  std::vector<Link> links_;  // by peer rank; links_[rank_] is unused
  std::vector<std::string> addresses_;
  std::deque<detail::TcpMessage> self_queue_;  // messages this rank sent itself
  TrafficCounters counters_{};
  std::uint64_t bytes_moved_ = 0;  // read or written on any socket, frames and heartbeats alike
  std::uint64_t arrivals_ = 0;
  Clock::time_point next_stall_check_{};  // see check_stalled_if_due
  std::uint32_t barrier_epoch_ = 0;
  std::string broken_;  // why the endpoint cannot be used any more
  std::size_t culprit_ = detail::tcp_nobody;  // whose failure that is
  bool closed_ = false;
  bool absorbing_ = false;  // the wait in progress only writes: see drive_loop
  // The operation in progress.
  detail::TcpPosted* posted_ = nullptr;
  Link* token_link_ = nullptr;
  std::uint64_t token_key_ = 0;
  bool awaiting_goodbye_ = false;
  struct OpTrack {
    std::uint32_t rounds = 0;     // calls declared on the tag so far
    std::uint64_t current = 0;    // the fingerprint of the one in progress, 0 when none
  };
  std::unordered_map<Tag, OpTrack> ops_;
  bool survive_lost_peers_ = false;
  bool stop_on_any_loss_ = false;
  std::uint64_t job_id_ = 0;
  std::unique_ptr<detail::TcpRejoinListener> rejoin_listener_;
  std::unique_ptr<detail::TcpRendezvous> rejoin_handshakes_;  // made at the first connection to it
  bool accept_rejoins_ = false;
  bool rejoined_ = false;
  std::unique_ptr<detail::HostAllreduce> shared_memory_;
  std::size_t ranks_on_host_ = 1;
  // Last: stopped before anything it reads (the links' send guards, which it shares) goes.
  std::unique_ptr<detail::TcpHeartbeat> heartbeat_;

  void negotiate_shared_memory();
  /// Reads the plan's list of hosts ("0,1;2,3"): false unless every rank is on exactly one host,
  /// the hosts in order of their lowest ranks and each host's ranks ascending.
  bool parse_hosts(std::string_view text, std::vector<std::vector<std::size_t>>& hosts) const;
  /// Runs `step(segment, watch)` on the shared-memory path as operation `name` (`piece`: at most
  /// host_piece_bytes() of values); a lost peer or a failed step leaves the job on its sockets.
  template <class Step>
  void through_shared_memory(const char* name, std::size_t values, bool piece, Step&& step);
  /// Whether `l` is an open connection to another rank.
  bool open_peer_link(const detail::TcpLink& l) const noexcept {
    return l.peer != rank_ && l.peer != detail::tcp_nobody && l.open();
  }
  /// Whether an open peer link comes from this host (over loopback, or from this rank's own
  /// address); false when the addresses cannot be read.
  bool link_on_this_host(const detail::TcpLink& l) const;
  /// Whether data frames on `l` carry a payload CRC (Options::checksum_data).
  bool checksums_on(const detail::TcpLink& l) const;
  /// Sets `l`'s frame tags from its keys and Options::frame_mac.
  void set_frame_macs(detail::TcpLink& l) const;
  std::optional<std::size_t> hung_up_peer() noexcept;
  /// The shared-memory sum's watch on the peer it waits for: PeerLostError when it closed its
  /// connection or has been silent for the stall limit since `since` (its last frame, if later).
  void check_alive_during_shared_memory(std::size_t peer, Clock::time_point since);
  Clock::time_point next_heartbeat_read_{};
};

}  // namespace flotilla::transport::tcp

#include "flotilla/transport/tcp/endpoint_connect.hpp"
#include "flotilla/transport/tcp/endpoint_frames.hpp"
#include "flotilla/transport/tcp/endpoint_operations.hpp"
#include "flotilla/transport/tcp/endpoint_progress.hpp"
#endif  // FLOTILLA_TRANSPORT_TCP_ENDPOINT_HPP_INCLUDED
