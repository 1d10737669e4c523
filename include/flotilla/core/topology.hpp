// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_TOPOLOGY_HPP_INCLUDED
#define FLOTILLA_CORE_TOPOLOGY_HPP_INCLUDED
// The two ways workers combine their updates. A policy names one as its `topology`.
#include <string_view>

namespace flotilla::topology {

/// Peer to peer: every worker holds all the parameters and runs the optimizer itself; gradients
/// (or whatever the policy chooses) are summed by ring allreduce, or by the transport's own
/// allreduce where it has one (MPI). No rank is special, so there is no central bottleneck.
struct Ring {
  static constexpr std::string_view name = "ring-allreduce";
};

/// Parameter servers: S server ranks each hold a disjoint, contiguous shard of the flat parameter
/// buffer (balanced by bytes) with its optimizer state, and run the optimizer on it. Workers push
/// gradients to every server and pull the parameters back. TensorFlow's distributed runtime.
struct ParameterServer {
  static constexpr std::string_view name = "parameter-server";
};

}  // namespace flotilla::topology
#endif  // FLOTILLA_CORE_TOPOLOGY_HPP_INCLUDED
