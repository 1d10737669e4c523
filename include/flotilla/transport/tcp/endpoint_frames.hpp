// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_ENDPOINTFRAMES_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_ENDPOINTFRAMES_HPP_INCLUDED
// The endpoint's frames (endpoint.hpp): a frame written straight from the caller's memory, in one
// gather write per call; frames read into a link's buffer, into the posted receive's own buffer, or
// into memory of their own until a receive takes them.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>

#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"
#include "flotilla/transport/tcp/endpoint.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

// ---- sending ---------------------------------------------------------------------------------
inline detail::TcpOutgoing Endpoint::frame(Link& l, wire::FrameType type, Tag tag, std::uint32_t aux,
                                           std::span<const std::byte> payload) {
  detail::TcpOutgoing o;
  o.link = &l;
  wire::Header h;
  h.type = type;
  h.tag = tag;
  h.aux = aux;
  h.sequence = l.send_sequence++;
  h.payload_length = payload.size();
  if (type == wire::FrameType::data) h.fingerprint = current_fingerprint(tag);
  o.payload = payload;
  if (l.tagged()) {
    // The tag covers the header and the payload: no CRC besides.
    h.flags |= wire::header_flags::frame_tag;
    wire::encode(h, o.header);
    o.mac = l.mac_send->tag(h.sequence, o.header, payload);
    o.mac_bytes = o.mac.size();
    counters_.header_bytes_sent += o.mac_bytes;
  } else {
    if (type != wire::FrameType::data || l.checksum) wire::seal_payload(h, payload);
    wire::encode(h, o.header);
  }
  if (type == wire::FrameType::goodbye || type == wire::FrameType::abort) {
    std::lock_guard lock(l.guard->m);  // the last frame on this connection: no heartbeat after it
    l.guard->beating = false;
  }
  return o;
}

inline std::uint64_t Endpoint::current_fingerprint(Tag tag) const {
  const auto it = ops_.find(tag);
  return it == ops_.end() ? 0 : it->second.current;
}

inline void Endpoint::check_fingerprint(std::uint64_t theirs, const detail::TcpPosted& p, std::size_t from) {
  if (fingerprints_agree(theirs, p.fingerprint)) return;
  fail(peer_name(from) + " sent a message (tag " + std::to_string(p.tag) + ") of " +
           Operation::from_fingerprint(theirs).describe() + " while this rank is in " +
           Operation::from_fingerprint(p.fingerprint).describe() +
           ": the ranks disagree on which collective they are in (did one of them skip or add a call?)",
       rank_);
}

inline bool Endpoint::push(detail::TcpOutgoing& o, std::size_t quantum) {
  Link& l = *o.link;
  // Whole quanta, and no tail shorter than half a quantum: a 256 KiB message and its header go
  // out together, not as 256 KiB and then 48 bytes.
  const std::size_t left = o.total() - o.written;
  const std::size_t stop_at = o.written + (left - std::min(quantum, left) < quantum / 2 ? left : quantum);
  while (o.written < stop_at) {
    // One gather write (sendmsg): the rest of the header, then the payload up to `stop_at`, then
    // the frame tag (when the link has them) as far as `stop_at` goes.
    std::array<detail::asio::const_buffer, 3> bufs;
    std::size_t n = 0;
    if (o.written < wire::header_size)
      bufs[n++] = detail::asio::buffer(o.header.data() + o.written, wire::header_size - o.written);
    const std::size_t payload_end = wire::header_size + o.payload.size();
    if (const std::size_t from = std::max(o.written, wire::header_size), to = std::min(payload_end, stop_at); from < to)
      bufs[n++] = detail::asio::buffer(o.payload.data() + (from - wire::header_size), to - from);
    if (const std::size_t from = std::max(o.written, payload_end), to = std::min(o.total(), stop_at); from < to)
      bufs[n++] = detail::asio::buffer(o.mac.data() + (from - payload_end), to - from);
    detail::ErrorCode ec;
    std::size_t r = 0;
    {
      // A heartbeat partly written goes first; none can start while this frame is partly written.
      std::lock_guard lock(l.guard->m);
      if (!l.guard->finish_beat()) return false;
      r = l.socket.write_some(std::span<const detail::asio::const_buffer>(bufs.data(), n), ec);
      if (!ec) l.guard->mid_frame = o.written + r < o.total();
    }
    if (!ec && r > 0) {
      o.written += r;
      bytes_moved_ += r;
      continue;
    }
    if (ec == detail::asio::error::interrupted) continue;
    if (!ec || detail::would_block(ec)) return false;
    // The peer is gone. If it said why (an abort frame), that is the better message: read it.
    if (!l.goodbye) pump(l, false);
    const bool closed = ec == detail::asio::error::broken_pipe || ec == detail::asio::error::connection_reset;
    lose_peer(l,
              peer_name(l.peer) + (closed ? " closed the connection" : " is unreachable") + " (" + ec.message() +
                  "; its process exited or was killed?)",
              true);
  }
  return true;
}


// ---- receiving -------------------------------------------------------------------------------
inline bool Endpoint::wanted(const Link& l) const {
  if (l.peer == rank_ || l.lost) return false;
  if (posted_ && !posted_->done && (posted_->peer == l.peer || posted_->peer == detail::tcp_nobody) &&
      (posted_->adopted == nullptr || posted_->adopted == &l))
    return true;
  if (token_link_ == &l && std::find(l.tokens.begin(), l.tokens.end(), token_key_) == l.tokens.end()) return true;
  if (awaiting_goodbye_ && !l.goodbye) return true;
  return false;
}

inline bool Endpoint::absorbs(const Link& l) const {
  return absorbing_ && l.peer != rank_ && !l.lost && l.queue.empty();
}

inline bool Endpoint::fill(Link& l, std::size_t most) {
  if (l.begin == l.end) {
    l.begin = l.end = 0;
  } else if (l.begin > 0) {
    std::memmove(l.buffer.get(), l.buffer.get() + l.begin, l.end - l.begin);
    l.end -= l.begin;
    l.begin = 0;
  }
  return read_some(l, l.buffer.get() + l.end, std::min(most, detail::tcp_read_buffer - l.end), l.end);
}

template <class Count>
bool Endpoint::read_some(Link& l, std::byte* p, std::size_t n, Count& count) {
  for (;;) {
    detail::ErrorCode ec;
    const std::size_t r = l.socket.read_some(detail::asio::buffer(p, n), ec);
    if (!ec && r > 0) {
      count += static_cast<Count>(r);
      bytes_moved_ += r;
      l.heard = Clock::now();
      return true;
    }
    if (ec == detail::asio::error::interrupted) continue;
    if (!ec || detail::would_block(ec)) {
      l.parked = false;  // read dry: a read wait may be armed again
      return false;
    }
    const bool eof = ec == detail::asio::error::eof;
    if (eof && l.goodbye && !l.in_frame && l.begin == l.end) {
      l.eof = true;
      return false;
    }
    std::string what =
        peer_name(l.peer) + (eof || ec == detail::asio::error::connection_reset ? " closed the connection" : " failed");
    if (l.in_frame || l.begin != l.end) what += " in the middle of a frame";
    what += eof ? " (its process exited or was killed)" : " (" + ec.message() + ")";
    const bool needed = wanted(l);
    lose_peer(l, what, needed);
    return false;
  }
}

inline void Endpoint::pump(Link& l, bool lazy) {
  while (l.open() && !l.eof) {
    if (lazy && !reads(l)) return;
    if (!l.in_frame) {
      if (const std::size_t have = l.end - l.begin; have < wire::header_size) {
        // After a large frame the next is likely large too: read just its header, so that its
        // payload goes straight to its destination instead of through the link's buffer.
        if (!fill(l, l.large ? wire::header_size - have : detail::tcp_read_buffer)) return;
        continue;
      }
      start_frame(l);
      continue;
    }
    const std::uint64_t left = l.frame.payload_length - l.frame_done;
    if (left == 0) {  // the payload is in: its frame tag follows
      if (l.begin == l.end && !fill(l)) return;
      const std::size_t take = std::min(l.end - l.begin, l.mac_in.size() - l.mac_done);
      std::memcpy(l.mac_in.data() + l.mac_done, l.buffer.get() + l.begin, take);
      l.begin += take;
      l.mac_done += take;
      if (l.mac_done == l.mac_in.size()) finish_frame(l);
      continue;
    }
    if (const std::size_t avail = l.end - l.begin; avail > 0) {
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(avail, left));
      if (l.sink == Link::Sink::user) std::memcpy(l.user + l.frame_done, l.buffer.get() + l.begin, take);
      if (l.sink == Link::Sink::staging) std::memcpy(l.staging.get() + l.frame_done, l.buffer.get() + l.begin, take);
      l.begin += take;
      l.frame_done += take;
    } else if (left >= detail::tcp_read_buffer && l.sink != Link::Sink::discard) {
      std::byte* dst = (l.sink == Link::Sink::user ? l.user : l.staging.get()) + l.frame_done;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, detail::tcp_read_quantum));
      if (!read_some(l, dst, n, l.frame_done)) return;
    } else {
      if (!fill(l)) return;
      continue;
    }
    if (l.frame_done == l.frame.payload_length && !l.mac_due()) finish_frame(l);
  }
}

inline void Endpoint::start_frame(Link& l) {
  std::memcpy(l.frame_bytes.data(), l.buffer.get() + l.begin, wire::header_size);
  const auto d = wire::decode(l.frame_bytes);
  l.begin += wire::header_size;
  // Heartbeats are the transport's own, like the TCP acknowledgements: not counted as traffic.
  if (d.header.type != wire::FrameType::heartbeat) counters_.header_bytes_received += wire::header_size;
  if (auto problem = d.problem(); !problem.empty()) protocol_error(l, problem);
  const wire::Header& h = d.header;
  if (h.version != wire::protocol_version)
    protocol_error(l, "protocol version " + std::to_string(h.version) + ", this rank speaks version " +
                          std::to_string(wire::protocol_version));
  if (h.type != wire::FrameType::heartbeat) {
    if (h.sequence != l.recv_sequence)
      protocol_error(l, "frame number " + std::to_string(h.sequence) + " where " + std::to_string(l.recv_sequence) +
                            " was due (a frame was lost or repeated)");
    ++l.recv_sequence;
  }
  if ((h.flags & wire::header_flags::frame_tag) != 0) {
    if (h.type == wire::FrameType::heartbeat) protocol_error(l, "a heartbeat with a frame tag");
    if (!l.mac_receive)
      protocol_error(l, "a frame with a tag on a connection without frame keys (the job has no shared secret here)");
    counters_.header_bytes_received += l.mac_in.size();
  } else if (l.mac_required && h.type != wire::FrameType::heartbeat) {
    protocol_error(l, "a " + std::string(wire::type_name(h.type)) +
                          " frame without a frame tag, on a connection whose frames must carry one (TcpOptions::frame_mac; "
                          "FLOTILLA_FRAME_MAC is the same on every rank?)");
  }
  l.mac_done = 0;
  l.large = h.payload_length >= detail::tcp_read_buffer;
  l.frame = h;
  l.frame_done = 0;
  l.in_frame = true;
  l.sink = Link::Sink::staging;
  l.user = nullptr;
  switch (h.type) {
    case wire::FrameType::data: {
      detail::TcpPosted* p = posted_;
      if (p && !p->done && !p->adopted && (p->peer == l.peer || p->peer == detail::tcp_nobody) && p->tag == h.tag) {
        // Its receive is waiting: the length is checked against the receive's buffer, and the
        // payload goes straight there (or, of another size, is read and dropped).
        check_fingerprint(h.fingerprint, *p, l.peer);
        p->adopted = &l;
        if (h.payload_length == p->buffer.size()) {
          l.sink = Link::Sink::user;
          l.user = p->buffer.data();
        } else {
          // Of another size: read and dropped, then reported. A length beyond any message a peer
          // may send is a broken stream, not a message to wait for.
          if (h.payload_length > std::max<std::uint64_t>(options_.max_message_bytes, p->buffer.size()))
            protocol_error(l, "a message of " + std::to_string(h.payload_length) + " bytes (tag " +
                                  std::to_string(h.tag) + "), more than the limit of " +
                                  std::to_string(options_.max_message_bytes) + " bytes (TcpOptions::max_message_bytes)");
          l.sink = Link::Sink::discard;
          p->wrong_size = true;
          p->message_size = h.payload_length;
        }
      } else {
        if (h.payload_length > options_.max_message_bytes)
          protocol_error(l, "a message of " + std::to_string(h.payload_length) + " bytes (tag " +
                                std::to_string(h.tag) + "), more than the " +
                                std::to_string(options_.max_message_bytes) +
                                " bytes a message without a posted receive may have (TcpOptions::max_message_bytes)");
        l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(h.payload_length));
      }
      break;
    }
    case wire::FrameType::barrier:
    case wire::FrameType::goodbye:
    case wire::FrameType::heartbeat:
      if (h.payload_length != 0)
        protocol_error(l, "a " + std::string(wire::type_name(h.type)) + " frame with a " +
                              std::to_string(h.payload_length) + "-byte payload");
      break;
    case wire::FrameType::abort:
      if (h.payload_length > wire::max_control_payload)
        protocol_error(l, "an abort frame of " + std::to_string(h.payload_length) + " bytes");
      counters_.header_bytes_received += h.payload_length;
      l.staging = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(h.payload_length));
      break;
    default:
      protocol_error(l, "an unexpected " + std::string(wire::type_name(h.type)) + " frame after the handshake");
  }
  if (h.payload_length == 0 && !l.mac_due()) finish_frame(l);
}

inline void Endpoint::finish_frame(Link& l) {
  l.in_frame = false;
  const wire::Header& h = l.frame;
  if ((h.flags & wire::header_flags::frame_tag) != 0 && l.sink != Link::Sink::discard) {
    const std::byte* got = l.sink == Link::Sink::user ? l.user : l.staging.get();
    const auto want = l.mac_receive->tag(h.sequence, l.frame_bytes, {got, static_cast<std::size_t>(h.payload_length)});
    if (!constant_time_equal(want, l.mac_in))
      protocol_error(l, "a " + std::string(wire::type_name(h.type)) + " frame (number " + std::to_string(h.sequence) +
                            ", tag " + std::to_string(h.tag) +
                            ") whose frame tag does not match its bytes: changed on the way, or not sent by a rank that "
                            "knows the job's secret");
  }
  if ((h.flags & wire::header_flags::payload_crc) != 0 && l.sink != Link::Sink::discard) {
    const std::byte* got = l.sink == Link::Sink::user ? l.user : l.staging.get();
    if (auto problem = wire::payload_problem(h, {got, static_cast<std::size_t>(h.payload_length)}); !problem.empty())
      protocol_error(l, problem + " (tag " + std::to_string(h.tag) + ")");
  }
  switch (h.type) {
    case wire::FrameType::data:
      if (l.sink == Link::Sink::staging) {
        l.queue.push_back({h.tag, std::move(l.staging), static_cast<std::size_t>(h.payload_length), arrivals_++,
                           h.fingerprint});
      } else if (posted_ && posted_->adopted == &l) {
        received(*posted_, h.payload_length, l.peer);
      } else {
        // A wrong-sized message whose receive has given up (it timed out mid-frame): consumed.
        counters_.payload_bytes_received += h.payload_length;
        ++counters_.messages_received;
      }
      break;
    case wire::FrameType::barrier:
      l.tokens.push_back(std::uint64_t{h.aux} << 32 | h.tag);
      break;
    case wire::FrameType::goodbye:
      l.goodbye = true;
      break;
    case wire::FrameType::abort: {
      std::string reason(reinterpret_cast<const char*>(l.staging.get()), static_cast<std::size_t>(h.payload_length));
      // aux: the rank that failed first, which the sender may only be passing on.
      fail_link(l, reason.empty() ? peer_name(l.peer) + " failed" : reason, h.aux < size_ ? h.aux : l.peer);
    }
    default:
      break;
  }
  l.sink = Link::Sink::staging;
  l.user = nullptr;
  l.staging.reset();
}

inline void Endpoint::received(detail::TcpPosted& p, std::uint64_t size, std::size_t from) {
  counters_.payload_bytes_received += size;
  ++counters_.messages_received;
  p.done = true;
  p.from = from;
  p.adopted = nullptr;
  if (size != p.buffer.size()) {
    p.wrong_size = true;
    p.message_size = size;
  }
}

inline void Endpoint::post(detail::TcpPosted& p) {
  std::deque<detail::TcpMessage>* best_queue = nullptr;
  std::deque<detail::TcpMessage>::iterator best;
  std::size_t best_from = detail::tcp_nobody;
  auto consider = [&](std::deque<detail::TcpMessage>& q, std::size_t from) {
    for (auto it = q.begin(); it != q.end(); ++it)
      if (it->tag == p.tag) {
        if (!best_queue || it->arrival < best->arrival) {
          best_queue = &q;
          best = it;
          best_from = from;
        }
        return;
      }
  };
  const bool any = p.peer == detail::tcp_nobody;
  if (any || p.peer == rank_) consider(self_queue_, rank_);
  for (auto& l : links_)
    if (l.peer != rank_ && (any || l.peer == p.peer)) consider(l.queue, l.peer);
  if (best_queue) {
    check_fingerprint(best->fingerprint, p, best_from);
    detail::TcpMessage m = std::move(*best);
    best_queue->erase(best);
    if (m.size == p.buffer.size() && m.size > 0) std::memcpy(p.buffer.data(), m.bytes.get(), m.size);
    received(p, m.size, best_from);
    return;
  }
  for (auto& l : links_) {
    if (l.peer == rank_ || !(any || l.peer == p.peer) || !l.in_frame) continue;
    if (l.frame.type != wire::FrameType::data || l.sink != Link::Sink::staging || l.frame.tag != p.tag) continue;
    check_fingerprint(l.frame.fingerprint, p, l.peer);
    p.adopted = &l;
    if (l.frame.payload_length == p.buffer.size()) {
      if (l.frame_done > 0) std::memcpy(p.buffer.data(), l.staging.get(), static_cast<std::size_t>(l.frame_done));
      l.sink = Link::Sink::user;
      l.user = p.buffer.data();
    } else {
      l.sink = Link::Sink::discard;
      p.wrong_size = true;
      p.message_size = l.frame.payload_length;
    }
    l.staging.reset();
    break;
  }
  posted_ = &p;
}

inline void Endpoint::check_size(const detail::TcpPosted& p) const {
  if (p.wrong_size)
    throw TransportError(who() + ": " + describe_op() + " expected " + std::to_string(p.buffer.size()) +
                         " bytes, the message" + (p.from != detail::tcp_nobody && op_.from == detail::tcp_nobody
                                                      ? " from rank " + std::to_string(p.from)
                                                      : std::string()) +
                         " has " + std::to_string(p.message_size));
}

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_ENDPOINTFRAMES_HPP_INCLUDED
