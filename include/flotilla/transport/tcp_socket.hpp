#pragma once
// POSIX socket plumbing for the TCP transport and its launcher: an owning socket handle, host:port
// parsing and formatting, listening, and connecting with retries under a deadline. Every socket is
// non-blocking and close-on-exec; every wait is a poll() bounded by a deadline, so that nothing here
// can hang.
//
// Plain POSIX rather than Boost.Asio: the transport needs exactly non-blocking sockets, a gather
// write and poll() against a deadline, and writes them with one system call each; an event loop
// and completion handlers would add a dependency and a layer between it and the kernel, and
// nothing it needs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::transport::detail {

using Clock = std::chrono::steady_clock;

inline std::string errno_text(int e) { return std::system_category().message(e); }

/// Milliseconds from now to `deadline` for poll(): at least 0, rounded up so that a wait never
/// ends a hair early and spins, at most a day.
inline int poll_ms(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 86'400'000));
}

/// An owned file descriptor (a socket, a pipe end); closed on destruction.
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

inline void set_flags(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
    throw TransportError("tcp: cannot make a socket non-blocking: " + errno_text(errno));
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
  // Where send() has no MSG_NOSIGNAL (macOS), the socket itself must not raise SIGPIPE.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
}

/// Flags for send()/sendmsg(): a peer that has gone must be an error, not SIGPIPE killing us.
inline constexpr int send_flags =
#ifdef MSG_NOSIGNAL
    MSG_NOSIGNAL;
#else
    0;
#endif

/// TCP_NODELAY (a frame is written whole, with one call, so Nagle's delay would only add latency
/// to small messages and barriers), and the socket buffers when asked for. Buffer sizes must be set
/// before connect() or listen(): the TCP window scale is agreed in the handshake.
inline void tune_socket(int fd, std::size_t buffer_bytes) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    const int b = static_cast<int>(std::min<std::size_t>(buffer_bytes, 1u << 30));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
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

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const noexcept { return storage.ss_family; }
};

/// The numeric host and port of a socket address.
inline HostPort numeric_host_port(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return {"?", 0};
  return {host, static_cast<std::uint16_t>(std::strtoul(serv, nullptr, 10))};
}

inline HostPort local_host_port(int fd) {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return {"?", 0};
  return numeric_host_port(a.get(), a.length);
}
inline HostPort remote_host_port(int fd) {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return {"?", 0};
  return numeric_host_port(a.get(), a.length);
}

/// Resolves `host` (a name or a numeric address; "*" for every interface) for TCP. `error` says
/// why when the result is empty. EAI_AGAIN is reported as such so that callers can retry.
inline std::vector<SocketAddress> resolve(const std::string& host, std::uint16_t port, bool passive, int* gai_error,
                                          std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const char* node = host == "*" ? nullptr : host.c_str();
  const int rc = ::getaddrinfo(node, service.c_str(), &hints, &list);
  if (gai_error) *gai_error = rc;
  std::vector<SocketAddress> out;
  if (rc != 0) {
    if (error) *error = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* p = list; p; p = p->ai_next) {
    if (p->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress a;
    std::memcpy(&a.storage, p->ai_addr, p->ai_addrlen);
    a.length = static_cast<socklen_t>(p->ai_addrlen);
    out.push_back(a);
  }
  ::freeaddrinfo(list);
  if (out.empty() && error) *error = "'" + host + "' has no TCP address";
  return out;
}

/// A listening socket on host:port (port 0: an ephemeral port), and the port it got. Throws
/// TransportError starting with `context` on failure.
struct Listener {
  Fd fd;
  std::uint16_t port = 0;
};

inline Listener listen_on(const std::string& host, std::uint16_t port, std::size_t buffer_bytes, const std::string& context) {
  std::string error;
  const auto addrs = resolve(host, port, /*passive=*/true, nullptr, &error);
  if (addrs.empty()) throw TransportError(context + ": " + error);
  int last = 0;
  for (const auto& a : addrs) {
    Fd fd(::socket(a.family(), SOCK_STREAM, IPPROTO_TCP));
    if (!fd) {
      last = errno;
      continue;
    }
    set_flags(fd.get());
    // A coordinator restarted at once on its port must not fail on the last job's connections
    // in TIME_WAIT.
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    tune_socket(fd.get(), buffer_bytes);  // inherited by accepted connections
    if (::bind(fd.get(), a.get(), a.length) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last = errno;
      continue;
    }
    Listener l;
    l.port = local_host_port(fd.get()).port;
    l.fd = std::move(fd);
    return l;
  }
  throw TransportError(context + ": cannot listen on " + format_host_port(host, port) + ": " + errno_text(last));
}

/// Accepts one pending connection, if any (the listener is non-blocking).
inline Fd accept_one(int listener) {
  for (;;) {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd >= 0) {
      Fd f(fd);
      set_flags(fd);
      return f;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Fd();
    throw TransportError("tcp: accept failed: " + errno_text(errno));
  }
}

/// Waits until `fd` is ready for `events` or `deadline` passes; false on the deadline.
inline bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, poll_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) throw TransportError("tcp: poll failed: " + errno_text(errno));
  }
}

/// Connects to host:port, retrying while the peer is not (yet) listening or reachable, until
/// `deadline`. Returns a connected, non-blocking, tuned socket; throws TransportError starting with
/// `context`, naming the address and the last error, when the deadline passes.
inline Fd connect_to(const HostPort& to, Clock::time_point deadline, std::size_t buffer_bytes, const std::string& context) {
  std::string last = "no attempt was made";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    int gai = 0;
    std::string error;
    const auto addrs = resolve(to.host, to.port, /*passive=*/false, &gai, &error);
    if (addrs.empty()) {
      // A name that does not exist will not come to exist: only a temporary failure is retried.
      if (gai != EAI_AGAIN) throw TransportError(context + ": " + error);
      last = error;
    }
    for (const auto& a : addrs) {
      Fd fd(::socket(a.family(), SOCK_STREAM, IPPROTO_TCP));
      if (!fd) throw TransportError(context + ": cannot create a socket: " + errno_text(errno));
      set_flags(fd.get());
      tune_socket(fd.get(), buffer_bytes);
      int err = 0;
      if (::connect(fd.get(), a.get(), a.length) != 0) {
        err = errno;
        if (err == EINPROGRESS || err == EINTR) {
          if (!wait_fd(fd.get(), POLLOUT, deadline)) {
            last = "the connection attempt timed out";
            continue;
          }
          socklen_t len = sizeof err;
          if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
      if (err == 0) return fd;
      last = errno_text(err);
      // Refused or unreachable: the peer may not be listening yet; try again until the deadline.
      // Anything else (a bad address family, no permission) will not go away.
      if (err != ECONNREFUSED && err != ETIMEDOUT && err != ENETUNREACH && err != EHOSTUNREACH && err != ECONNRESET &&
          err != EAGAIN && err != ECONNABORTED && err != EADDRNOTAVAIL)
        throw TransportError(context + ": cannot connect to " + format_host_port(to) + ": " + last);
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
  throw TransportError(context + ": cannot connect to " + format_host_port(to) + ": " + last);
}

}  // namespace flotilla::transport::detail
