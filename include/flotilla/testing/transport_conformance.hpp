// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TESTING_TRANSPORTCONFORMANCE_HPP_INCLUDED
#define FLOTILLA_TESTING_TRANSPORTCONFORMANCE_HPP_INCLUDED
// The semantics every Transport must have (docs/concepts/transport.md, "What the compiler cannot
// check"), as one function that each rank of a job runs:
//
//   flotilla::testing::transport_conformance(endpoint);
//
// It throws std::runtime_error naming the failed check (and rank) on the first violation. flotilla
// runs it over its in-process transport, over TCP processes started by the local launcher and
// under mpirun, so all transports are held to one standard; run it over a transport of your own
// the same way, on every rank of jobs of one to a few ranks. It uses tags below
// tags::reserved_begin, sends messages of up to 8 MiB, and needs the endpoint to itself.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"

namespace flotilla::testing {

namespace detail {

inline std::vector<std::byte> conformance_pattern(std::size_t from, std::size_t to, std::size_t seq, std::size_t n) {
  std::vector<std::byte> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ULL * (from + 1) ^ (to + 7) * 0xbf58476d1ce4e5b9ULL ^ seq * 0x94d049bb133111ebULL;
  for (auto& b : v) {
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ULL;
    b = static_cast<std::byte>(x >> 56);
  }
  return v;
}

[[noreturn]] inline void conformance_fail(std::size_t rank, const std::string& what) {
  throw std::runtime_error("transport conformance, rank " + std::to_string(rank) + ": " + what);
}

inline void conformance_expect(bool ok, std::size_t rank, const std::string& what) {
  if (!ok) conformance_fail(rank, what);
}

}  // namespace detail

/// Runs every check; all ranks of the job must call it. Uses tags below tags::reserved_begin.
template <Transport E>
void transport_conformance(E& e) {
  const std::size_t rank = e.rank(), n = e.size();
  detail::conformance_expect(n >= 1 && rank < n,
                             rank, "rank " + std::to_string(rank) + " not within size " + std::to_string(n));
  const std::size_t right = (rank + 1) % n, left = (rank + n - 1) % n;
  const TrafficCounters start = e.counters();
  std::uint64_t sent = 0, received = 0;

  e.barrier();

  // 1. A ring exchange of many sizes with sendrecv, including empty messages and sizes that do
  //    not fit a socket buffer (both neighbours send at once: must not deadlock).
  const std::size_t sizes[] = {0, 1, 7, 4096, 65537, 1u << 20, 8u << 20};
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    const auto out = detail::conformance_pattern(rank, right, i, sizes[i]);
    std::vector<std::byte> in(sizes[i]);
    e.sendrecv(right, 1, out, left, in);
    detail::conformance_expect(in == detail::conformance_pattern(left, rank, i, sizes[i]),
                               rank, "sendrecv of " + std::to_string(sizes[i]) + " bytes corrupted");
    sent += sizes[i];
    received += sizes[i];
  }

  if (n >= 2) {
    // 2. Messages with one tag between two ranks arrive in the order sent.
    if (rank == 0) {
      for (std::size_t i = 0; i < 20; ++i) {
        e.send(1, 2, detail::conformance_pattern(0, 1, 100 + i, 100 + i));
        sent += 100 + i;
      }
    } else if (rank == 1) {
      for (std::size_t i = 0; i < 20; ++i) {
        std::vector<std::byte> in(100 + i);
        e.recv(0, 2, in);
        detail::conformance_expect(in == detail::conformance_pattern(0, 1, 100 + i, 100 + i),
                                   rank, "message " + std::to_string(i) + " out of order or corrupted");
        received += 100 + i;
      }
    }

    // 3. Receives match by tag: a later tag can be received first.
    if (rank == 0) {
      e.send(1, 3, detail::conformance_pattern(0, 1, 300, 64));
      e.send(1, 4, detail::conformance_pattern(0, 1, 400, 32));
      sent += 96;
    } else if (rank == 1) {
      std::vector<std::byte> b4(32), b3(64);
      e.recv(0, 4, b4);
      e.recv(0, 3, b3);
      detail::conformance_expect(
          b4 == detail::conformance_pattern(0, 1, 400, 32) && b3 == detail::conformance_pattern(0, 1, 300, 64), rank,
          "receive by tag mixed up messages");
      received += 96;
    }

    // 4. recv_any collects one message from every other rank.
    if (rank == 0) {
      std::set<std::size_t> peers;
      for (std::size_t i = 1; i < n; ++i) {
        std::vector<std::byte> in(16);
        const std::size_t from = e.recv_any(5, in);
        detail::conformance_expect(from >= 1 && from < n, rank, "recv_any returned rank " + std::to_string(from));
        detail::conformance_expect(in == detail::conformance_pattern(from, 0, 500, 16),
                                   rank, "recv_any delivered the wrong bytes for rank " + std::to_string(from));
        peers.insert(from);
        received += 16;
      }
      detail::conformance_expect(peers.size() == n - 1, rank, "recv_any did not see every rank exactly once");
    } else {
      e.send(0, 5, detail::conformance_pattern(rank, 0, 500, 16));
      sent += 16;
    }

    // 5. A message of the wrong size is an error that names both sizes, and the message is
    //    consumed: the next message on the same link arrives intact.
    if (rank == 0) {
      e.send(1, 6, detail::conformance_pattern(0, 1, 600, 8));
      e.send(1, 6, detail::conformance_pattern(0, 1, 601, 24));
      sent += 32;
    } else if (rank == 1) {
      std::vector<std::byte> wrong(16);
      bool threw = false;
      try {
        e.recv(0, 6, wrong);
      } catch (const TransportError& err) {
        const std::string msg = err.what();
        threw = msg.find("16") != std::string::npos && msg.find('8') != std::string::npos;
      }
      detail::conformance_expect(threw,
                                 rank,
                                 "a message of the wrong size was not reported as a TransportError naming both sizes");
      std::vector<std::byte> right_size(24);
      e.recv(0, 6, right_size);
      detail::conformance_expect(right_size == detail::conformance_pattern(0, 1, 601, 24),
                                 rank, "the message after a wrong-sized one was lost or corrupted");
      received += 8 + 24;  // the refused message was read off the wire too
    }
  }

  // 6. Barriers can follow each other at once.
  for (int i = 0; i < 5; ++i) e.barrier();

  // 7. Payload counters count exactly the bytes above (framing is counted apart).
  const TrafficCounters used = e.counters() - start;
  detail::conformance_expect(used.payload_bytes_sent == sent, rank,
         "payload_bytes_sent is " + std::to_string(used.payload_bytes_sent) + ", expected " + std::to_string(sent));
  detail::conformance_expect(used.payload_bytes_received == received, rank,
         "payload_bytes_received is " + std::to_string(used.payload_bytes_received) + ", expected " +
             std::to_string(received));
  e.barrier();
}

}  // namespace flotilla::testing
#endif  // FLOTILLA_TESTING_TRANSPORTCONFORMANCE_HPP_INCLUDED
