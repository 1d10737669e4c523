// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_SOCKET_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_SOCKET_HPP_INCLUDED
// Socket plumbing for the TCP transport, through Boost.Asio: an io_context per endpoint (the
// reactor: epoll on Linux), TCP sockets and acceptors owned by it, host:port parsing and
// formatting, name resolution (ip::tcp::resolver), listening, accepting and connecting under a
// deadline, and a wait for one socket's readiness that ends by a deadline.
//
// How the transport uses Asio: every socket is in non-blocking mode (socket.non_blocking(true))
// and close-on-exec. Data moves with synchronous read_some/write_some calls, which then do one
// recvmsg/sendmsg each (sends with MSG_NOSIGNAL) and report error::would_block instead of waiting;
// a header and its payload go out as one 2-buffer gather write. Waiting is the io_context's job:
// socket.async_wait(wait_read / wait_write) arms the reactor for a socket, and run_one_until()
// runs it up to the operation's deadline. The endpoint (endpoint.hpp) keeps its waits armed across
// iterations and operations, so that a wait costs the reactor no more system calls than poll()
// did. Only waiting and connecting are asynchronous; no handler moves data, and everything runs
// on the caller's thread.
//
// Process plumbing for the launcher (launch.hpp: pipes, pidfd) stays POSIX: Fd below.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>  // first: Boost 1.74's Asio, in C++20 with GCC 12, uses std::exchange unincluded

// nvcc 13's front end cannot parse Boost.Asio's traits built on variable templates (it fails in
// traits/static_query.hpp), so a GPU model's Trainer over transport::Tcp would not compile. Asio's
// class-template fallback means the same. The flotilla::tcp CMake target defines this for every
// compiler, so that a program's .cu and .cpp files see one Asio; without CMake, define it yourself.
#if defined(__CUDACC__) && !defined(BOOST_ASIO_DISABLE_VARIABLE_TEMPLATES)
#error "flotilla/transport/tcp.hpp and tcp/*.hpp under nvcc needs BOOST_ASIO_DISABLE_VARIABLE_TEMPLATES defined for every file of the program (the flotilla::tcp CMake target does it)"
#endif

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::transport::tcp::detail {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;
using TcpSocket = asio::ip::tcp::socket;
using TcpAcceptor = asio::ip::tcp::acceptor;
using TcpEndpointAddress = asio::ip::tcp::endpoint;

inline std::string errno_text(int e) { return std::system_category().message(e); }

/// The errno value of an error from a socket call (Asio reports them in the system category);
/// -1 for the resolver's and Asio's own errors.
inline int errno_of(const ErrorCode& ec) noexcept {
  return ec.category() == boost::system::system_category() ? ec.value() : -1;
}
inline bool would_block(const ErrorCode& ec) noexcept {
  return ec == asio::error::would_block || ec == asio::error::try_again;
}

/// An owned file descriptor (a pipe end, a pidfd, a file); closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

/// Non-blocking (reads and writes report would_block instead of waiting) and close-on-exec (Asio
/// opens sockets without it: a rank's child process must not keep its connections open).
template <class Socket>
void prepare_socket(Socket& s) {
  ErrorCode ec;
  s.non_blocking(true, ec);
  const int fd = s.native_handle();
  const int fl = ec ? -1 : ::fcntl(fd, F_GETFD);
  if (ec || fl < 0 || ::fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
    throw TransportError("tcp: cannot make a socket non-blocking: " + (ec ? ec.message() : errno_text(errno)));
  // SIGPIPE: Asio sends with MSG_NOSIGNAL (SO_NOSIGPIPE where there is none), so a peer that has
  // gone is an error, never a signal.
}

/// TCP_NODELAY (a frame is written whole, with one call, so Nagle's delay would only add latency
/// to small messages and barriers), and the socket buffers when asked for. Buffer sizes must be set
/// before connect() or listen(): the TCP window scale is agreed in the handshake.
template <class Socket>
void tune_socket(Socket& s, std::size_t buffer_bytes) {
  ErrorCode ec;
  s.set_option(asio::ip::tcp::no_delay(true), ec);
  if (buffer_bytes > 0) {
    const int b = static_cast<int>(std::min<std::size_t>(buffer_bytes, 1u << 30));
    s.set_option(asio::socket_base::send_buffer_size(b), ec);
    s.set_option(asio::socket_base::receive_buffer_size(b), ec);
  }
}

/// TCP_NOTSENT_LOWAT (TcpOptions::unsent_limit_bytes; 0 keeps the kernel's): writes stop being
/// taken, and the socket reads as not writable, while this many bytes or more wait unsent. Set
/// after the handshake, whose small frames it does not concern. A kernel without it keeps its own.
template <class Socket>
void limit_unsent(Socket& s, std::size_t bytes) {
#ifdef TCP_NOTSENT_LOWAT
  if (bytes == 0) return;
  const int b = static_cast<int>(std::min<std::size_t>(bytes, 1u << 30));
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &b, sizeof b);
#else
  (void)s;
  (void)bytes;
#endif
}

/// One thread's reactor: the io_context that owns an endpoint's sockets, and a count of the
/// completed waits, which tells a waiting loop that something it armed has happened. Shared by
/// the endpoint and each of its links, so that it outlives every socket it owns.
struct TcpReactor {
  asio::io_context io{BOOST_ASIO_CONCURRENCY_HINT_1};
  std::uint64_t events = 0;
};

/// Runs `io`'s handlers until `done()` or `deadline`; false at the deadline (or when nothing is
/// left to wait for).
template <class Done>
bool run_until(asio::io_context& io, Done&& done, Clock::time_point deadline) {
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    if (io.run_one_until(deadline) == 0 && io.stopped()) return done();  // no wait is armed
  }
  return true;
}

/// Waits until `object` (a socket or an acceptor of `io`) is ready for `type` or `deadline`
/// passes; false on the deadline. An error ends the wait too: the next call on the object reports it.
template <class Waitable>
bool wait_ready(asio::io_context& io, Waitable& object, asio::socket_base::wait_type type, Clock::time_point deadline) {
  auto fired = std::make_shared<bool>(false);  // outlives this call if the wait is cancelled
  object.async_wait(type, [fired](const ErrorCode&) { *fired = true; });
  if (run_until(io, [&] { return *fired; }, deadline)) return true;
  ErrorCode ec;
  object.cancel(ec);
  return false;
}

// ---- addresses -------------------------------------------------------------------------------

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

/// "host:port", with brackets around an IPv6 address: "[::1]:29500".
inline std::string format_host_port(std::string_view host, std::uint16_t port) {
  // Appended piece by piece: `"[" + std::string(host)` trips GCC 12's -Wrestrict (bug 105329).
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string s;
  if (v6) s += '[';
  s += host;
  if (v6) s += ']';
  s += ':';
  s += std::to_string(port);
  return s;
}
inline std::string format_host_port(const HostPort& hp) { return format_host_port(hp.host, hp.port); }

/// Parses "host:port" or "[ipv6]:port"; empty on malformed text or a port outside 0..65535.
inline std::optional<HostPort> parse_host_port(std::string_view text) {
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return std::nullopt;
    hp.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (hp.host.empty() || port.empty() || port.size() > 5) return std::nullopt;
  unsigned v = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > 65535) return std::nullopt;
  hp.port = static_cast<std::uint16_t>(v);
  return hp;
}

/// An address that means "every interface": a listener there is reachable from other hosts, and
/// is not an address that a peer can connect to.
inline bool is_wildcard_host(std::string_view host) { return host == "0.0.0.0" || host == "::" || host == "*"; }

/// The numeric host and port of an endpoint.
inline HostPort host_port_of(const TcpEndpointAddress& e) {
  ErrorCode ec;
  std::string host = e.address().to_string(ec);
  if (ec) return {"?", 0};
  return {std::move(host), e.port()};
}
template <class Socket>
HostPort local_host_port(const Socket& s) {
  ErrorCode ec;
  const auto e = s.local_endpoint(ec);
  return ec ? HostPort{"?", 0} : host_port_of(e);
}
inline HostPort remote_host_port(const TcpSocket& s) {
  ErrorCode ec;
  const auto e = s.remote_endpoint(ec);
  return ec ? HostPort{"?", 0} : host_port_of(e);
}

/// Resolves `host` (a name or a numeric address; "*" for every interface) for TCP. `error` says
/// why when the result is empty; `resolve_error` is the resolver's error, so that callers can
/// retry a temporary failure (error::host_not_found_try_again).
inline std::vector<TcpEndpointAddress> resolve(asio::io_context& io, const std::string& host, std::uint16_t port,
                                               bool passive, ErrorCode* resolve_error, std::string* error) {
  asio::ip::tcp::resolver resolver(io);
  auto flags = asio::ip::resolver_base::numeric_service;
  if (passive) flags = flags | asio::ip::resolver_base::passive;
  ErrorCode ec;
  const auto results = resolver.resolve(host == "*" ? std::string() : host, std::to_string(port), flags, ec);
  if (resolve_error) *resolve_error = ec;
  std::vector<TcpEndpointAddress> out;
  if (ec) {
    if (error) *error = "cannot resolve '" + host + "': " + ec.message();
    return out;
  }
  for (const auto& r : results) out.push_back(r.endpoint());
  if (out.empty() && error) *error = "'" + host + "' has no TCP address";
  return out;
}

/// A listening socket on host:port (port 0: an ephemeral port), and the port it got.
struct Listener {
  TcpAcceptor acceptor;
  std::uint16_t port = 0;
};

/// Listens on host:port with `io`'s reactor. Throws TransportError starting with `context` on
/// failure.
inline Listener listen_on(asio::io_context& io, const std::string& host, std::uint16_t port, std::size_t buffer_bytes,
                          const std::string& context) {
  std::string error;
  const auto addrs = resolve(io, host, port, /*passive=*/true, nullptr, &error);
  if (addrs.empty()) throw TransportError(context + ": " + error);
  ErrorCode last;
  for (const auto& a : addrs) {
    TcpAcceptor acceptor(io);
    ErrorCode ec;
    acceptor.open(a.protocol(), ec);
    if (ec) {
      last = ec;
      continue;
    }
    prepare_socket(acceptor);
    // A coordinator restarted at once on its port must not fail on the last job's connections
    // in TIME_WAIT.
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    tune_socket(acceptor, buffer_bytes);  // inherited by accepted connections
    acceptor.bind(a, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      last = ec;
      continue;
    }
    const std::uint16_t got = local_host_port(acceptor).port;
    return Listener{std::move(acceptor), got};
  }
  throw TransportError(context + ": cannot listen on " + format_host_port(host, port) + ": " + last.message());
}

/// Accepts one pending connection, if any (the acceptor is non-blocking), as a socket of the
/// acceptor's io_context, prepared like every other.
inline std::optional<TcpSocket> accept_one(TcpAcceptor& acceptor) {
  for (;;) {
    TcpSocket s(acceptor.get_executor());
    ErrorCode ec;
    acceptor.accept(s, ec);
    if (!ec) {
      prepare_socket(s);
      return s;
    }
    if (ec == asio::error::interrupted || ec == asio::error::connection_aborted) continue;
    if (would_block(ec)) return std::nullopt;
    throw TransportError("tcp: accept failed: " + ec.message());
  }
}

/// Whether a connection attempt that failed with `ec` may succeed later: refused or unreachable
/// (the peer may not be listening yet). Anything else (a bad address family, no permission) will
/// not go away.
inline bool connect_retryable(const ErrorCode& ec) noexcept {
  const int e = errno_of(ec);
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH || e == ECONNRESET ||
         e == EAGAIN || e == ECONNABORTED || e == EADDRNOTAVAIL;
}

/// Connects to host:port with `io`'s reactor, retrying while the peer is not (yet) listening or
/// reachable, until `deadline`. Returns a connected, non-blocking, tuned socket; throws
/// TransportError starting with `context`, naming the address and the last error, when the
/// deadline passes, at once for a name that does not exist.
inline TcpSocket connect_to(asio::io_context& io, const HostPort& to, Clock::time_point deadline,
                            std::size_t buffer_bytes, const std::string& context) {
  std::string last = "no attempt was made";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    ErrorCode resolve_error;
    std::string error;
    const auto addrs = resolve(io, to.host, to.port, /*passive=*/false, &resolve_error, &error);
    if (addrs.empty()) {
      // A name that does not exist will not come to exist: only a temporary failure is retried.
      if (resolve_error != asio::error::host_not_found_try_again) throw TransportError(context + ": " + error);
      last = error;
    }
    for (const auto& a : addrs) {
      TcpSocket s(io);
      ErrorCode ec;
      s.open(a.protocol(), ec);
      if (ec) throw TransportError(context + ": cannot create a socket: " + ec.message());
      prepare_socket(s);
      tune_socket(s, buffer_bytes);
      // The result outlives this attempt: a connect cancelled at the deadline completes later.
      auto result = std::make_shared<std::optional<ErrorCode>>();
      s.async_connect(a, [result](const ErrorCode& e) { *result = e; });
      if (!run_until(io, [&] { return result->has_value(); }, deadline)) {
        last = "the connection attempt timed out";
        continue;  // closing `s` cancels the attempt
      }
      ec = **result;
      if (!ec) return s;
      last = ec.message();
      if (!connect_retryable(ec)) throw TransportError(context + ": cannot connect to " + format_host_port(to) + ": " + last);
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
  throw TransportError(context + ": cannot connect to " + format_host_port(to) + ": " + last);
}

}  // namespace flotilla::transport::tcp::detail
#endif  // FLOTILLA_TRANSPORT_TCP_SOCKET_HPP_INCLUDED
