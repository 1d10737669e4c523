// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TOPOLOGY_DETAIL_PSHEADER_HPP_INCLUDED
#define FLOTILLA_TOPOLOGY_DETAIL_PSHEADER_HPP_INCLUDED
// The 32-byte header that starts every parameter-server message (topology/detail/parameter_server.hpp
// describes the protocol; topology/detail/ps_reduce.hpp the workers' reductions through server 0).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace flotilla::detail {

struct PsHeader {
  enum Kind : std::uint32_t {
    push = 1,
    done = 2,
    hello = 3,
    reply = 4,
    checkpoint = 5,
    /// worker -> server 0: a contribution to a reduction among the workers (ps_reduce.hpp).
    reduce = 6,
  };
  /// reply flags: the server saved its shard as asked (checkpoint).
  static constexpr std::uint32_t saved = 1;
  /// hello flag: a worker that was lost and restarted rejoins (version: its steps per epoch;
  /// steps_ahead: to servers but 0, the position server 0 gave it).
  static constexpr std::uint32_t rejoining = 2;
  /// reply flag to a rejoining hello: the job is finishing, there is nothing left to rejoin.
  static constexpr std::uint32_t too_late = 4;
  std::uint32_t kind = 0;
  std::uint32_t flags = 0;
  std::uint64_t version = 0;      ///< push: the version the gradient was computed on; reply: the shard's version
  std::uint64_t steps_ahead = 0;  ///< reply: how far this worker was ahead of the slowest when released
  std::uint64_t staleness = 0;    ///< reply: updates applied between the worker's pull and its push

  static constexpr std::size_t size = 32;
  void write(std::byte* out) const {
    std::memcpy(out, &kind, 4);
    std::memcpy(out + 4, &flags, 4);
    std::memcpy(out + 8, &version, 8);
    std::memcpy(out + 16, &steps_ahead, 8);
    std::memcpy(out + 24, &staleness, 8);
  }
  static PsHeader read(const std::byte* in) {
    PsHeader h;
    std::memcpy(&h.kind, in, 4);
    std::memcpy(&h.flags, in + 4, 4);
    std::memcpy(&h.version, in + 8, 8);
    std::memcpy(&h.steps_ahead, in + 16, 8);
    std::memcpy(&h.staleness, in + 24, 8);
    return h;
  }
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TOPOLOGY_DETAIL_PSHEADER_HPP_INCLUDED
