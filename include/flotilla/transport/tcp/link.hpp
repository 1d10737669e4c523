// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_LINK_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_LINK_HPP_INCLUDED
// A connection to one peer as the endpoint holds it (TcpLink: the socket, the frame being read,
// the messages that arrived before their receive), the heartbeats that a thread of its own sends on
// every link, and the small records of an operation in progress (a posted receive, a frame being
// written).
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/transport/tcp/crypto.hpp"
#include "flotilla/transport/tcp/socket.hpp"
#include "flotilla/transport/tcp/wire.hpp"

namespace flotilla::transport::tcp {

namespace detail {

inline constexpr std::size_t tcp_nobody = static_cast<std::size_t>(-1);

/// Bytes a link reads ahead into a buffer of its own: small frames are read whole, many at a time.
/// A payload whose rest is at least this large is read straight into its destination instead.
inline constexpr std::size_t tcp_read_buffer = 64 * 1024;

/// How long the reactor may see no progress on what an operation waits for before every link is
/// read, whatever it holds (see the design comment of transport/tcp.hpp): long enough that a ring
/// step's next message is not copied aside just because its neighbour was descheduled for a moment.
inline constexpr std::chrono::milliseconds tcp_stall{20};

/// How much sendrecv writes before it reads again (see Endpoint::drive_loop()). Measured on
/// loopback with 64 MiB messages (docs/benchmarks.md, "Allreduce bus bandwidth: TCP transport, Open
/// MPI, gloo"): 256 KiB gave more than writing all the socket takes (several MiB at a time); 64 KiB
/// was slower again (more system calls), 512 KiB to 1 MiB about the same.
inline constexpr std::size_t tcp_send_quantum = 256 * 1024;

/// The most one read takes of a payload that goes straight to its destination. Loopback carries
/// 64 KiB segments; a read of one segment copies it while it is still in cache and frees it at
/// once, where a read of all that has arrived (up to the several MiB of the socket's buffer) leaves
/// the later segments cold and the sender's window closed for longer. Measured between 2 ranks on
/// loopback against reads of everything, and against 16 to 128 KiB (docs/benchmarks.md, "TCP
/// transport: waiting and reading").
inline constexpr std::size_t tcp_read_quantum = 64 * 1024;

/// A message that arrived before its receive: held until a recv with its tag takes it.
struct TcpMessage {
  Tag tag = 0;
  std::unique_ptr<std::byte[]> bytes;
  std::size_t size = 0;
  std::uint64_t arrival = 0;  // order of arrival over all links, for recv_any
  std::uint64_t fingerprint = 0;  // the sender's operation (transport/operation.hpp)
};

/// What a link's writer shares with the heartbeat thread: the two write to one socket, whole frames
/// each, never one inside the other.
struct TcpSendGuard {
  std::mutex m;
  int fd = -1;              // the socket, while open
  bool beating = false;     // heartbeats go out (from the end of the handshake to the last frame)
  bool mid_frame = false;   // the endpoint has written part of a frame: a heartbeat would split it
  wire::HeaderBytes beat = [] {
    wire::Header h;
    h.type = wire::FrameType::heartbeat;
    return wire::encode(h);
  }();
  std::size_t beat_done = wire::header_size;  // below header_size: a heartbeat partly written

  /// Writes what is left of a heartbeat (with `m` held); false when the socket takes no more now.
  /// An error is left for the endpoint's next write to report.
  bool finish_beat() noexcept {
    while (beat_done < wire::header_size && fd >= 0) {
      const ssize_t r = ::send(fd, beat.data() + beat_done, wire::header_size - beat_done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r > 0) {
        beat_done += static_cast<std::size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;
      } else {
        beat_done = wire::header_size;
        return true;
      }
    }
    return true;
  }
};

/// The thread that sends every link's heartbeats, also while the rank's own thread computes (it
/// does not touch the endpoint, only the links' send guards).
class TcpHeartbeat {
 public:
  TcpHeartbeat(std::vector<std::shared_ptr<TcpSendGuard>> guards, std::chrono::milliseconds interval)
      : guards_(std::move(guards)), interval_(interval), thread_([this] { run(); }) {}
  TcpHeartbeat(const TcpHeartbeat&) = delete;
  TcpHeartbeat& operator=(const TcpHeartbeat&) = delete;
  ~TcpHeartbeat() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(m_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      for (const auto& g : guards_) {
        std::lock_guard gl(g->m);
        if (g->fd < 0 || !g->beating || g->mid_frame) continue;
        if (g->beat_done == wire::header_size) g->beat_done = 0;
        g->finish_beat();
      }
      lock.lock();
    }
  }

  std::vector<std::shared_ptr<TcpSendGuard>> guards_;
  std::chrono::milliseconds interval_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is ready
};

/// A connection to one peer, and the state of the frame being read from it.
struct TcpLink {
  explicit TcpLink(std::shared_ptr<TcpReactor> r) : reactor(std::move(r)), socket(reactor->io) {}

  std::shared_ptr<TcpReactor> reactor;  // first: it outlives the socket
  TcpSocket socket;
  // The reactor's waits on `socket` (see TcpEndpoint::drive): armed, and completed since last seen.
  bool read_armed = false, write_armed = false;
  bool read_fired = false;
  ErrorCode wait_error;
  // Data arrived that the operation in progress did not need: no read wait is armed (it would
  // complete at once) until the link has been read dry.
  bool parked = false;

  std::size_t peer = tcp_nobody;
  std::string address;  // host:port where the peer listens, for messages
  std::uint64_t send_sequence = 0;
  std::uint64_t recv_sequence = 0;
  bool send_broken = false;  // a frame was left half-written: the stream cannot carry another
  std::shared_ptr<TcpSendGuard> guard = std::make_shared<TcpSendGuard>();
  Clock::time_point heard{};  // when anything last arrived from the peer
  bool checksum = false;      // data frames sent on it carry a payload CRC (Options::checksum_data)
  // The keys of its frame tags, from the handshake (a job with a secret). Frames sent carry tags
  // when Options::frame_mac says so (mac_send), every one but heartbeats; frames received are
  // checked whenever there are keys (mac_receive), and must carry tags when this rank's
  // Options::frame_mac says so (mac_required).
  std::optional<wire::FrameKeys> keys;
  std::optional<FrameMac> mac_send, mac_receive;
  bool mac_required = false;
  bool tagged() const noexcept { return mac_send.has_value(); }
  /// The frame being read has a tag that has not been read whole yet.
  bool mac_due() const noexcept {
    return in_frame && (frame.flags & wire::header_flags::frame_tag) != 0 && mac_done < mac_in.size();
  }
  bool lost = false;          // the peer died or stalled (see TcpEndpoint::continue_without_lost_peers)

  std::unique_ptr<std::byte[]> buffer = std::make_unique_for_overwrite<std::byte[]>(tcp_read_buffer);
  std::size_t begin = 0, end = 0;  // unread bytes in `buffer`

  enum class Sink : std::uint8_t { staging, user, discard };
  bool in_frame = false;  // a header has been read, its payload has not (all)
  bool large = false;     // the last frame's payload was larger than `buffer`
  wire::Header frame{};
  wire::HeaderBytes frame_bytes{};  // as read: a frame tag covers them
  std::uint64_t frame_done = 0;  // payload bytes of `frame` read so far
  Sink sink = Sink::staging;
  std::byte* user = nullptr;              // Sink::user: the posted receive's buffer
  std::unique_ptr<std::byte[]> staging;   // Sink::staging: memory of the frame's own
  FrameMac::Tag mac_in{};                 // the frame's tag, as read after its payload
  std::size_t mac_done = 0;

  std::deque<TcpMessage> queue;           // data frames read, not yet received
  std::vector<std::uint64_t> tokens;      // barrier tokens read: epoch << 32 | round
  bool goodbye = false;                   // the peer has sent its last frame
  bool eof = false;                       // ... and closed its side (only after goodbye)

  bool open() const noexcept { return socket.is_open(); }
  void close() noexcept {
    {
      std::lock_guard lock(guard->m);  // the heartbeat thread must not write to a reused descriptor
      guard->fd = -1;
      guard->beating = false;
    }
    ErrorCode ec;
    socket.close(ec);  // cancels the armed waits
  }

  /// Arms the reactor's wait for `type` on the socket, unless it is armed already. The completion
  /// marks the link and counts an event (the handler holds no pointer but to the link, whose
  /// address the vector of links keeps, and to its reactor).
  void arm(asio::socket_base::wait_type type) {
    bool& armed = type == asio::socket_base::wait_write ? write_armed : read_armed;
    if (armed) return;
    armed = true;
    socket.async_wait(type, [this, type](const ErrorCode& ec) {
      (type == asio::socket_base::wait_write ? write_armed : read_armed) = false;
      if (ec == asio::error::operation_aborted) return;
      if (type != asio::socket_base::wait_write) read_fired = true;
      if (ec) wait_error = ec;
      ++reactor->events;
    });
  }
};

/// The listener a rank keeps after the rendezvous to accept a lost rank that restarted
/// (TcpEndpoint::accept_rejoins). On the heap: its wait's handler points at it, and the endpoint moves.
struct TcpRejoinListener {
  std::shared_ptr<TcpReactor> reactor;  // first: it outlives the acceptor
  Listener listener;
  bool armed = false, fired = false, failed = false;
  void arm() {
    if (armed || failed) return;
    armed = true;
    listener.acceptor.async_wait(asio::socket_base::wait_read, [this](const ErrorCode& ec) {
      armed = false;
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        failed = true;  // an acceptor that fails once would fail at every wait
      } else {
        fired = true;
      }
      ++reactor->events;
    });
  }
};

/// A receive in progress: recv (one peer), recv_any (peer == tcp_nobody) or sendrecv's half.
struct TcpPosted {
  std::size_t peer = tcp_nobody;
  Tag tag = 0;
  std::span<std::byte> buffer;
  bool done = false;
  std::size_t from = tcp_nobody;
  bool wrong_size = false;  // the message had another size: reported once it has been consumed
  std::uint64_t message_size = 0;
  TcpLink* adopted = nullptr;  // the link whose frame is being read for this receive
  std::uint64_t fingerprint = 0;  // this rank's operation on the tag when the receive was posted
};

/// A frame being written: header and payload, from the caller's memory, in one gather write.
struct TcpOutgoing {
  TcpLink* link = nullptr;
  wire::HeaderBytes header{};
  std::span<const std::byte> payload;
  FrameMac::Tag mac{};   // written after the payload when the link is tagged
  std::size_t mac_bytes = 0;
  std::size_t written = 0;
  std::size_t total() const noexcept { return wire::header_size + payload.size() + mac_bytes; }
  bool done() const noexcept { return written == total(); }
};

/// What the endpoint is doing, for error messages.
struct TcpOp {
  const char* name = "";
  std::size_t to = tcp_nobody, from = tcp_nobody;
  Tag tag = 0;
  bool tagged = false;
};

}  // namespace detail

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_LINK_HPP_INCLUDED
