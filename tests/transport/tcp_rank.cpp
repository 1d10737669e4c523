// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// One rank of the TCP transport's multi-process tests, started by flotilla-launch (or launch()).
// What it does is chosen by its first argument:
//
//   conformance           the transport conformance suite (flotilla/testing/transport_conformance.hpp);
//                         then rank 0 prints "job of N ranks" (a failure: "failed: <why>")
//   exit K S              no transport: rank K exits with status S at once, the others sleep (the
//                         launcher must stop them)
//   fail K                rank K's body throws "rank K broke"; the others wait for a message from K
//                         and must fail at once with that reason
//   kill K                rank K kills itself (SIGKILL) in the middle of the job; rank 0 waits for a
//                         message from K, the others for one from rank 0: all must fail at once
//                         with an error naming rank K
//   stall K               as kill, but rank K stops itself (SIGSTOP): its connections stay open, only
//                         its heartbeats stop; the others must fail within the stall limit naming it
//   timeout MS            rank 0, with a timeout of MS ms, receives from rank 1, which never sends
//                         (it waits in a barrier): the receive must fail after MS, not much later
//   print                 prints two lines to stdout, one to stderr, and a last line without newline
//   free-port             prints a free loopback port (no transport), for a job started without
//                         flotilla-launch (check_launcher_job.cmake)
//   ring-bytes FLOATS R   R ring allreduces of FLOATS floats (collective::ring_allreduce, fp32);
//                         prints "payload bytes sent B" (flotilla's count) and checks the sums
//   link-down K           after a barrier, every rank waits for a message from rank K (rank K from
//                         rank 0) that never comes, while the driver takes K's link down
//                         (tests/cluster/link_down.sh); each prints "caught at <ms since the epoch>"
//
// It exits 0 when what happened is what should have; otherwise it prints why and exits 1. The
// failure modes print "caught after <ms> ms: <message>" for the test driver to check.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/testing/transport_conformance.hpp"
#include "flotilla/transport/tcp.hpp"

namespace {

using flotilla::TransportError;
using flotilla::transport::Tcp;
using flotilla::transport::TcpEndpoint;
using flotilla::transport::TcpOptions;
using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

std::size_t arg(int argc, char** argv, int i) {
  if (i >= argc) throw std::runtime_error("tcp_rank: missing argument " + std::to_string(i));
  return static_cast<std::size_t>(std::stoul(argv[i]));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "free-port") {
      std::printf("%u\n", static_cast<unsigned>(flotilla::transport::tcp::pick_free_port()));
      return 0;
    }
    const TcpOptions o = TcpOptions::from_environment();

    const std::size_t rank = o.rank;
    if (mode == "conformance") {
      try {
        Tcp::run(o, o.world_size, [](TcpEndpoint& e) { flotilla::testing::transport_conformance(e); });
      } catch (const TransportError& err) {
        std::printf("failed: %s\n", err.what());
        return 3;
      }
      if (o.rank == 0) std::printf("job of %zu ranks\n", o.world_size);
      return 0;
    }
    if (mode == "exit") {
      const std::size_t k = arg(argc, argv, 2);
      const int status = static_cast<int>(arg(argc, argv, 3));
      if (rank == k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return status;
      }
      std::printf("pid %ld sleeping\n", static_cast<long>(::getpid()));
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      std::printf("not stopped\n");
      return 1;
    }
    if (mode == "fail" || mode == "kill" || mode == "stall") {
      const std::size_t k = arg(argc, argv, 2);
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        e.barrier();
        if (rank == k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (mode == "kill") ::raise(SIGKILL);
          if (mode == "stall") {
            ::raise(SIGSTOP);  // the launcher's timeout ends it
            return;
          }
          throw std::runtime_error("rank " + std::to_string(k) + " broke");
        }
        std::vector<std::byte> b(64);
        const auto t0 = Clock::now();
        try {
          e.recv(rank == 0 ? k : 0, 5, b);
        } catch (const TransportError& err) {
          std::printf("caught after %lld ms: %s\n", ms_since(t0), err.what());
          std::fflush(stdout);
          throw;
        }
      });
      std::printf("rank %zu: the receive returned\n", rank);
      return 1;
    }
    if (mode == "ring-bytes") {
      const std::size_t floats = arg(argc, argv, 2), reps = arg(argc, argv, 3);
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        std::vector<float> data(floats);
        e.barrier();
        const auto before = e.counters().payload_bytes_sent;
        for (std::size_t k = 0; k < reps; ++k) {
          std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
          flotilla::collective::ring_allreduce<flotilla::codec::Fp32>(e, std::span<float>(data));
        }
        const auto sent = e.counters().payload_bytes_sent - before;
        const float want = static_cast<float>(o.world_size * (o.world_size + 1) / 2);
        for (float x : data)
          if (x != want) throw std::runtime_error("wrong sum " + std::to_string(x) + ", expected " + std::to_string(want));
        e.barrier();
        std::printf("payload bytes sent %llu\n", static_cast<unsigned long long>(sent));
      });
      return 0;
    }
    if (mode == "link-down") {
      const std::size_t k = arg(argc, argv, 2);
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        e.barrier();
        std::printf("past the barrier\n");
        std::fflush(stdout);
        std::vector<std::byte> b(64);
        try {
          e.recv(rank == k ? 0 : k, 5, b);
        } catch (const TransportError& err) {
          const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
          std::printf("caught at %lld ms: %s\n", static_cast<long long>(now.count()), err.what());
          std::fflush(stdout);
          throw;
        }
      });
      return 1;
    }
    if (mode == "late") {
      // Rank k joins the rendezvous `ms` milliseconds after the others.
      const std::size_t k = arg(argc, argv, 2);
      if (rank == k) std::this_thread::sleep_for(std::chrono::milliseconds(arg(argc, argv, 3)));
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) { e.barrier(); });
      if (rank == k) std::printf("rank %zu joined late\n", rank);
      return 0;
    }
    if (mode == "print-secret") {  // the secret this rank would use
      std::printf("secret: %s\n", o.secret.empty() ? "(none)" : o.secret.c_str());
      return 0;
    }
    if (mode == "survive-stall") {
      // Rank k stops (SIGSTOP) after a barrier; the others go on without it, as the asynchronous
      // servers of a parameter-server job do: each waits for it, learns it is lost, and finishes.
      const std::size_t k = arg(argc, argv, 2);
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        e.continue_without_lost_peers(true);
        e.barrier();
        if (rank == k) {
          ::raise(SIGSTOP);
          return;
        }
        std::vector<std::byte> b(64);
        const auto t0 = Clock::now();
        try {
          e.recv(k, 5, b);
          throw std::runtime_error("the receive from the stopped rank returned");
        } catch (const flotilla::PeerLostError& err) {
          std::printf("went on without rank %zu after %lld ms: %s\n", err.peer(), ms_since(t0), err.what());
          std::fflush(stdout);
        }
      });
      return 0;
    }
    if (mode == "timeout") {
      TcpOptions o0 = o;
      if (rank == 0) o0.timeout = std::chrono::milliseconds(arg(argc, argv, 2));
      Tcp::run(o0, o.world_size, [&](TcpEndpoint& e) {
        // The others wait in a barrier, which rank 0 joins once its receive has timed out: a rank
        // that had finished would say goodbye, and the receive would fail at once, rightly.
        if (rank != 0) return e.barrier();
        std::vector<std::byte> b(4);
        const auto t0 = Clock::now();
        try {
          e.recv(1, 9, b);
        } catch (const TransportError& err) {
          const long long ms = ms_since(t0);
          std::printf("caught after %lld ms: %s\n", ms, err.what());
          const std::string m = err.what();
          const bool named = m.find("tcp rank 0 of 2") != std::string::npos &&
                             m.find("recv from rank 1 at 127.0.0.1:") != std::string::npos &&
                             m.find("timed out after " + std::to_string(o0.timeout.count()) + " ms") != std::string::npos;
          if (!named || ms < o0.timeout.count() || ms > o0.timeout.count() + 1500) throw std::runtime_error("wrong timeout");
          e.set_timeout(std::chrono::seconds(30));  // the barrier and the shutdown need not hurry
          return e.barrier();
        }
        throw std::runtime_error("the receive returned");
      });
      return 0;
    }
    if (mode == "shared-memory") {
      // Run with FLOTILLA_SHARED_MEMORY set to a small capacity, so that large sums go in pieces.
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        const std::size_t n = e.size(), capacity = o.shared_memory_bytes;
        if (!e.shared_memory_active() || e.native_allreduce_max_bytes() != std::numeric_limits<std::size_t>::max())
          throw std::runtime_error("shared memory is off");
        if (rank == 0) {  // rank 0 named the segment after its pid, and removed the name once all had mapped it
          const std::string prefix = "flotilla-" + std::to_string(::getpid()) + "-";
          for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
            if (entry.path().filename().string().starts_with(prefix))
              throw std::runtime_error("the segment's name outlived the setup: " + entry.path().string());
        }
        auto input = [](std::size_t r, std::size_t i, std::size_t call) {
          return static_cast<float>(static_cast<int>((r * 37 + i * 11 + call) % 201) - 100);
        };
        const auto before = e.counters();
        const std::size_t per_slot = capacity / sizeof(float);
        std::size_t call = 0, summed_values = 0;
        for (std::size_t round = 0; round < 40; ++round) {
          // Fewer values than ranks, not divisible by the ranks, exactly the capacity, several pieces.
          for (std::size_t values : {std::size_t{1}, n + 1, std::size_t{1000}, per_slot, 3 * per_slot + 5}) {
            std::vector<float> v(values), expected(values, 0.0f);
            for (std::size_t i = 0; i < values; ++i) {
              v[i] = input(rank, i, call);
              for (std::size_t r = 0; r < n; ++r) expected[i] += input(r, i, call);  // exact: small integers
            }
            e.allreduce_sum(v);
            if (std::memcmp(v.data(), expected.data(), values * sizeof(float)) != 0)
              throw std::runtime_error("wrong sum of " + std::to_string(values) + " values in call " + std::to_string(call));
            ++call;
            summed_values += values;
          }
        }
        // The bytes through shared memory against the ring's theory: summed over the ranks, 2(N-1)
        // times the bytes summed, each way (TrafficCounters::shared_memory_bytes_*); two ranks
        // each read all of the other's.
        {
          const auto moved = e.counters() - before;
          const std::uint64_t mine[2] = {moved.shared_memory_bytes_sent, moved.shared_memory_bytes_received};
          const std::uint64_t theory = 2 * (n - 1) * summed_values * sizeof(float);
          if (n == 2 && (mine[0] != theory / 2 || mine[1] != theory / 2))
            throw std::runtime_error("rank " + std::to_string(rank) + " counted " + std::to_string(mine[0]) + " bytes sent and " +
                                     std::to_string(mine[1]) + " received through shared memory, expected " +
                                     std::to_string(theory / 2) + " each");
          if (rank == 0) {
            std::uint64_t total[2] = {mine[0], mine[1]}, theirs[2];
            for (std::size_t r = 1; r < n; ++r) {
              e.recv(r, 8, std::as_writable_bytes(std::span<std::uint64_t>(theirs)));
              total[0] += theirs[0], total[1] += theirs[1];
            }
            if (total[0] != theory || total[1] != theory)
              throw std::runtime_error("the ranks counted " + std::to_string(total[0]) + " bytes sent and " +
                                       std::to_string(total[1]) + " received through shared memory, expected " +
                                       std::to_string(theory) + " each");
          } else {
            e.send(0, 8, std::as_bytes(std::span<const std::uint64_t>(mine)));
          }
        }
        const auto wire_before = e.counters().payload_bytes_sent;  // (the exchange above used the wire)
        // ring_allreduce takes this path at every size: nothing of it went on the wire.
        std::vector<float> small(per_slot, 1.0f), large(5 * per_slot + 1, 1.0f);
        flotilla::collective::ring_allreduce<flotilla::codec::Fp32>(e, std::span<float>(small));
        flotilla::collective::ring_allreduce<flotilla::codec::Fp32>(e, std::span<float>(large));
        if (e.counters().payload_bytes_sent != wire_before) throw std::runtime_error("bytes went on the wire");
        for (float x : small)
          if (x != static_cast<float>(n)) throw std::runtime_error("wrong sum through ring_allreduce");
        for (float x : large)
          if (x != static_cast<float>(n)) throw std::runtime_error("wrong sum through ring_allreduce in pieces");
        // Sums that round: every rank ends with the same bits (each chunk is formed by one rank and
        // copied by the others), and within float rounding of the sum in double.
        for (std::size_t values : {per_slot - 3, 2 * per_slot + 7}) {
          std::vector<float> v(values);
          std::vector<double> exact(values, 0.0);
          for (std::size_t i = 0; i < values; ++i) {
            v[i] = 1.0f / static_cast<float>(i + 3 * rank + 1);
            for (std::size_t r = 0; r < n; ++r) exact[i] += 1.0f / static_cast<float>(i + 3 * r + 1);
          }
          e.allreduce_sum(v);
          for (std::size_t i = 0; i < values; ++i)
            if (std::abs(v[i] - exact[i]) > 1e-6 * std::abs(exact[i]))
              throw std::runtime_error("inexact sum of value " + std::to_string(i) + " of " + std::to_string(values));
          const auto bytes = std::as_bytes(std::span<const float>(v));
          if (rank == 0) {
            std::vector<std::byte> theirs(bytes.size());
            for (std::size_t r = 1; r < n; ++r) {
              e.recv(r, 7, theirs);
              if (std::memcmp(theirs.data(), bytes.data(), bytes.size()) != 0)
                throw std::runtime_error("rank " + std::to_string(r) + " ended with other bits than rank 0");
            }
          } else {
            e.send(0, 7, bytes);
          }
        }
        std::printf("rank %zu: %zu shared-memory sums correct\n", rank, call);
      });
      return 0;
    }
    if (mode == "shared-memory-expect") {
      // Whether the job chose the shared-memory path (argument 1: it must, 0: it must not), and
      // that a float ring_allreduce then moves no payload bytes, or 2 (N-1)/N of them.
      const bool expected = arg(argc, argv, 2) != 0;
      Tcp::run(o, o.world_size, [&](TcpEndpoint& e) {
        // The setup's messages are counted as framing, like the rest of the rendezvous.
        if (e.counters().payload_bytes_sent != 0 || e.counters().messages_sent != 0)
          throw std::runtime_error("the shared-memory setup counted as payload");
        if (e.shared_memory_active() != expected)
          throw std::runtime_error(std::string("the shared-memory path is ") + (expected ? "off" : "on"));
        // Every rank of a flotilla-launch job runs on this host, over loopback.
        if (e.ranks_on_this_host() != e.size())
          throw std::runtime_error("ranks_on_this_host() is " + std::to_string(e.ranks_on_this_host()) + ", not " +
                                   std::to_string(e.size()));
        const std::size_t n = e.size(), count = 6000;
        std::vector<float> v(count, static_cast<float>(rank + 1));
        const auto before = e.counters().payload_bytes_sent;
        flotilla::collective::ring_allreduce<flotilla::codec::Fp32>(e, std::span<float>(v));
        const auto sent = e.counters().payload_bytes_sent - before;
        for (float x : v)
          if (x != static_cast<float>(n * (n + 1) / 2)) throw std::runtime_error("wrong sum");
        if (expected ? sent != 0 : sent == 0)
          throw std::runtime_error("ring_allreduce sent " + std::to_string(sent) + " payload bytes");
        std::printf("rank %zu: shared memory %s, %llu payload bytes sent\n", rank, expected ? "on" : "off",
                    static_cast<unsigned long long>(sent));
      });
      return 0;
    }
    if (mode == "shared-memory-kill" || mode == "shared-memory-stall" || mode == "shared-memory-mismatch") {
      // kill: rank k dies (SIGKILL) in the middle of a run of sums; the others must fail at once,
      // naming it. stall: rank k stops (SIGSTOP) there instead; the others must name it once it
      // has been silent for the stall limit (the launcher's timeout ends it). mismatch: rank k asks for twice the capacity (argument 1) or turns the path off
      // (argument 0) while the others require it; every rank must refuse the setup.
      const std::size_t k = arg(argc, argv, 2);
      TcpOptions mine = o;
      if (mode == "shared-memory-mismatch" && rank == k) {
        if (arg(argc, argv, 3) == 0) mine.shared_memory = flotilla::transport::TcpSharedMemory::off;
        else mine.shared_memory_bytes *= 2;
      }
      try {
        Tcp::run(mine, o.world_size, [&](TcpEndpoint& e) {
          std::vector<float> v(1000, 1.0f);
          for (std::size_t call = 0;; ++call) {
            if (rank == k && call == 500) ::raise(mode == "shared-memory-stall" ? SIGSTOP : SIGKILL);
            const auto t0 = Clock::now();
            try {
              // The endpoint's own sum on one host; across hosts, the hierarchical one.
              flotilla::collective::ring_allreduce<flotilla::codec::Fp32>(e, std::span<float>(v));
            } catch (const TransportError& err) {
              std::printf("caught after %lld ms: %s\n", ms_since(t0), err.what());
              std::fflush(stdout);
              throw;
            }
          }
        });
      } catch (const TransportError& err) {
        std::printf("failed: %s\n", err.what());
        std::fflush(stdout);
        throw;
      }
      return 1;
    }
    if (mode == "print") {
      std::printf("first line of rank %zu\nsecond line\n", rank);
      std::fflush(stdout);
      std::fprintf(stderr, "an error line\n");
      std::printf("no newline");
      return 0;
    }
    std::fprintf(stderr, "tcp_rank: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const TransportError&) {
    return 3;  // fail/kill: the expected ending, already printed; the driver checks message and time
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
