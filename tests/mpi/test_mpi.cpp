// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The MPI transport beyond the conformance suite: native allreduce, tags, coexistence with the
// program's own MPI calls, configuration errors, timeouts. Run under mpirun with any number of
// processes (CTest runs 1 to 4); each test case is collective.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/transport/mpi.hpp"

using namespace flotilla;
using transport::Mpi;
using Clock = std::chrono::steady_clock;

namespace {

std::size_t world_size() { return Mpi::launched_ranks(); }

std::size_t world_rank() {
  transport::mpi::detail::mpi_ensure_initialized();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return static_cast<std::size_t>(r);
}

Mpi::options options_with(std::chrono::milliseconds timeout) {
  Mpi::options o;
  o.timeout = timeout;
  return o;
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string text_of(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

/// Integer-valued, so that every partial sum is exact and the result does not depend on the order
/// in which the MPI library adds.
template <class T>
T value(std::size_t rank, std::size_t i) {
  return static_cast<T>(static_cast<double>((rank + 1) * (i % 1024)) - static_cast<double>(i % 3));
}

template <class T>
void check_allreduce(Mpi::endpoint& e, std::size_t count) {
  const std::size_t n = e.size();
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = value<T>(e.rank(), i);
  const TrafficCounters before = e.counters();
  e.allreduce_sum(std::span<T>(v));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    T expected = 0;
    for (std::size_t r = 0; r < n; ++r) expected += value<T>(r, i);
    if (v[i] != expected) ++wrong;
  }
  CAPTURE(count);
  CAPTURE(n);
  CHECK(wrong == 0);
  const TrafficCounters used = e.counters() - before;
  const std::uint64_t ring = count == 0 ? 0 : 2 * (n - 1) * count * sizeof(T) / n;
  CHECK(used.payload_bytes_sent == ring);
  CHECK(used.payload_bytes_received == ring);
  CHECK(used.header_bytes_sent == 0);
  CHECK(used.messages_sent == (count == 0 ? 0 : 2 * (n - 1)));
}

/// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("allreduce_sum adds exactly, in place, for 0, 1, 7 and 1M floats and doubles") {
  Mpi::run(options_with(std::chrono::seconds(60)), world_size(), [](Mpi::endpoint& e) {
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
      check_allreduce<float>(e, count);
      check_allreduce<double>(e, count);
    }
    // Collectives and point-to-point traffic interleave freely.
    const std::size_t right = (e.rank() + 1) % e.size(), left = (e.rank() + e.size() - 1) % e.size();
    std::vector<std::byte> in(3);
    e.sendrecv(right, 42, bytes_of("abc"), left, in);
    CHECK(text_of(in) == "abc");
    check_allreduce<float>(e, 1000);
    e.barrier();
  });
}

TEST_CASE("ranks_on_this_host counts the ranks that mpirun started on this machine") {
  static_assert(KnowsRanksOnHost<Mpi::endpoint>);
  Mpi::run(options_with(std::chrono::seconds(30)), world_size(), [](Mpi::endpoint& e) {
    CHECK(e.ranks_on_this_host() == e.size());  // the tests run every rank on this host
  });
}

TEST_CASE("reserved and user tags are kept apart, and the largest tags are carried") {
  Mpi::run(options_with(std::chrono::seconds(30)), world_size(), [](Mpi::endpoint& e) {
    const std::size_t right = (e.rank() + 1) % e.size(), left = (e.rank() + e.size() - 1) % e.size();
    CHECK(e.tag_upper_bound() >= 32767u);
    const Tag user = 5, reserved = tags::reserved_begin + 5;  // the same MPI tag, other communicators
    // A self-addressed pair when there is one rank: the sends are small enough to be buffered.
    e.send(right, user, bytes_of("user"));
    e.send(right, reserved, bytes_of("flotilla"));
    std::vector<std::byte> a(8), b(4);
    e.recv(left, reserved, a);
    e.recv(left, user, b);
    CHECK(text_of(a) == "flotilla");
    CHECK(text_of(b) == "user");

    const Tag highest_user = tags::reserved_begin - 1, highest = 0xffffffffu;
    std::vector<std::byte> c(2), d(2);
    e.sendrecv(right, highest_user, bytes_of("hi"), left, c);
    e.sendrecv(right, highest, bytes_of("HI"), left, d);
    CHECK(text_of(c) == "hi");
    CHECK(text_of(d) == "HI");
    e.barrier();
  });
}

TEST_CASE("tags above the MPI tag bound are folded: messages sharing an MPI tag are kept apart, in order") {
  Mpi::options o;
  o.timeout = std::chrono::seconds(30);
  o.max_mpi_tag = 0;  // every tag but 0 and reserved_begin is folded onto MPI tag 0
  Mpi::run(o, world_size(), [](Mpi::endpoint& e) {
    CHECK(e.tag_upper_bound() == 0);
    const std::size_t n = e.size(), right = (e.rank() + 1) % n, left = (e.rank() + n - 1) % n;
    const Tag reserved = tags::reserved_begin + 77;
    const TrafficCounters before = e.counters();
    // Three tags, two messages each, sent in one order and received in another: each receive
    // meets the others' messages first and sets them aside.
    for (const Tag tag : {Tag{10}, Tag{11}, reserved})
      for (int i = 0; i < 2; ++i) e.send(right, tag, bytes_of(std::to_string(tag) + "#" + std::to_string(i)));
    e.send(right, 0, bytes_of("direct"));  // tag 0 fits: not folded, no frame
    std::vector<std::byte> direct(6);
    e.recv(left, 0, direct);
    CHECK(text_of(direct) == "direct");
    for (const Tag tag : {reserved, Tag{11}, Tag{10}}) {
      for (int i = 0; i < 2; ++i) {
        const std::string expected = std::to_string(tag) + "#" + std::to_string(i);
        std::vector<std::byte> in(expected.size());
        e.recv(left, tag, in);
        CHECK(text_of(in) == expected);
      }
    }
    const TrafficCounters used = e.counters() - before;
    CHECK(used.messages_sent == 7);
    CHECK(used.messages_received == 7);
    CHECK(used.header_bytes_sent == 6 * 4);
    CHECK(used.header_bytes_received == 6 * 4);

    // A wrong-sized message that had been set aside is reported and consumed like any other.
    e.send(right, 21, bytes_of("12345678"));
    e.send(right, 20, bytes_of("x"));
    e.send(right, 21, bytes_of("abc"));
    std::vector<std::byte> x(1), wrong(16), abc(3);
    e.recv(left, 20, x);  // sets the first tag-21 message aside
    CHECK(text_of(x) == "x");
    CHECK_THROWS_WITH_AS(e.recv(left, 21, wrong), doctest::Contains("expected 16 bytes, the message has 8"),
                         TransportError);
    e.recv(left, 21, abc);
    CHECK(text_of(abc) == "abc");

    // recv_any finds set-aside messages too; a large folded message needs no copy of its own.
    std::vector<std::byte> big(3u << 20);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
    std::vector<std::byte> big_in(big.size()), small_in(5);
    e.sendrecv(right, 31, bytes_of("small"), left, small_in);  // to and from the neighbours
    CHECK(text_of(small_in) == "small");
    e.barrier();
    if (e.rank() == 0 && n > 1) {
      e.send(1, 41, bytes_of("first"));
      e.send(1, 40, big);
    } else if (e.rank() == 1) {
      CHECK(e.recv_any(40, big_in) == 0);  // meets the tag-41 message first
      CHECK(big_in == big);
      std::vector<std::byte> first(5);
      CHECK(e.recv_any(41, first) == 0);
      CHECK(text_of(first) == "first");
    }
    e.barrier();
  });
}

TEST_CASE("flotilla's messages never match the program's own MPI messages on MPI_COMM_WORLD") {
  const std::size_t n = world_size();
  if (n < 2) return;
  Mpi::run(options_with(std::chrono::seconds(30)), n, [](Mpi::endpoint& e) {
    if (e.rank() == 0) {
      const char user[] = "user";
      MPI_Send(user, 4, MPI_CHAR, 1, 5, MPI_COMM_WORLD);  // sent first, same peer, same tag
      e.send(1, 5, bytes_of("flotilla"));
    } else if (e.rank() == 1) {
      std::vector<std::byte> mine(8);
      e.recv(0, 5, mine);
      CHECK(text_of(mine) == "flotilla");
      char user[4];
      MPI_Recv(user, 4, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(std::string(user, 4) == "user");
    }
    e.barrier();
  });
}

TEST_CASE("a job started with the wrong number of processes is a ConfigError naming both counts; 0 takes it as launched") {
  const std::size_t n = world_size();
  const auto body = [](Mpi::endpoint&) { FAIL("the body must not run"); };
  CHECK_THROWS_WITH_AS(
      Mpi::run({}, n + 1, body),
      ("Mpi::run: the job needs " + std::to_string(n + 1) + " ranks, but it was started with " + std::to_string(n) +
       " MPI processes: start it with mpirun -n " + std::to_string(n + 1) + " (or the -n/-np option of your launcher)")
          .c_str(),
      ConfigError);
  // 0 ranks: the job as mpirun started it.
  std::size_t seen = 0;
  Mpi::run({}, 0, [&](Mpi::endpoint& e) { seen = e.size(); });
  CHECK(seen == n);
}

TEST_CASE("the timeout comes from FLOTILLA_TIMEOUT_MS unless set in the options") {
  {
    const ScopedEnv env("FLOTILLA_TIMEOUT_MS", nullptr);
    CHECK(Mpi::options{}.timeout == std::chrono::seconds(30));
  }
  {
    const ScopedEnv env("FLOTILLA_TIMEOUT_MS", "1234");
    CHECK(Mpi::options{}.timeout == std::chrono::milliseconds(1234));
  }
  for (const char* bad : {"12x", "0", "-5", "soon", " 7"}) {
    CAPTURE(bad);
    const ScopedEnv env("FLOTILLA_TIMEOUT_MS", bad);
    CHECK_THROWS_WITH_AS((void)Mpi::options{}, doctest::Contains("FLOTILLA_TIMEOUT_MS"), ConfigError);
  }
}

TEST_CASE("receives with no sender time out within the bound, naming rank, peer and operation") {
  const std::size_t n = world_size();
  // Only rank 0 waits in vain, with a short timeout; the others wait for it at a barrier.
  const auto short_timeout = std::chrono::milliseconds(200);
  const auto o = options_with(world_rank() == 0 ? short_timeout : std::chrono::seconds(30));
  Mpi::run(o, n, [&](Mpi::endpoint& e) {
    const std::size_t peer = n > 1 ? 1 : 0;
    const std::string who = "mpi rank 0 of " + std::to_string(n);
    if (e.rank() == 0) {
      std::vector<std::byte> buffer(4);
      auto started = Clock::now();
      CHECK_THROWS_WITH_AS(
          e.recv(peer, 9, buffer),
          (who + ": recv from rank " + std::to_string(peer) + " (tag 9) timed out after 200 ms (no message arrived from rank " +
           std::to_string(peer) + " on host " + e.host(peer) + ": it is stopped, hung, or waiting elsewhere)")
              .c_str(),
          TransportError);
      auto waited = Clock::now() - started;
      CHECK(waited >= short_timeout);
      CHECK(waited < short_timeout + std::chrono::seconds(2));

      started = Clock::now();
      CHECK_THROWS_WITH_AS(e.recv_any(9, buffer),
                           doctest::Contains((who + ": recv_any from any rank (tag 9) timed out after 200 ms (no message "
                                                    "arrived, waiting on ").c_str()),
                           TransportError);
      waited = Clock::now() - started;
      CHECK(waited >= short_timeout);
      CHECK(waited < short_timeout + std::chrono::seconds(2));

      // The send half completes (a small message is buffered); the receive half waits in vain.
      // (With one rank the pair is self-addressed, and the receive finds the send.)
      if (n > 1)
        CHECK_THROWS_WITH_AS(
            e.sendrecv(peer, 11, bytes_of("ping"), peer, buffer),
            (who + ": sendrecv to rank " + std::to_string(peer) + " and from rank " + std::to_string(peer) +
             " (tag 11) timed out after 200 ms (no message arrived from rank " + std::to_string(peer) + " on host " +
             e.host(peer) + ": it is stopped, hung, or waiting elsewhere)")
                .c_str(),
            TransportError);
    }
    // Nothing was in flight when those timed out: the endpoint is still usable.
    e.barrier();
    if (n > 1 && e.rank() == peer) {
      std::vector<std::byte> ping(4);
      e.recv(0, 11, ping);  // the message the timed-out sendrecv did send
      CHECK(text_of(ping) == "ping");
    }
    e.barrier();
  });
}

/// "rank 1", "ranks 1, 2", ...: every rank but 0, as a timeout of rank 0's names those it waited on.
static std::string ranks_but_0(std::size_t n) {
  std::string s = n == 2 ? "rank " : "ranks ";
  for (std::size_t r = 1; r < n; ++r) s += (r > 1 ? ", " : "") + std::to_string(r);
  return s;
}

TEST_CASE("a wait that times out with a transfer in flight leaves the endpoint unusable") {
  const std::size_t n = world_size();
  if (n < 2) return;
  // Rank 0 times out, alone, in operations the others join afterwards (over MPI_COMM_WORLD barriers),
  // so that MPI is left with nothing pending. One job (one endpoint) per operation.
  const auto o = options_with(world_rank() == 0 ? std::chrono::milliseconds(200) : std::chrono::seconds(30));
  const std::string who = "mpi rank 0 of " + std::to_string(n);

  SUBCASE("a send too large to be buffered, which its receiver has not posted") {
    // Static: MPI may touch a stranded operation's buffer until it completes, whenever that is.
    static const std::vector<std::byte> big(8u << 20, std::byte{7});
    Mpi::run(o, n, [&](Mpi::endpoint& e) {
      int stranded = 0;
      if (e.rank() == 0) {
        CHECK_THROWS_WITH_AS(
            e.send(1, 13, big),
            (who + ": send to rank 1 (tag 13) timed out after 200 ms (rank 1 on host " + e.host(1) +
             " did not receive it: it is stopped, hung, or waiting elsewhere)")
                .c_str(),
            TransportError);
        // MPI may have cancelled the send (the endpoint is fine) or not (it is unusable).
        stranded = e.usable() ? 0 : 1;
        if (stranded)
          CHECK_THROWS_WITH_AS(e.barrier(),
                               (who + ": barrier refused: the endpoint is unusable since send to rank 1 (tag 13) timed "
                                      "out with a transfer in flight")
                                   .c_str(),
                               TransportError);
      }
      MPI_Bcast(&stranded, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (e.rank() == 1 && stranded) {
        std::vector<std::byte> in(big.size());
        e.recv(0, 13, in);  // completes the stranded send: rank 0 drives it inside MPI_Barrier below
        CHECK(in == big);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    });
  }
  SUBCASE("an allreduce the others have not entered") {
    // Without abort_on_failure, allreduce_sum's timeout is a TransportError (with it, a watchdog
    // ends the job: tests/mpi/rank_failure.cpp).
    auto throwing = o;
    throwing.abort_on_failure = false;
    Mpi::run(throwing, n, [&](Mpi::endpoint& e) {
      std::vector<float> v(16, 1.0f);
      if (e.rank() == 0) {
        CHECK_THROWS_WITH_AS(
            e.allreduce_sum(v),
            (who + ": allreduce_sum of 16 values timed out after 200 ms (some rank did not take part: waiting on " +
             ranks_but_0(n) + " on host " + e.host(1) + ")")
                .c_str(),
            TransportError);
        CHECK_FALSE(e.usable());
        CHECK_THROWS_WITH_AS(
            e.barrier(), doctest::Contains("barrier refused: the endpoint is unusable since allreduce_sum timed out"),
            TransportError);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      // What rank 0 left pending is the barrier that opens every allreduce_sum (see mpi.hpp): the
      // others complete it with a barrier. (An allreduce_sum would go on into MPI_Allreduce, which
      // rank 0 never enters: hence MPI_Abort when a rank fails, by default.)
      if (e.rank() != 0) e.barrier();
      MPI_Barrier(MPI_COMM_WORLD);
    });
  }
  SUBCASE("a barrier the others have not entered") {
    Mpi::run(o, n, [&](Mpi::endpoint& e) {
      if (e.rank() == 0) {
        CHECK_THROWS_WITH_AS(e.barrier(),
                             (who + ": barrier timed out after 200 ms (some rank did not enter it: waiting on " +
                              ranks_but_0(n) + " on host " +
                              e.host(1) + ")")
                                 .c_str(),
                             TransportError);
        CHECK_FALSE(e.usable());
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (e.rank() != 0) e.barrier();  // completes rank 0's stranded barrier
      MPI_Barrier(MPI_COMM_WORLD);
    });
  }
}

TEST_CASE("peers outside the job are refused") {
  const std::size_t n = world_size();
  Mpi::run({}, n, [n](Mpi::endpoint& e) {
    const std::string tail = "there is no such rank, the job has " + std::to_string(n) + " ranks";
    CHECK_THROWS_WITH_AS(e.send(n, 1, {}),
                         doctest::Contains(("send to rank " + std::to_string(n) + " (tag 1): " + tail).c_str()),
                         TransportError);
    std::vector<std::byte> b(1);
    CHECK_THROWS_WITH_AS(e.recv(n + 3, 1, b), doctest::Contains(("recv from rank " + std::to_string(n + 3)).c_str()),
                         TransportError);
    CHECK_THROWS_WITH_AS(e.sendrecv(0, 1, {}, n, b), doctest::Contains(tail.c_str()), TransportError);
    e.barrier();
  });
}

TEST_CASE("with abort_on_failure off, or with one rank, run() rethrows the body's exception") {
  const std::size_t n = world_size();
  Mpi::options o;
  o.abort_on_failure = n == 1;  // with one rank, run() rethrows either way
  CHECK_THROWS_WITH_AS(
      Mpi::run(o, n, [](Mpi::endpoint& e) { throw std::runtime_error("rank " + std::to_string(e.rank()) + " broke"); }),
      ("rank " + std::to_string(world_rank()) + " broke").c_str(), std::runtime_error);
  // MPI is still usable afterwards: a second job in the same processes.
  Mpi::run({}, n, [](Mpi::endpoint& e) { e.barrier(); });
}

TEST_CASE("messages over 2 GiB, direct and folded (set FLOTILLA_MPI_LARGE_TESTS=1; needs about 5 GB of memory)") {
  const std::size_t n = world_size();
  if (n < 2 || std::getenv("FLOTILLA_MPI_LARGE_TESTS") == nullptr) return;
  for (const std::uint32_t max_mpi_tag : {0x7fffffffu, 0u}) {
    CAPTURE(max_mpi_tag);
    Mpi::options o = options_with(std::chrono::minutes(5));
    o.max_mpi_tag = max_mpi_tag;  // 0: tag 1 is folded, and the frame's datatype holds the big one
    Mpi::run(o, n, [](Mpi::endpoint& e) {
      const std::size_t size = (std::size_t{1} << 31) + 12345;  // above INT_MAX: derived datatype
      if (e.rank() == 0) {
        std::vector<std::byte> out(size);
        for (std::size_t i = 0; i < size; i += 4099) out[i] = static_cast<std::byte>(i / 4099);
        out.back() = std::byte{42};
        e.send(1, 1, out);
      } else if (e.rank() == 1) {
        std::vector<std::byte> in(size);
        e.recv(0, 1, in);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < size; i += 4099) wrong += in[i] != static_cast<std::byte>(i / 4099);
        CHECK(wrong == 0);
        CHECK(in.back() == std::byte{42});
        CHECK(e.counters().payload_bytes_received == size);
      }
      e.barrier();
    });
  }
}
