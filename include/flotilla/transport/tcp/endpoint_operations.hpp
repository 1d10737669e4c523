// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_ENDPOINTOPERATIONS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_ENDPOINTOPERATIONS_HPP_INCLUDED
// The endpoint's operations (endpoint.hpp), in the Transport concept's terms: send, recv, recv_any,
// sendrecv and barrier, and the two ways to end: close() and abort().
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

// ---- operations ------------------------------------------------------------------------------

inline void Endpoint::send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) {
  Scope scope(*this, {"send", peer, detail::tcp_nobody, tag, true});
  if (peer == rank_) {
    detail::TcpMessage m{tag, std::make_unique_for_overwrite<std::byte[]>(bytes.size()), bytes.size(), arrivals_++};
    if (!bytes.empty()) std::memcpy(m.bytes.get(), bytes.data(), bytes.size());
    self_queue_.push_back(std::move(m));
  } else {
    drive(scope.out(frame(link(peer), wire::FrameType::data, tag, 0, bytes)), [] { return true; },
          [] { return std::string(); }, deadline());
    counters_.header_bytes_sent += wire::header_size;
  }
  counters_.payload_bytes_sent += bytes.size();
  ++counters_.messages_sent;
}

inline void Endpoint::recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
  Scope scope(*this, {"recv", detail::tcp_nobody, peer, tag, true});
  detail::TcpPosted& p = scope.post(peer, tag, buffer);
  if (!p.done) {
    if (peer == rank_)
      throw TransportError(who() + ": " + describe_op() + ": no such message was sent, and none can be while this rank waits");
    drive({}, [&] { return p.done; }, [&] { return waiting_for_posted(p); }, deadline());
  }
  check_size(p);
}

inline std::size_t Endpoint::recv_any(Tag tag, std::span<std::byte> buffer) {
  Scope scope(*this, {"recv_any", detail::tcp_nobody, detail::tcp_nobody, tag, true});
  detail::TcpPosted& p = scope.post(detail::tcp_nobody, tag, buffer);
  if (!p.done) {
    if (size_ == 1)
      throw TransportError(who() + ": " + describe_op() + ": no such message was sent, and none can be while this rank waits");
    drive({}, [&] { return p.done; }, [&] { return waiting_for_posted(p); }, deadline());
  }
  check_size(p);
  return p.from;
}

inline void Endpoint::sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from,
                                  std::span<std::byte> in) {
  if (to == rank_ || from == rank_) {
    // Sending to itself never waits, and a receive from itself can only take what is queued:
    // one after the other is all there is to it.
    send(to, tag, out);
    recv(from, tag, in);
    return;
  }
  Scope scope(*this, {"sendrecv", to, from, tag, true});
  // The receive first, so that the message can go straight into `in` while `out` is written.
  detail::TcpPosted& p = scope.post(from, tag, in);
  drive(scope.out(frame(link(to), wire::FrameType::data, tag, 0, out)), [&] { return p.done; },
        [&] { return waiting_for_posted(p); }, deadline());
  counters_.header_bytes_sent += wire::header_size;
  counters_.payload_bytes_sent += out.size();
  ++counters_.messages_sent;
  check_size(p);
}

inline void Endpoint::barrier() {
  // Dissemination barrier: in round k each rank signals rank + 2^k and waits for rank - 2^k; after
  // ceil(log2 n) rounds every rank has heard, indirectly, from every other. Tokens carry the
  // barrier's epoch, so that a fast rank's token for the next barrier is not taken for this one.
  Scope scope(*this, {"barrier", detail::tcp_nobody, detail::tcp_nobody, 0, false});
  if (size_ == 1) return;
  const std::uint32_t epoch = ++barrier_epoch_;
  const auto until = deadline();
  std::uint32_t round = 0;
  for (std::size_t dist = 1; dist < size_; dist *= 2, ++round) {
    const std::size_t to = (rank_ + dist) % size_, from = (rank_ + size_ - dist) % size_;
    Link& src = links_[from];
    token_link_ = &src;
    token_key_ = std::uint64_t{epoch} << 32 | round;
    drive(scope.out(frame(link(to), wire::FrameType::barrier, round, epoch, {})), [&] { return !wanted(src); },
          [&] { return "waiting for " + peer_name(from) + " (round " + std::to_string(round) + ")"; }, until);
    src.tokens.erase(std::find(src.tokens.begin(), src.tokens.end(), token_key_));
    token_link_ = nullptr;
    scope.outs = {};
    counters_.header_bytes_sent += wire::header_size;
  }
}

inline void Endpoint::close() {
  if (closed_) return;
  // A rank let in now would be waited on for a goodbye it does not know to send.
  accept_rejoins_ = false;
  Scope scope(*this, {"shutdown", detail::tcp_nobody, detail::tcp_nobody, 0, false});
  for (std::size_t p = 0; p < size_; ++p)
    if (p != rank_ && !links_[p].lost) scope.many.push_back(frame(link(p), wire::FrameType::goodbye, 0, 0, {}));
  scope.outs = scope.many;
  awaiting_goodbye_ = true;
  const auto until = deadline();
  for (;;) {
    try {
      drive(
          scope.outs, [&] { return std::none_of(links_.begin(), links_.end(), [&](const Link& l) { return wanted(l); }); },
          [&] {
            std::string missing;
            for (const auto& l : links_)
              if (l.peer != rank_ && !l.goodbye && !l.lost) missing += (missing.empty() ? "" : ", ") + peer_name(l.peer);
            return "no goodbye from " + missing + " (still busy, or stuck)";
          },
          until);
      break;
    } catch (const PeerLostError&) {
      if (!survive_lost_peers_) throw;  // else: the others' goodbyes are still due
    }
  }
  counters_.header_bytes_sent += wire::header_size * scope.many.size();
  scope.outs = {};
  // Every peer has sent its last frame, and this rank has read up to it: the sockets are drained,
  // so closing sends a clean FIN, never a reset that could destroy data a peer has yet to read.
  for (auto& l : links_) {
    l.queue.clear();
    l.close();
  }
  self_queue_.clear();
  closed_ = true;
  heartbeat_.reset();
}

inline void Endpoint::abort(std::string_view reason) noexcept {
  if (closed_) return;
  closed_ = true;
  try {
    // Pass on the first failure when this one came from a peer: every rank then names the rank
    // that failed first, not the one that happened to tell it.
    const bool passed_on = !broken_.empty() && culprit_ != rank_;
    const std::string why = passed_on ? broken_ : std::string(reason.substr(0, wire::max_control_payload));
    const auto culprit = static_cast<std::uint32_t>(passed_on ? culprit_ : rank_);
    const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(why.data()), why.size());
    std::vector<detail::TcpOutgoing> outs;
    for (auto& l : links_)
      if (l.open() && !l.send_broken) outs.push_back(frame(l, wire::FrameType::abort, 0, culprit, payload));
    // Best effort, briefly: a peer that does not read will learn from the closed connection.
    const auto until = Clock::now() + std::min<Clock::duration>(options_.timeout, std::chrono::milliseconds(500));
    detail::TcpReactor& r = *reactor_;
    for (;;) {
      bool waiting = false;
      for (auto& o : outs) {
        if (o.done() || !o.link->open()) continue;
        try {
          push(o);
        } catch (...) {
          o.link->close();
          continue;
        }
        if (!o.done()) {
          o.link->arm(detail::asio::socket_base::wait_write);
          waiting = true;
        }
      }
      if (!waiting || Clock::now() >= until) break;
      const std::uint64_t seen = r.events;
      detail::run_until(r.io, [&] { return r.events != seen; }, until);
    }
  } catch (...) {
  }
  for (auto& l : links_) {
    if (!l.open()) continue;
    // Read what is pending, so that closing sends a FIN rather than a reset (a reset can make the
    // peer lose the abort frame before it reads it).
    std::byte sink[4096];
    detail::ErrorCode ec;
    while (l.socket.read_some(detail::asio::buffer(sink), ec) > 0 && !ec) {
    }
    l.socket.shutdown(detail::asio::socket_base::shutdown_send, ec);
    l.close();
  }
  heartbeat_.reset();
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_ENDPOINTOPERATIONS_HPP_INCLUDED
