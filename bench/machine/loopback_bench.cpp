// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_loopback_bench: what loopback TCP itself carries between two processes on this machine,
// with no transport, framing or collective on top: the machine's side of any 2-rank allreduce over
// sockets (bench/allreduce_compare.py puts it next to them).
//
//   flotilla_loopback_bench [--sizes 4K,64M] [--methods stream,exchange,exchange-add,exchange-spin] [--repeat 5]
//                           [--write-quantum 256K] [--read-quantum 0]
//
// The program forks; the parent (rank 0) and the child (rank 1) talk through one TCP connection on
// 127.0.0.1. Methods, each timed per call of `bytes`:
//   stream        rank 0 writes `bytes`, rank 1 reads them: one direction only (what loopback
//                 TCP carries at best), until rank 1 has read the last byte;
//   exchange      both ranks write `bytes` and read `bytes` at once, one thread each, non-blocking,
//                 256 KiB written between reads (as the TCP transport does; --write-quantum, and
//                 --read-quantum caps each read, to try other slicings): the traffic of a
//                 2-rank allreduce (ring or swap: each rank sends and receives the whole buffer),
//                 with nothing else;
//   exchange-add  the same, adding each arriving piece into a float buffer as soon as it is read:
//                 the simplest complete 2-rank allreduce (a swap), its additions hidden as well as
//                 they can be. Checked once against the known sum before it is timed;
//   exchange-spin as exchange, but retrying the socket without ever sleeping in poll(): what a
//                 rank pays for being woken (TcpOptions::spin; Open MPI's TCP transport never
//                 sleeps while it waits).
// Bus bandwidth is bytes / time per call for all of them, the figure a 2-rank allreduce of `bytes`
// reports (2(N-1)/N = 1). One JSON line per measurement, shaped like the allreduce benchmarks'
// (label "loopback"), so bench/allreduce_compare.py can put it next to them. Linux/POSIX only.
#include <flotilla/cli/flags.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../allreduce/allreduce_common.hpp"
#include "../../examples/flag_help.hpp"

namespace {

/// How `exchange` slices its traffic: bytes written before the next read (256 KiB, as the TCP
/// transport), and the most one read takes (0: all that has arrived).
struct Slicing {
  std::size_t write_quantum = 256 * 1024;
  std::size_t read_quantum = 0;
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

/// Owns one socket descriptor.
struct Socket {
  int fd = -1;
  explicit Socket(int f) : fd(f) {
    if (fd < 0) fail("socket");
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("send");
    b += r;
    n -= static_cast<std::size_t>(r);
  }
}

void read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw std::runtime_error("recv: the other process closed the connection");
    if (r < 0) fail("recv");
    b += r;
    n -= static_cast<std::size_t>(r);
  }
}

/// Writes `out` and reads `in` at once (the socket blocks; each call here is MSG_DONTWAIT); with
/// `sum`, adds every complete float read into it as soon as it is read.
void exchange(int fd, const std::byte* out, std::byte* in, std::size_t bytes, float* sum, bool spin, Slicing slicing) {
  std::size_t sent = 0, got = 0, added = 0;
  while (sent < bytes || got < bytes) {
    pollfd p{fd, static_cast<short>((sent < bytes ? POLLOUT : 0) | (got < bytes ? POLLIN : 0)), 0};
    if (spin) p.revents = p.events;  // try both, never sleep
    else if (::poll(&p, 1, 10000) <= 0) fail("poll (no progress for 10 s)");
    if ((p.revents & POLLOUT) && sent < bytes) {
      const ssize_t r = ::send(fd, out + sent, std::min(slicing.write_quantum, bytes - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) sent += static_cast<std::size_t>(r);
      else if (r < 0 && errno != EAGAIN && errno != EINTR) fail("send");
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && got < bytes) {
      const std::size_t want = slicing.read_quantum ? std::min(slicing.read_quantum, bytes - got) : bytes - got;
      const ssize_t r = ::recv(fd, in + got, want, MSG_DONTWAIT);
      if (r > 0) got += static_cast<std::size_t>(r);
      else if (r == 0) throw std::runtime_error("recv: the other process closed the connection");
      else if (errno != EAGAIN && errno != EINTR) fail("recv");
      if (sum) {
        const std::size_t whole = got / sizeof(float);
        const auto* f = reinterpret_cast<const float*>(in);
        for (std::size_t i = added; i < whole; ++i) sum[i] += f[i];
        added = whole;
      }
    }
  }
}

// `check`: one exchange-add in which rank 1 sends 2.0f everywhere (it sends zeros otherwise, so
// that the timed sums never grow), for rank 0 to verify its sums.
enum class Mode : std::uint64_t { stop, stream, exchange, exchange_add, exchange_spin, check };

/// What a rank sends, receives and sums into, grown to the largest size asked for (zeros).
struct Buffers {
  Slicing slicing;
  std::vector<std::byte> out, in;
  std::vector<float> sum;
  void fit(std::size_t bytes) {
    if (out.size() < bytes) out.assign(bytes, std::byte{0}), in.assign(bytes, std::byte{0});
    if (sum.size() < bytes / sizeof(float)) sum.assign(bytes / sizeof(float), 0.0f);
  }
};

/// One batch: `iters` calls of `mode` with `bytes`, on either rank. Returns this rank's seconds.
double batch(int fd, int rank, Mode mode, std::size_t bytes, std::size_t iters, Buffers& b) {
  const bool add = mode == Mode::exchange_add || mode == Mode::check;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < iters; ++i) {
    if (mode == Mode::stream) {
      if (rank == 0) write_all(fd, b.out.data(), bytes);
      else read_all(fd, b.in.data(), bytes);
    } else {
      exchange(fd, b.out.data(), b.in.data(), bytes, add ? b.sum.data() : nullptr, mode == Mode::exchange_spin, b.slicing);
    }
  }
  if (mode == Mode::stream) {  // the writer's time ends when the reader has everything
    char ack = 1;
    if (rank == 0) read_all(fd, &ack, 1);
    else write_all(fd, &ack, 1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Sets the first `bytes` of `out` to floats of `value`.
void fill_floats(std::vector<std::byte>& out, std::size_t bytes, float value) {
  const std::vector<float> v(bytes / sizeof(float), value);
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
}

/// Rank 1: does what rank 0's control messages say until told to stop, answering each batch with
/// its time.
void follower(int fd, Slicing slicing) {
  Buffers b{slicing, {}, {}, {}};
  for (;;) {
    std::uint64_t msg[3];
    read_all(fd, msg, sizeof msg);
    const auto mode = static_cast<Mode>(msg[0]);
    if (mode == Mode::stop) return;
    const std::size_t bytes = msg[1], iters = msg[2];
    b.fit(bytes);
    if (mode == Mode::check) fill_floats(b.out, bytes, 2.0f);
    const double t = batch(fd, 1, mode, bytes, iters, b);
    if (mode == Mode::check) fill_floats(b.out, bytes, 0.0f);
    write_all(fd, &t, sizeof t);
  }
}

struct Leader {
  int fd;
  Buffers b;

  /// The slower rank's seconds per call.
  double time(Mode mode, std::size_t bytes, std::size_t iters) {
    const std::uint64_t msg[3] = {static_cast<std::uint64_t>(mode), bytes, iters};
    write_all(fd, msg, sizeof msg);
    b.fit(bytes);
    const double mine = batch(fd, 0, mode, bytes, iters, b);
    double theirs = 0;
    read_all(fd, &theirs, sizeof theirs);
    return std::max(mine, theirs) / static_cast<double>(iters);
  }
};

/// exchange-add must form the sum: sums of 1.0f here, plus the 2.0f that rank 1 sends, are 3.0f.
void check_sum(Leader& l) {
  const std::size_t bytes = 1 << 20;
  l.b.fit(bytes);
  std::fill(l.b.sum.begin(), l.b.sum.end(), 1.0f);
  l.time(Mode::check, bytes, 1);
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i)
    if (l.b.sum[i] != 3.0f)
      throw std::runtime_error("exchange-add formed a wrong sum at value " + std::to_string(i) + ": " +
                               std::to_string(l.b.sum[i]) + ", not 3");
  std::fill(l.b.sum.begin(), l.b.sum.end(), 0.0f);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_loopback_bench", "what loopback TCP carries between two processes");
    auto& sizes = flags.add<std::string>("sizes", "", "comma-separated bytes with K/M suffixes (default 4K..64M, powers of 4)");
    auto& methods = flags.add<std::string>("methods", "stream,exchange,exchange-add,exchange-spin",
                                           "stream, exchange, exchange-add, exchange-spin");
    auto& repeat = flags.add<std::size_t>("repeat", 5, example::flag_help::repeat);
    auto& target = flags.add<double>("target", 0.25, "seconds per measurement");
    auto& write_quantum = flags.add<std::string>("write-quantum", "256K", "exchange: bytes written before the next read");
    auto& read_quantum = flags.add<std::string>("read-quantum", "0", "exchange: most bytes one read takes (0: all there are)");
    if (!flags.parse(argc, argv, std::cout)) return 0;
    auto one_size = [](const std::string& flag, const std::string& text) {
      std::vector<std::size_t> v;
      try {
        v = bench::parse_sizes(text);
      } catch (const std::exception&) {
      }
      if (text.empty() || v.size() != 1) throw std::runtime_error("--" + flag + " takes one size (e.g. 64K), not '" + text + "'");
      return v[0];
    };
    const Slicing slicing{one_size("write-quantum", write_quantum), one_size("read-quantum", read_quantum)};
    if (slicing.write_quantum == 0) throw std::runtime_error("--write-quantum must be above 0");

    std::vector<std::pair<std::string, Mode>> chosen;
    for (const auto& [name, mode] : {std::pair<std::string, Mode>{"stream", Mode::stream},
                                     {"exchange", Mode::exchange}, {"exchange-add", Mode::exchange_add},
                                     {"exchange-spin", Mode::exchange_spin}})
      if (("," + methods + ",").find("," + name + ",") != std::string::npos) chosen.emplace_back(name, mode);
    if (chosen.empty()) throw std::runtime_error("--methods names none of stream, exchange, exchange-add, exchange-spin");
    const std::vector<std::size_t> list = bench::parse_sizes(sizes);

    Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind 127.0.0.1");
    if (::listen(listener.fd, 1) != 0) fail("listen");
    if (::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child < 0) fail("fork");
    const int one = 1;
    if (child == 0) {
      try {
        Socket s(::socket(AF_INET, SOCK_STREAM, 0));
        if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
        ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        follower(s.fd, slicing);
        ::_exit(0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "flotilla_loopback_bench (rank 1): %s\n", e.what());
        ::_exit(1);
      }
    }
    int status = 0;
    try {
      Socket s(::accept(listener.fd, nullptr, nullptr));
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Leader l{s.fd, {slicing, {}, {}, {}}};
      check_sum(l);
      // Calibrate each (size, method), then measure with repetitions outermost, as the allreduce
      // benchmarks do.
      std::vector<std::vector<std::size_t>> iters(list.size(), std::vector<std::size_t>(chosen.size()));
      for (std::size_t i = 0; i < list.size(); ++i)
        for (std::size_t k = 0; k < chosen.size(); ++k) {
          l.time(chosen[k].second, list[i], 3);
          std::size_t probe = 1;
          double t = l.time(chosen[k].second, list[i], probe);
          while (t * static_cast<double>(probe) < 0.02 && probe < 20000) t = l.time(chosen[k].second, list[i], probe *= 4);
          iters[i][k] = static_cast<std::size_t>(std::clamp(target / std::max(t, 1e-9), 3.0, 20000.0));
        }
      for (std::size_t r = 0; r < repeat; ++r)
        for (std::size_t i = 0; i < list.size(); ++i)
          for (std::size_t j = 0; j < chosen.size(); ++j) {
            const std::size_t k = (j + r) % chosen.size();
            const double t = l.time(chosen[k].second, list[i], iters[i][k]);
            std::printf("{\"label\":\"loopback\",\"method\":\"%s\",\"ranks\":2,\"bytes\":%zu,\"rep\":%zu,\"iters\":%zu,"
                        "\"seconds\":%.9f,\"bus_gbps\":%.6f}\n",
                        chosen[k].first.c_str(), list[i], r, iters[i][k], t, static_cast<double>(list[i]) / t / 1e9);
            std::fflush(stdout);
          }
      const std::uint64_t stop[3] = {static_cast<std::uint64_t>(Mode::stop), 0, 0};
      write_all(s.fd, stop, sizeof stop);
    } catch (...) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      throw;
    }
    if (::waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("rank 1 failed");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_loopback_bench: %s\n", e.what());
    return 1;
  }
}
