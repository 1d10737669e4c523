// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_ENDPOINTPROGRESS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_ENDPOINTPROGRESS_HPP_INCLUDED
// The endpoint's progress loop (endpoint.hpp): writes and reads until the operation in progress is
// done, and otherwise waits on the reactor up to its deadline, watching for stalled and finished
// peers (the design comment of transport/tcp.hpp has the reasons for its quanta and its spin).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/link.hpp"
#include "flotilla/transport/tcp/socket.hpp"

namespace flotilla::transport::tcp {

// ---- the progress loop -----------------------------------------------------------------------
template <class Done, class Waiting>
void Endpoint::drive(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until) {
  try {
    drive_loop(outs, done, waiting, until);
  } catch (const PeerLostError&) {
    if (survive_lost_peers_) finish_frames(outs, until);
    throw;
  }
}

inline void Endpoint::finish_frames(std::span<detail::TcpOutgoing> outs, Clock::time_point until) noexcept {
  std::vector<detail::TcpOutgoing> partial;
  for (const auto& o : outs)
    if (o.written > 0 && !o.done() && !o.link->lost && o.link->open()) partial.push_back(o);
  if (partial.empty()) return;
  // Nothing is received for the failed operation now: only written.
  detail::TcpPosted* const posted = std::exchange(posted_, nullptr);
  Link* const token = std::exchange(token_link_, nullptr);
  const bool goodbye = std::exchange(awaiting_goodbye_, false);
  for (std::size_t tries = 0; tries <= size_; ++tries) {  // each retry follows one more lost peer
    try {
      drive_loop(std::span<detail::TcpOutgoing>(partial), [] { return true; }, [] { return std::string(); }, until);
      break;
    } catch (const PeerLostError&) {
      continue;
    } catch (...) {  // timed out, or the endpoint failed: the frames stay half-written
      break;
    }
  }
  for (auto& o : outs)
    for (const auto& p : partial)
      if (p.link == o.link && p.header == o.header) o.written = p.written;
  posted_ = posted;
  token_link_ = token;
  awaiting_goodbye_ = goodbye;
}

template <class Done, class Waiting>
void Endpoint::drive_loop(std::span<detail::TcpOutgoing> outs, Done&& done, Waiting&& waiting, Clock::time_point until) {
  bool eager = false;
  // A wait that only writes (a send) reads what arrives meanwhile, a frame a link: the peers' next
  // messages then flow in while this rank's go out, instead of stopping at this rank's receive
  // window. (A server answering its workers one after the other takes the early ones' next pushes
  // while it answers the rest.) One frame a link keeps the memory this takes to what the kernel's
  // buffers would have held.
  struct Absorbing {
    bool& flag;
    bool saved;
    ~Absorbing() { flag = saved; }
  } absorbing{absorbing_, absorbing_};
  const bool may_absorb = !outs.empty() && !(posted_ && !posted_->done) && options_.read_while_sending;
  auto all_written = [&] { return std::all_of(outs.begin(), outs.end(), [](const auto& o) { return o.done() || o.link->lost; }); };
  // Before anything of this operation is read: a busy rank whose every wait ends at once (a server
  // that always finds a push waiting) would otherwise never look at a peer that went silent.
  check_stalled_if_due(outs);
  // Retry without sleeping until then (TcpOptions::spin): the spin restarts whenever bytes move
  // either way, and after each wake-up, so a rank sleeps only once the sockets have been idle for
  // `spin`. (Sleeping in the middle of a transfer costs a wake-up per socket buffer, tens of
  // microseconds each on a virtual machine, where Open MPI never sleeps at all.)
  auto spin_until = Clock::now() + options_.spin;
  std::uint64_t moved = bytes_moved_;
  // While a receive is pending too, writes go in quanta between reads rather than all the socket
  // takes: both directions then flow at once, and what arrives is read while it is still in
  // cache. (A whole send buffer at a time, several MiB, leaves the received data waiting.)
  for (;;) {
    const bool reading = posted_ && !posted_->done;
    bool more = false;  // a socket took a whole quantum, and may take more at once
    for (auto& o : outs)
      if (!o.done() && !o.link->lost)
        more |= push(o, reading ? detail::tcp_send_quantum : static_cast<std::size_t>(-1)) && !o.done();
    absorbing_ = may_absorb && !all_written();  // (a send the sockets took at once reads nothing)
    for (auto& l : links_)
      if (l.open() && !l.eof && reads(l)) pump(l, true);
    const bool written = all_written();
    if (written && done()) return;
    check_stalled_if_due(outs);  // also while bytes keep moving, which keeps the loop from idling
    if (more) continue;
    const auto tried = Clock::now();
    if (bytes_moved_ != moved) {
      moved = bytes_moved_;
      spin_until = tried + options_.spin;
    }
    // (A wait whose bytes keep moving still ends at its deadline.)
    if (!eager && tried < spin_until && tried < until) {
      std::this_thread::yield();
      continue;
    }
    check_not_waiting_for_the_finished();
    check_stalled(outs);
    const auto now = Clock::now();
    if (now >= until) {
      std::string what = waiting();
      for (const auto& o : outs)
        if (!o.done())
          what += (what.empty() ? "" : "; ") + std::to_string(o.written) + " of " + std::to_string(o.total()) +
                  " bytes written to " + peer_name(o.link->peer);
      throw TransportError(who() + ": " + describe_op() + " " + timeout_text() + (what.empty() ? "" : ": " + what));
    }
    // Wait: a write wait on each link with a frame to finish, a read wait on every open link
    // (they stay armed until they complete, across iterations and operations). Links this
    // operation does not need complete theirs on data too; only their hang-up or failure is
    // acted on at once (below), or everything once the loop has stalled.
    for (auto& l : links_) {
      if (!l.open() || l.eof) continue;
      for (const auto& o : outs)
        if (o.link == &l && !o.done() && !l.lost) l.arm(detail::asio::socket_base::wait_write);
      if (!l.parked || eager || reads(l)) l.arm(detail::asio::socket_base::wait_read);
    }
    if (accept_rejoins_) rejoin_listener_->arm();
    detail::TcpReactor& r = *reactor_;
    const std::uint64_t seen = r.events;
    // Wake up at least twice a heartbeat interval, to see whether a peer has gone silent (as
    // check_stalled_if_due does while traffic keeps the loop from sleeping).
    const auto stall =
        std::min({until, Clock::now() + (eager ? options_.heartbeat_interval / 2 : detail::tcp_stall)});
    detail::run_until(r.io, [&] { return r.events != seen; }, stall);
    if (rejoin_listener_ && accept_rejoins_) {
      // Also when nothing fired: a handshake's deadline may have passed.
      const bool arrived = std::exchange(rejoin_listener_->fired, false);
      if (arrived || (rejoin_handshakes_ && !rejoin_handshakes_->pending_.empty()))
        serve_rejoins(arrived);
    }
    if (r.events == seen) {
      // Nothing armed (every link closed or ended): nothing can happen before `stall`.
      if (Clock::now() < stall) std::this_thread::sleep_until(stall);
      // No progress for a while: read everything, whoever it is for.
      if (!eager)
        for (auto& l : links_)
          if (l.open() && !l.eof && l.parked && !wanted(l)) pump(l, false);
      eager = true;
      continue;
    }
    spin_until = Clock::now() + options_.spin;
    for (auto& l : links_) {
      if (!std::exchange(l.read_fired, false) || !l.open() || l.eof) continue;
      if (l.wait_error == detail::asio::error::bad_descriptor)
        fail_link(l, "the socket to " + peer_name(l.peer) + " was closed underneath the transport", rank_);
      // Wanted links are read at the top of the loop; the others only when they hang up or
      // fail (readable with nothing to read: to report it at once), or when the loop has
      // stalled. Data that merely arrived waits in the kernel, the link parked until then.
      if (reads(l)) continue;
      detail::ErrorCode ec;
      if (eager || l.socket.available(ec) == 0 || ec)
        pump(l, false);
      else
        l.parked = true;
    }
  }
}

inline void Endpoint::check_stalled_if_due(std::span<const detail::TcpOutgoing> outs) {
  if (Clock::now() < next_stall_check_) return;
  check_stalled(outs);
}

inline void Endpoint::check_stalled(std::span<const detail::TcpOutgoing> outs) {
  // Twice per interval: a stalled peer's last frame is then read at most half an interval after
  // it came, and its silence is seen at most half an interval after it passed the limit, so the
  // peer is reported within the stall limit plus one interval of when it stopped.
  next_stall_check_ = Clock::now() + options_.heartbeat_interval / 2;
  const auto limit = options_.stall_limit();
  // Silence counts from when the peer's last frame was read, also across the time this rank
  // spent outside a wait: what a live peer sent meanwhile waits in the kernel, and is read below
  // before the peer is declared stalled. (Counted from the start of each wait instead, a rank
  // whose waits follow each other, a server taking push after push from the others, would never
  // see the silence grow.)
  auto silent = [&](const Link& l, Clock::duration longer_than) { return Clock::now() - l.heard > longer_than; };
  std::vector<Link*> watched;
  for (auto& l : links_) {
    if (!l.open() || l.eof || l.goodbye || l.peer == rank_) continue;
    bool waits = wanted(l) || (survive_lost_peers_ && stop_on_any_loss_);
    for (const auto& o : outs) waits = waits || (o.link == &l && !o.done());
    if (waits) watched.push_back(&l);
  }
  auto received = [&] { return posted_ != nullptr && posted_->done; };
  for (Link* l : watched) {
    if (!l->open() || !silent(*l, limit)) continue;
    const bool had_received = received();
    pump(*l, false);  // a heartbeat may be waiting in the kernel, read or not
    // Data from it completed the receive: a loss reported now would lose that message.
    if (!had_received && received()) return;
    if (!l->open() || !silent(*l, limit)) continue;
    lose_peer(*l, peer_name(l->peer) + " has sent nothing, not even a heartbeat, for " +
                      std::to_string(limit.count()) + " ms (heartbeats every " +
                      std::to_string(options_.heartbeat_interval.count()) +
                      " ms): it is stalled (stopped, hung, or its machine unreachable)",
              true);
  }
  // Reads the heartbeats of a watched link that the wait has not read for half an interval (a
  // busy wait reads only until its message is complete, often from the same few links): its
  // last frame counts from when it is read, so it must not lie unread for long.
  for (Link* l : watched)
    if (l->open() && !l->eof && silent(*l, options_.heartbeat_interval / 2)) pump(*l, false);
}

inline void Endpoint::check_not_waiting_for_the_finished() const {
  auto finished = [](const Link& l) { return (l.goodbye && !l.in_frame) || l.lost; };
  std::string why;
  if (posted_ && !posted_->done && !posted_->adopted && posted_->peer != detail::tcp_nobody &&
      links_[posted_->peer].lost)
    throw PeerLostError(who() + ": " + describe_op() + " failed: " + peer_name(posted_->peer) +
                            " was lost earlier (it died or stalled)",
                        posted_->peer);
  if (posted_ && !posted_->done && !posted_->adopted) {
    if (posted_->peer != detail::tcp_nobody && finished(links_[posted_->peer]))
      why = peer_name(posted_->peer) + " has finished (it said goodbye) and will send nothing more";
    if (posted_->peer == detail::tcp_nobody &&
        std::all_of(links_.begin(), links_.end(), [&](const Link& l) { return l.peer == rank_ || finished(l); }))
      why = "every other rank has finished (said goodbye) or was lost, and will send nothing more";
  }
  if (token_link_ && wanted(*token_link_) && finished(*token_link_))
    why = peer_name(token_link_->peer) + " has finished (it said goodbye) and will not enter the barrier";
  if (!why.empty()) throw TransportError(who() + ": " + describe_op() + " failed: " + why);
}

inline std::string Endpoint::waiting_for_posted(const detail::TcpPosted& p) const {
  if (p.done) return {};
  if (p.adopted) {
    const Link& l = *p.adopted;
    return std::to_string(l.frame_done) + " of " + std::to_string(l.frame.payload_length) +
           " bytes of the message received from " + peer_name(l.peer);
  }
  return p.peer == detail::tcp_nobody ? "no message with this tag arrived" : "nothing arrived from " + peer_name(p.peer);
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_ENDPOINTPROGRESS_HPP_INCLUDED
