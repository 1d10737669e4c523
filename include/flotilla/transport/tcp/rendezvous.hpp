// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_RENDEZVOUS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_RENDEZVOUS_HPP_INCLUDED
// The rendezvous: how the ranks of a job find each other and open their connections, the
// handshake on each (hello, and the challenge-response when the job has a secret: wire.hpp), and
// the same handshake for a lost rank that rejoins a running job. It hands the endpoint its links.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/transport/tcp/link.hpp"
#include "flotilla/transport/tcp/options.hpp"
#include "flotilla/transport/tcp/socket.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

class Endpoint;  // a friend of the rendezvous: accepting a rejoining rank runs its steps

// ---- rendezvous ------------------------------------------------------------------------------

namespace detail {

struct TcpControlFrame {
  wire::Decoded decoded;
  std::vector<std::byte> payload;
  const wire::Header& header() const noexcept { return decoded.header; }
};

/// One line to TcpOptions::log, as it always was; when that is not set, a record of `component`
/// (the rank speaking, "tcp rank 0 of 4") to the log sink (core/log.hpp), its message the line
/// without the component it starts with.
inline void tcp_log(const Options& o, LogLevel level, const std::string& component, const std::string& line) {
  if (o.log) {
    o.log(line);
    return;
  }
  std::string_view message(line);
  if (message.starts_with(component) && message.substr(component.size()).starts_with(": "))
    message.remove_prefix(component.size() + 2);
  log_message(level, component, message);
}

/// A readiness wait of a connection whose handshake is under way. Shared with the wait's handler,
/// which may run after the connection is gone (cancelled), so that it never touches the connection.
struct TcpHandshakeWait {
  bool armed = false;
  bool fired = false;  // completed since the connection was last served
};

/// Arms `wait` on `object` (of `reactor`'s io_context) for `type`, unless it is armed already. Its
/// completion counts an event, which ends the reactor's run of whoever waits.
template <class Waitable>
void arm_handshake_wait(TcpReactor& reactor, Waitable& object, asio::socket_base::wait_type type,
                        const std::shared_ptr<TcpHandshakeWait>& wait) {
  if (wait->armed) return;
  wait->armed = true;
  object.async_wait(type, [wait, r = &reactor](const ErrorCode& ec) {
    wait->armed = false;
    if (ec == asio::error::operation_aborted) return;
    wait->fired = true;
    ++r->events;
  });
}

/// An accepted connection whose server side of the handshake is under way, served a step at a time
/// as its bytes arrive (TcpRendezvous::serve_handshakes), so that one that is silent or slow holds
/// up no other. It reads only the frames the handshake has, exactly, and each of them bounded.
struct TcpPendingHandshake {
  explicit TcpPendingHandshake(TcpSocket s) : socket(std::move(s)) {}
  TcpSocket socket;
  std::string peer;  ///< "a connection from host:port"
  Clock::time_point deadline;
  std::uint64_t send_sequence = 0, recv_sequence = 0;
  // The frame being read: its header, then its payload.
  wire::HeaderBytes header_bytes{};
  std::size_t header_done = 0;
  TcpControlFrame frame;
  std::size_t payload_done = 0;
  // Once the hello is answered: the two hellos (the proofs cover both), and what the hello said.
  std::optional<wire::Hello> hello;
  std::vector<std::byte> their_hello, our_hello;
  bool authenticated = false;
  std::vector<std::byte> out;  // frames to write
  std::size_t out_done = 0;
  std::shared_ptr<TcpHandshakeWait> read_wait = std::make_shared<TcpHandshakeWait>();
  std::shared_ptr<TcpHandshakeWait> write_wait = std::make_shared<TcpHandshakeWait>();
  bool fresh = true;  // accepted, not served yet
};

/// The rendezvous: the client side of each connection runs with blocking-style helpers over the
/// non-blocking sockets (each a wait_ready() on the io_context that the endpoint then takes over,
/// bounded by the rendezvous deadline); the server side serves every accepted connection at once
/// (serve_handshakes), each with a deadline of its own, so that connections that say nothing or
/// trickle cannot hold up the ranks.
class TcpRendezvous {
 public:
  explicit TcpRendezvous(const Options& o)
      : o_(o), n_(o.world_size), r_(o.rank), limit_(o.connect_timeout), until_(Clock::now() + o.connect_timeout),
        reactor_(std::make_shared<TcpReactor>()), addresses_(o.world_size) {
    links_.reserve(n_);
    for (std::size_t p = 0; p < n_; ++p) {
      links_.emplace_back(reactor_);
      links_[p].peer = p;
    }
  }

  /// For rejoining ranks' handshakes on a running endpoint's reactor (TcpEndpoint::serve_rejoins):
  /// it serves them while the endpoint's operations wait, and lives as long as the endpoint.
  TcpRendezvous(const Options& o, std::shared_ptr<TcpReactor> reactor, std::uint64_t job_id)
      : o_(o), n_(o.world_size), r_(o.rank), limit_(handshake_limit), until_(Clock::now() + handshake_limit),
        reactor_(std::move(reactor)), job_id_(job_id), addresses_(o.world_size), phase_("accepting a rejoining rank"),
        going_on_("going on") {}

  std::shared_ptr<TcpReactor> reactor() const { return reactor_; }
  std::uint64_t job_id() const noexcept { return job_id_; }
  /// The listener of a rank but 0, kept to accept a lost rank that rejoins.
  std::optional<Listener> listener() { return std::move(listener_); }
  std::vector<TcpLink> links() { return std::move(links_); }
  std::vector<std::string> addresses() { return std::move(addresses_); }
  TrafficCounters counters() const { return counters_; }

  void run() {
    if (n_ == 1) {
      addresses_[0] = "(this process)";
      return;
    }
    coordinator_ = *parse_host_port(o_.coordinator);
    addresses_[0] = format_host_port(coordinator_);
    try {
      if (!o_.rejoin.empty())
        rejoin_running_job();
      else if (r_ == 0)
        coordinate();
      else
        join();
    } catch (const TransportError& e) {
      // The ranks already connected wait for this one: tell them why it gave up, so that they
      // fail at once with the cause rather than with a closed connection or a timeout.
      const std::string why = e.what();
      const std::span<const std::byte> text(reinterpret_cast<const std::byte*>(why.data()), why.size());
      for (auto& l : links_) {
        if (!l.open()) continue;
        try {
          send_frame(l, wire::FrameType::abort, text, "a peer");
        } catch (...) {
        }
      }
      throw;
    }
  }

 private:
  friend class ::flotilla::transport::tcp::Endpoint;

  std::string who() const { return "tcp rank " + std::to_string(r_) + " of " + std::to_string(n_); }
  std::string connect_text() const { return std::to_string(o_.connect_timeout.count()) + " ms"; }
  [[noreturn]] void fail(const std::string& what) const { throw TransportError(who() + ": " + phase_ + ": " + what); }

  std::string limit_text() const { return std::to_string(limit_.count()) + " ms"; }

  void write_all(TcpLink& l, std::span<const std::byte> a, std::span<const std::byte> b, const std::string& peer) {
    std::size_t done = 0;
    const std::size_t total = a.size() + b.size();
    while (done < total) {
      std::array<asio::const_buffer, 2> bufs;
      std::size_t n = 0;
      if (done < a.size()) bufs[n++] = asio::buffer(a.data() + done, a.size() - done);
      const std::size_t off = done > a.size() ? done - a.size() : 0;
      if (off < b.size()) bufs[n++] = asio::buffer(b.data() + off, b.size() - off);
      ErrorCode ec;
      const std::size_t r = l.socket.write_some(std::span<const asio::const_buffer>(bufs.data(), n), ec);
      if (!ec && r > 0) {
        done += r;
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) {
        if (!wait_ready(reactor_->io, l.socket, asio::socket_base::wait_write, until_))
          fail("writing to " + peer + " timed out after " + limit_text());
        continue;
      }
      fail("writing to " + peer + " failed: " + ec.message());
    }
    counters_.header_bytes_sent += total;  // handshake frames are all framing, no payload
  }

  /// The encoded header of a frame of `type` carrying `payload`, numbered `sequence` (then counted).
  static auto frame_header(wire::FrameType type, std::uint64_t& sequence, std::span<const std::byte> payload) {
    wire::Header h;
    h.type = type;
    h.sequence = sequence++;
    h.payload_length = payload.size();
    wire::seal_payload(h, payload);
    return wire::encode(h);
  }

  void send_frame(TcpLink& l, wire::FrameType type, std::span<const std::byte> payload, const std::string& peer) {
    write_all(l, frame_header(type, l.send_sequence, payload), payload, peer);
  }

  void read_exact(TcpLink& l, std::byte* p, std::size_t n, const std::string& peer, const std::string& waiting) {
    while (n > 0) {
      ErrorCode ec;
      const std::size_t r = l.socket.read_some(asio::buffer(p, n), ec);
      if (!ec && r > 0) {
        p += r;
        n -= r;
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) {
        if (!wait_ready(reactor_->io, l.socket, asio::socket_base::wait_read, until_))
          fail(waiting + ": timed out after " + limit_text());
        continue;
      }
      fail(waiting + ": " + peer + (ec == asio::error::eof ? " closed the connection" : " failed: " + ec.message()));
    }
  }

  /// Reads one control frame. Bad magic, CRC or type, or a payload larger than control frames
  /// have, end the rendezvous here (before the payload is allocated). The version is left to the
  /// caller, which refuses a peer of another version with both numbers.
  TcpControlFrame read_frame(TcpLink& l, const std::string& peer, const std::string& waiting) {
    wire::HeaderBytes hb;
    read_exact(l, hb.data(), hb.size(), peer, waiting);
    TcpControlFrame f;
    f.decoded = wire::decode(hb);
    counters_.header_bytes_received += wire::header_size;
    check_control_header(f, l.recv_sequence, wire::max_control_payload, peer, waiting);
    f.payload.resize(static_cast<std::size_t>(f.header().payload_length));
    read_exact(l, f.payload.data(), f.payload.size(), peer, waiting);
    counters_.header_bytes_received += f.payload.size();
    check_control_payload(f, peer, waiting);
    return f;
  }

  /// Ends the rendezvous (fail()) on a header that cannot be acted on, or that announces more than
  /// `max_payload` bytes, before anything is allocated for it; counts the frame in `recv_sequence`.
  void check_control_header(const TcpControlFrame& f, std::uint64_t& recv_sequence, std::uint64_t max_payload,
                            const std::string& peer, const std::string& waiting) const {
    if (auto problem = f.decoded.problem(); !problem.empty())
      fail(waiting + ": " + peer + " sent a bad frame: " + problem + "; connection closed");
    const wire::Header& h = f.header();
    if (h.payload_length > max_payload)
      fail(waiting + ": " + peer + " sent a bad frame: a " + std::string(wire::type_name(h.type)) + " frame of " +
           std::to_string(h.payload_length) + " bytes (at most " + std::to_string(max_payload) +
           "); connection closed");
    if (h.version == wire::protocol_version) {
      if (h.sequence != recv_sequence)
        fail(waiting + ": " + peer + " sent a bad frame: frame number " + std::to_string(h.sequence) + " where " +
             std::to_string(recv_sequence) + " was due; connection closed");
      ++recv_sequence;
    }
  }
  void check_control_payload(const TcpControlFrame& f, const std::string& peer, const std::string& waiting) const {
    if (auto problem = wire::payload_problem(f.header(), f.payload); !problem.empty())
      fail(waiting + ": " + peer + " sent a bad frame: " + problem + "; connection closed");
  }

  static std::string text_of(const std::vector<std::byte>& payload) {
    return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
  }

  /// Checks a hello (or the refusal or abort in its place) from `peer`; returns it, or the reason
  /// to refuse it. A refusal or an abort received ends the rendezvous with its reason.
  std::optional<wire::Hello> check_hello(const TcpControlFrame& f, const std::string& peer, const std::string& waiting,
                                         std::string& refusal) {
    const wire::Header& h = f.header();
    if (h.type == wire::FrameType::refuse) fail(waiting + ": " + peer + " refused this rank: " + text_of(f.payload));
    if (h.type == wire::FrameType::abort) fail(waiting + ": " + peer + " gave up: " + text_of(f.payload));
    if (h.version != wire::protocol_version) {
      refusal = "protocol version mismatch: " + peer + " speaks version " + std::to_string(h.version) + ", " + who() +
                " speaks version " + std::to_string(wire::protocol_version) + " (are all ranks the same build?)";
      return std::nullopt;
    }
    if (h.type != wire::FrameType::hello) {
      refusal = peer + " sent a " + std::string(wire::type_name(h.type)) + " frame where a hello was due";
      return std::nullopt;
    }
    auto hello = wire::decode_hello(f.payload);
    if (!hello) {
      refusal = peer + " sent a malformed hello";
      return std::nullopt;
    }
    const bool mine = !o_.secret.empty();
    if (hello->auth != (mine ? 1 : 0)) {
      refusal = mine ? "authentication required: " + peer + " has no shared secret, " + who() +
                           " has one (set the same FLOTILLA_SECRET or FLOTILLA_SECRET_FILE on every rank)"
                     : "authentication mismatch: " + peer + " has a shared secret, " + who() +
                           " has none (set the same FLOTILLA_SECRET or FLOTILLA_SECRET_FILE on every rank)";
      return std::nullopt;
    }
    return hello;
  }

  /// The world size is checked only once the peer is authenticated: a stranger's claim of another
  /// size must not end the job.
  std::string check_world_size(const wire::Hello& hello, const std::string& peer) const {
    if (hello.world_size == n_) return {};
    return "world size mismatch: " + peer + " (rank " + std::to_string(hello.rank) + ") was started with world size " +
           std::to_string(hello.world_size) + ", " + who() + " with world size " + std::to_string(n_) +
           " (FLOTILLA_WORLD_SIZE)";
  }

  /// Tells `l`'s peer why it is refused (best effort), and ends the rendezvous with the reason
  /// (run() tells the ranks already connected).
  [[noreturn]] void refuse(TcpLink& l, const std::string& reason) {
    tell_refused(l, reason);
    fail(reason);
  }
  void tell_refused(TcpLink& l, const std::string& reason) {
    const std::span<const std::byte> text(reinterpret_cast<const std::byte*>(reason.data()), reason.size());
    try {
      send_frame(l, wire::FrameType::refuse, text, "the refused peer");
    } catch (...) {
    }
  }

  void log(LogLevel level, const std::string& line) const { tcp_log(o_, level, who(), line); }

  /// A hello of this rank's for one connection: a fresh nonce each time.
  std::vector<std::byte> hello_payload(std::uint16_t port, const std::string& host) const {
    wire::Hello h;
    h.world_size = static_cast<std::uint32_t>(n_);
    h.rank = static_cast<std::uint32_t>(r_);
    h.job_id = job_id_;
    h.listen_port = port;
    h.listen_host = host;
    h.auth = o_.secret.empty() ? 0 : 1;
    std::random_device rd;
    for (std::size_t i = 0; i < h.nonce.size(); i += 4) {
      const std::uint32_t v = rd();
      for (std::size_t k = 0; k < 4; ++k) h.nonce[i + k] = static_cast<std::uint8_t>(v >> (8 * k));
    }
    return wire::encode_hello(h);
  }

  std::span<const std::byte> proof_bytes(const Digest& d) const {
    return {reinterpret_cast<const std::byte*>(d.data()), d.size()};
  }

  /// The client's side of a connection's handshake, after its hello went out: reads the server's
  /// hello (and proof), checks it, and proves this rank's secret. Any failure ends the rendezvous.
  wire::Hello client_handshake(TcpLink& l, std::span<const std::byte> sent, const std::string& peer,
                               const std::string& waiting) {
    std::string refusal;
    const auto reply = read_frame(l, peer, waiting);
    auto hello = check_hello(reply, peer, waiting, refusal);
    if (hello && refusal.empty()) refusal = check_world_size(*hello, peer);
    if (!hello || !refusal.empty()) refuse(l, refusal);
    if (!o_.secret.empty()) {
      const auto f = read_frame(l, peer, waiting + " (authentication)");
      if (f.header().type == wire::FrameType::refuse) fail(waiting + ": " + peer + " refused this rank: " + text_of(f.payload));
      if (f.header().type != wire::FrameType::auth || f.header().version != wire::protocol_version ||
          !wire::proof_matches(f.payload, wire::auth_proof(o_.secret, wire::Role::server, sent, reply.payload)))
        refuse(l, "authentication failed: " + peer +
                      " does not know this job's shared secret (is FLOTILLA_SECRET the same on every rank?)");
      send_frame(l, wire::FrameType::auth, proof_bytes(wire::auth_proof(o_.secret, wire::Role::client, sent, reply.payload)),
                 peer);
      l.keys = wire::frame_keys(o_.secret, wire::Role::client, sent, reply.payload);
    }
    return *hello;
  }

  /// A connection from a rank, accepted and authenticated, with its hello.
  struct Arrival {
    TcpLink link;
    std::string peer;  ///< "a connection from host:port"
    wire::Hello hello;
  };

  /// How long one accepted connection may take to complete its handshake. Connections are served
  /// together, so this bounds what an idle one costs (a descriptor and a place among
  /// max_pending_handshakes), not how long the others wait.
  static constexpr std::chrono::milliseconds handshake_limit{5000};
  /// How many accepted connections may be in the middle of their handshake at once. Beyond it the
  /// oldest is dropped, so that a flood of idle connections cannot take every descriptor; a rank's
  /// handshake takes a round trip or two, so only a flood faster than that can crowd one out.
  static constexpr std::size_t max_pending_handshakes = 64;
  /// The largest payload of a frame a handshake reads: a hello has at most 308 bytes (its host at
  /// most 255), a proof 32. So a connection in the middle of its handshake holds little memory.
  static constexpr std::uint64_t max_handshake_payload = 4096;

  /// Serves, without waiting, the connections waiting on `listener` (accepted when `accept`) and
  /// those in the middle of their handshake: each goes on as far as its bytes allow, a hello
  /// answered with `reply()` (this rank's hello payload; `doing` names the step in messages:
  /// "registering", "accepting"). A connection that completes its handshake (authenticated, when
  /// the job has a secret) goes to arrived_. One that is malformed, of another protocol version,
  /// unauthenticated, or not done within handshake_limit is dropped, logged (and told why, when
  /// it is a flotilla peer) and counted in dropped_. Each connection left has a wait armed on the
  /// reactor, so that its owner's wait ends when it has something.
  template <class Reply>
  void serve_handshakes(Listener& listener, bool accept, std::string_view doing, Reply&& reply) {
    for (std::size_t taken = 0; accept && taken < max_pending_handshakes; ++taken) {
      auto incoming = accept_one(listener.acceptor);
      if (!incoming) break;
      if (pending_.size() >= max_pending_handshakes) {
        drop(*pending_.front(), doing,
             "the oldest of " + std::to_string(pending_.size()) +
                 " connections in the middle of their handshake (at most " + std::to_string(max_pending_handshakes) +
                 " at once)");
        pending_.erase(pending_.begin());
      }
      auto p = std::make_unique<TcpPendingHandshake>(std::move(*incoming));
      tune_socket(p->socket, 0);
      p->peer = "a connection from " + format_host_port(remote_host_port(p->socket));
      p->deadline = Clock::now() + handshake_limit;
      pending_.push_back(std::move(p));
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      TcpPendingHandshake& p = **it;
      const bool readable = std::exchange(p.read_wait->fired, false);
      const bool writable = std::exchange(p.write_wait->fired, false);
      const bool due = std::exchange(p.fresh, false) || readable || writable;
      const std::string waiting = std::string(doing) + " " + p.peer;
      bool done = false, gone = false;
      std::string refusal;
      try {
        if (due) done = step_handshake(p, waiting, reply, refusal);
      } catch (const TransportError& e) {
        // A peer that breaks the protocol is dropped, not allowed to end the job. (Its message
        // already names this rank and the connection.)
        log(LogLevel::warning, std::string(e.what()) + "; dropped it, " + going_on_);
        ++dropped_;
        gone = true;
      }
      if (!refusal.empty()) {
        tell_refused_now(p, refusal);
        log(LogLevel::warning,
            who() + ": " + phase_ + ": refused " + p.peer + ": " + refusal + "; dropped it, " + going_on_);
        ++dropped_;
        gone = true;
      }
      if (!done && !gone && Clock::now() >= p.deadline) {
        drop(p, doing,
             "no complete handshake within " + std::to_string(handshake_limit.count()) +
                 " ms (the limit for one connection)");
        gone = true;
      }
      if (done) arrived_.push_back(arrival_of(p));
      if (done || gone) {
        it = pending_.erase(it);
        continue;
      }
      // Nothing is read while this rank's frames wait to be written (a read wait would fire again
      // and again on what is left unread).
      if (p.out_done < p.out.size())
        arm_handshake_wait(*reactor_, p.socket, asio::socket_base::wait_write, p.write_wait);
      else
        arm_handshake_wait(*reactor_, p.socket, asio::socket_base::wait_read, p.read_wait);
      ++it;
    }
  }

  /// The earliest deadline of a connection in the middle of its handshake (`until` when none is).
  Clock::time_point next_handshake_deadline(Clock::time_point until) const {
    for (const auto& p : pending_) until = std::min(until, p->deadline);
    return until;
  }

  /// Moves `p`'s handshake on as far as its bytes allow; true once it is complete and this rank's
  /// frames are written. Throws TransportError when the connection breaks the protocol, and sets
  /// `refusal` when it is to be refused.
  template <class Reply>
  bool step_handshake(TcpPendingHandshake& p, const std::string& waiting, Reply& reply, std::string& refusal) {
    for (;;) {
      if (!flush_handshake(p)) return false;
      if (p.authenticated) return true;
      auto f = read_handshake_frame(p, p.hello ? waiting + " (authentication)" : waiting);
      if (!f) return false;
      const wire::Header& h = f->header();
      if (!p.hello) {
        if (h.type == wire::FrameType::refuse || h.type == wire::FrameType::abort) {
          refusal = p.peer + " sent a " + std::string(wire::type_name(h.type)) + " frame where a hello was due";
          return false;
        }
        auto hello = check_hello(*f, p.peer, waiting, refusal);
        if (!hello) return false;
        p.hello = std::move(hello);
        p.our_hello = reply();
        queue_frame(p, wire::FrameType::hello, p.our_hello);
        if (o_.secret.empty()) {
          p.authenticated = true;
        } else {
          p.their_hello = std::move(f->payload);
          queue_frame(p, wire::FrameType::auth,
                      proof_bytes(wire::auth_proof(o_.secret, wire::Role::server, p.their_hello, p.our_hello)));
        }
        continue;
      }
      if (h.type != wire::FrameType::auth || h.version != wire::protocol_version ||
          !wire::proof_matches(f->payload,
                               wire::auth_proof(o_.secret, wire::Role::client, p.their_hello, p.our_hello))) {
        refusal = "authentication failed: " + p.peer +
                  " does not know this job's shared secret (is FLOTILLA_SECRET the same on every rank?)";
        return false;
      }
      p.authenticated = true;
    }
  }

  /// Reads what has arrived of `p`'s next frame, never more than the frame: the bytes after it are
  /// the link's. Returns the frame once whole; throws TransportError (fail()) on a bad frame, an
  /// error, or the end of the connection.
  std::optional<TcpControlFrame> read_handshake_frame(TcpPendingHandshake& p, const std::string& waiting) {
    for (;;) {
      const bool in_header = p.header_done < wire::header_size;
      std::byte* into = in_header ? p.header_bytes.data() + p.header_done : p.frame.payload.data() + p.payload_done;
      const std::size_t want = in_header ? wire::header_size - p.header_done : p.frame.payload.size() - p.payload_done;
      if (want == 0) {
        TcpControlFrame f = std::move(p.frame);
        p.frame = {};
        p.header_done = p.payload_done = 0;
        check_control_payload(f, p.peer, waiting);
        return f;
      }
      ErrorCode ec;
      const std::size_t r = p.socket.read_some(asio::buffer(into, want), ec);
      if (!ec && r > 0) {
        counters_.header_bytes_received += r;
        if (!in_header) {
          p.payload_done += r;
        } else if ((p.header_done += r) == wire::header_size) {
          p.frame.decoded = wire::decode(p.header_bytes);
          check_control_header(p.frame, p.recv_sequence, max_handshake_payload, p.peer, waiting);
          p.frame.payload.resize(static_cast<std::size_t>(p.frame.header().payload_length));
        }
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) return std::nullopt;
      fail(waiting + ": " + p.peer + (ec == asio::error::eof ? " closed the connection" : " failed: " + ec.message()));
    }
  }

  static void queue_frame(TcpPendingHandshake& p, wire::FrameType type, std::span<const std::byte> payload) {
    const auto header = frame_header(type, p.send_sequence, payload);
    p.out.insert(p.out.end(), header.begin(), header.end());
    p.out.insert(p.out.end(), payload.begin(), payload.end());
  }

  /// Writes what `p` has to send; false while the socket takes no more. Throws TransportError on
  /// an error.
  bool flush_handshake(TcpPendingHandshake& p) {
    while (p.out_done < p.out.size()) {
      ErrorCode ec;
      const std::size_t r = p.socket.write_some(asio::buffer(p.out.data() + p.out_done, p.out.size() - p.out_done), ec);
      if (!ec && r > 0) {
        p.out_done += r;
        counters_.header_bytes_sent += r;
        continue;
      }
      if (ec == asio::error::interrupted) continue;
      if (!ec || would_block(ec)) return false;
      fail("writing to " + p.peer + " failed: " + ec.message());
    }
    p.out.clear();
    p.out_done = 0;
    return true;
  }

  /// Tells `p`'s peer why it is refused, if its socket takes the frame now: a refused connection
  /// gets no more of this rank's time.
  void tell_refused_now(TcpPendingHandshake& p, const std::string& reason) {
    queue_frame(p, wire::FrameType::refuse,
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(reason.data()), reason.size()));
    try {
      flush_handshake(p);
    } catch (const TransportError&) {
    }
  }

  void drop(TcpPendingHandshake& p, std::string_view doing, const std::string& why) {
    log(LogLevel::warning,
        who() + ": " + phase_ + ": " + std::string(doing) + " " + p.peer + ": " + why + "; dropped it, " + going_on_);
    ++dropped_;
  }

  /// `p`, done, as a link (its waits cancelled: the link arms its own).
  Arrival arrival_of(TcpPendingHandshake& p) {
    ErrorCode ec;
    p.socket.cancel(ec);
    Arrival a{TcpLink(reactor_), std::move(p.peer), *p.hello};
    a.link.socket = std::move(p.socket);
    a.link.send_sequence = p.send_sequence;
    a.link.recv_sequence = p.recv_sequence;
    if (!o_.secret.empty()) a.link.keys = wire::frame_keys(o_.secret, wire::Role::server, p.their_hello, p.our_hello);
    return a;
  }

  /// For a timeout's message: the connections that were not ranks of this job.
  std::string strangers_text() const {
    if (dropped_ == 0 && pending_.empty()) return {};
    return "; meanwhile " + std::to_string(dropped_) + " other connection" + (dropped_ == 1 ? " was" : "s were") +
           " dropped (not a flotilla rank of this job, unauthenticated, or too slow: see the log) and " +
           std::to_string(pending_.size()) + (pending_.size() == 1 ? " was" : " were") +
           " still open without a complete handshake";
  }

  /// The next connection on `listener` to complete its handshake, all of them served at once
  /// meanwhile (serve_handshakes). On the rendezvous deadline, fails with `timed_out(missing)`,
  /// where `missing` lists ranks 1 to `below` - 1 that have no link yet, and the count of other
  /// connections dropped or still pending.
  template <class Reply, class TimedOut>
  Arrival next_arrival(Listener& listener, std::string_view doing, std::size_t below, Reply&& reply,
                       TimedOut&& timed_out) {
    for (;;) {
      serve_handshakes(listener, true, doing, reply);
      if (!arrived_.empty()) {
        Arrival a = std::move(arrived_.front());
        arrived_.pop_front();
        return a;
      }
      if (Clock::now() >= until_) {
        std::string missing;
        for (std::size_t p = 1; p < below; ++p)
          if (!links_[p].open()) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        fail(timed_out(missing) + strangers_text());
      }
      arm_handshake_wait(*reactor_, listener.acceptor, asio::socket_base::wait_read, accept_wait_);
      const std::uint64_t seen = reactor_->events;
      run_until(reactor_->io, [&] { return reactor_->events != seen; }, next_handshake_deadline(until_));
    }
  }

  /// The end of accepting on `listener` during the rendezvous: its wait is not the endpoint's.
  void stop_serving(Listener& listener) {
    ErrorCode ec;
    listener.acceptor.cancel(ec);
    pending_.clear();
  }

  // Rank 0: accepts every other rank's registration, then sends each the table.
  void coordinate() {
    Listener listener = listen_on(reactor_->io, coordinator_.host, coordinator_.port, o_.socket_buffer_bytes,
                                  who() + ": cannot start the coordinator (FLOTILLA_COORDINATOR)");
    std::random_device rd;
    while (job_id_ == 0) job_id_ = (std::uint64_t{rd()} << 32) ^ rd();
    wire::Table table;
    table.job_id = job_id_;
    table.entries.resize(n_);
    table.entries[0] = {coordinator_.host, coordinator_.port};
    std::size_t registered = 0;
    while (registered < n_ - 1) {
      auto arrival = next_arrival(
          listener, "registering", n_, [&] { return hello_payload(coordinator_.port, coordinator_.host); },
          [&](const std::string& missing) {
            return "timed out after " + connect_text() + " at the coordinator " + addresses_[0] + ": rank(s) " +
                   missing + " did not register (were they started, with FLOTILLA_COORDINATOR=" + addresses_[0] + "?)";
          });
      TcpLink& c = arrival.link;
      const std::string& peer = arrival.peer;
      const auto& hello = arrival.hello;
      // Authenticated (or on loopback without a secret): a disagreement now is a misconfigured
      // job, and ends it.
      std::string refusal = check_world_size(hello, peer);
      if (!refusal.empty()) {
      } else if (hello.rank == 0 || hello.rank >= n_) {
        refusal = peer + " claims rank " + std::to_string(hello.rank) +
                  ", but rank 0 is the coordinator and the job has ranks 0 to " + std::to_string(n_ - 1);
      } else if (links_[hello.rank].open()) {
        refusal = "rank " + std::to_string(hello.rank) + " registered twice (" + addresses_[hello.rank] + ", then " +
                  peer + "): two processes were given the same FLOTILLA_RANK";
      } else if (hello.job_id != 0) {
        refusal = peer + " (rank " + std::to_string(hello.rank) + ") registered with a job id from another job";
      }
      if (!refusal.empty()) refuse(c, refusal);
      const std::size_t k = hello.rank;
      std::string host = hello.listen_host;
      if (host.empty() || is_wildcard_host(host)) host = remote_host_port(c.socket).host;
      table.entries[k] = {host, hello.listen_port};
      addresses_[k] = format_host_port(host, hello.listen_port);
      c.peer = k;
      c.address = addresses_[k];
      links_[k] = std::move(c);
      ++registered;
    }
    stop_serving(listener);
    const auto payload = wire::encode_table(table);
    for (std::size_t k = 1; k < n_; ++k)
      send_frame(links_[k], wire::FrameType::table, payload, "rank " + std::to_string(k) + " at " + addresses_[k]);
  }

  // Ranks 1 to n-1: register with the coordinator, get the table, connect to the higher ranks and
  // accept the lower ones.
  void join() {
    listener_.emplace(listen_on(reactor_->io, o_.bind, 0, o_.socket_buffer_bytes, who() + ": cannot listen (FLOTILLA_BIND)"));
    Listener& listener = *listener_;
    const std::string coord = "rank 0 (the coordinator) at " + addresses_[0];
    TcpLink& c0 = links_[0];
    c0.socket = connect_to(reactor_->io, coordinator_, until_, o_.socket_buffer_bytes,
                       who() + ": rendezvous: cannot reach the coordinator within " + connect_text() +
                           " (FLOTILLA_COORDINATOR)");
    std::string host = o_.bind;
    if (is_wildcard_host(host)) host = local_host_port(c0.socket).host;
    const auto registration = hello_payload(listener.port, host);
    send_frame(c0, wire::FrameType::hello, registration, coord);
    const auto hello = client_handshake(c0, registration, coord, "registering with " + coord);
    if (hello.rank != 0) refuse(c0, coord + " answered as rank " + std::to_string(hello.rank));
    const auto tf = read_frame(c0, coord, "waiting for the table of ranks from " + coord);
    if (tf.header().type == wire::FrameType::abort)
      fail("waiting for the table of ranks: " + coord + " gave up: " + text_of(tf.payload));
    if (tf.header().type == wire::FrameType::refuse)
      fail("waiting for the table of ranks: " + coord + " refused this rank: " + text_of(tf.payload));
    auto table = tf.header().type == wire::FrameType::table ? wire::decode_table(tf.payload) : std::nullopt;
    if (!table || table->entries.size() != n_ || table->job_id == 0)
      fail(coord + " sent a malformed table of ranks");
    job_id_ = table->job_id;
    for (std::size_t p = 1; p < n_; ++p) addresses_[p] = format_host_port(table->entries[p].host, table->entries[p].port);
    c0.address = addresses_[0];

    // 1. Connect to every higher rank and say hello. Each listens already (it registered after
    //    listening), and the kernel completes the connection before the peer accepts it, so this
    //    waits for no peer.
    std::vector<std::vector<std::byte>> sent(n_);
    for (std::size_t p = r_ + 1; p < n_; ++p) {
      const std::string peer = "rank " + std::to_string(p) + " at " + addresses_[p];
      links_[p].socket = connect_to(reactor_->io, {table->entries[p].host, table->entries[p].port}, until_, o_.socket_buffer_bytes,
                                who() + ": rendezvous: cannot connect to " + peer + " within " + connect_text());
      links_[p].address = addresses_[p];
      sent[p] = hello_payload(0, {});
      send_frame(links_[p], wire::FrameType::hello, sent[p], peer);
    }
    // 2. Accept every lower rank but 0 (whose link is the registration): answer its hello, and
    //    authenticate it. A lower rank proves its secret (step 3) once the ranks below it have
    //    been answered, so every wait here ends.
    for (std::size_t accepted = 0; accepted + 1 < r_;) {
      auto arrival = next_arrival(
          listener, "accepting", r_, [&] { return hello_payload(0, {}); },
          [&](const std::string& missing) {
            return "timed out after " + connect_text() + " waiting for rank(s) " + missing + " to connect to " +
                   addresses_[r_];
          });
      TcpLink& c = arrival.link;
      const std::string& peer = arrival.peer;
      const auto& h = arrival.hello;
      std::string refusal = check_world_size(h, peer);
      if (!refusal.empty()) {
      } else if (h.job_id != job_id_) {
        refusal = peer + " belongs to another job (its job id differs from the coordinator's)";
      } else if (h.rank == 0 || h.rank >= r_) {
        refusal = peer + " claims rank " + std::to_string(h.rank) + ", but only ranks 1 to " + std::to_string(r_ - 1) +
                  " connect to rank " + std::to_string(r_);
      } else if (links_[h.rank].open()) {
        refusal = "rank " + std::to_string(h.rank) + " connected twice";
      }
      if (!refusal.empty()) refuse(c, refusal);
      c.peer = h.rank;
      c.address = addresses_[h.rank];
      links_[h.rank] = std::move(c);
      ++accepted;
    }
    stop_serving(listener);
    // 3. The higher ranks' answers, and this rank's proofs.
    for (std::size_t p = r_ + 1; p < n_; ++p) {
      const std::string peer = "rank " + std::to_string(p) + " at " + addresses_[p];
      const auto h = client_handshake(links_[p], sent[p], peer, "connecting to " + peer);
      if (h.rank != p || h.job_id != job_id_) refuse(links_[p], peer + " answered as another rank or job");
    }
  }

  // A rank that died and was started again: reconnects to the ranks FLOTILLA_REJOIN names (each
  // answers with its rank and the job's id), and to no other.
  void rejoin_running_job() {
    for (const auto& text : o_.rejoin) {
      const auto hp = *parse_host_port(text);
      const std::string peer = "the rank at " + text;
      TcpLink l(reactor_);
      l.socket = connect_to(reactor_->io, hp, until_, o_.socket_buffer_bytes,
                            who() + ": rejoining: cannot reach " + peer + " within " + connect_text() + " (FLOTILLA_REJOIN)");
      const auto sent = hello_payload(0, {});
      send_frame(l, wire::FrameType::hello, sent, peer);
      const auto h = client_handshake(l, sent, peer, "rejoining through " + peer);
      if (h.rank >= n_ || h.rank == r_)
        refuse(l, peer + " answered as rank " + std::to_string(h.rank) + ", which this rank cannot rejoin");
      if (links_[h.rank].open()) refuse(l, peer + " is rank " + std::to_string(h.rank) + ", which FLOTILLA_REJOIN names twice");
      if (job_id_ != 0 && h.job_id != job_id_) refuse(l, peer + " belongs to another job than the ranks before it in FLOTILLA_REJOIN");
      // The peer's word on the rank (it refuses one that is still alive): a table frame, empty.
      const std::string waiting = "waiting for " + peer + " to take this rank back";
      const auto answer = read_frame(l, peer, waiting);
      if (answer.header().type == wire::FrameType::refuse)
        fail(waiting + ": " + peer + " refused this rank: " + text_of(answer.payload));
      if (answer.header().type == wire::FrameType::abort) fail(waiting + ": " + peer + " gave up: " + text_of(answer.payload));
      const auto welcome = answer.header().type == wire::FrameType::table ? wire::decode_table(answer.payload) : std::nullopt;
      if (!welcome || welcome->job_id != h.job_id) fail(waiting + ": " + peer + " answered with a malformed frame");
      job_id_ = h.job_id;
      l.peer = h.rank;
      l.address = text;
      addresses_[h.rank] = text;
      links_[h.rank] = std::move(l);
    }
    for (auto& a : addresses_)
      if (a.empty()) a = "(not reconnected after the rejoin)";
  }

  /// Restarts the deadline of the blocking-style helpers: one limit_ from now. (A rejoining rank's
  /// answer is written long after the handshakes' rendezvous began.)
  void restart_deadline() { until_ = Clock::now() + limit_; }

  Options o_;  // a copy: a rejoin's rendezvous lives in an endpoint, which may move
  std::size_t n_, r_;
  std::chrono::milliseconds limit_;  // how long the blocking-style helpers may wait, for messages
  Clock::time_point until_;
  std::shared_ptr<TcpReactor> reactor_;  // the endpoint's, once the rendezvous is done
  HostPort coordinator_;
  std::uint64_t job_id_ = 0;
  std::vector<TcpLink> links_;
  std::vector<std::string> addresses_;
  TrafficCounters counters_{};
  std::optional<Listener> listener_;
  // The server side of the handshakes: connections in the middle of theirs (oldest first), those
  // done and not yet taken, and how many were dropped.
  std::vector<std::unique_ptr<TcpPendingHandshake>> pending_;
  std::deque<Arrival> arrived_;
  std::size_t dropped_ = 0;
  std::shared_ptr<TcpHandshakeWait> accept_wait_ = std::make_shared<TcpHandshakeWait>();
  // For messages: what this handshake is part of, and what the rank does after dropping a peer.
  std::string phase_ = o_.rejoin.empty() ? "rendezvous" : "rejoining a running job";
  std::string going_on_ = "still waiting for the ranks";
};

}  // namespace detail

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_RENDEZVOUS_HPP_INCLUDED
