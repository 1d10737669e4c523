// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_POLICY_ASYNCHRONOUS_HPP_INCLUDED
#define FLOTILLA_POLICY_ASYNCHRONOUS_HPP_INCLUDED
// policy::Asynchronous and policy::BoundedStaleness: parameter servers apply each worker's update
// the moment it arrives (TensorFlow's asynchronous training), so a slow worker never holds up the
// others; the price is that a gradient may be computed on parameters that others have since
// moved ("stale"). BoundedStaleness<S> caps that: a worker may be at most S steps ahead of the
// slowest (stale synchronous parallel, Ho et al. 2013). S = 0 waits like synchronous training;
// Asynchronous is S = infinity.
#include <concepts>
#include <cstddef>
#include <limits>
#include <string_view>

#include "flotilla/core/topology.hpp"

namespace flotilla::policy {

template <std::size_t S, class Topology = topology::ParameterServer>
struct BoundedStaleness {
  static_assert(std::same_as<Topology, topology::ParameterServer>,
                "policy::BoundedStaleness: bounded staleness needs parameter servers, which apply each worker's update "
                "as it arrives and hold back workers that run ahead; use BoundedStaleness<S, topology::ParameterServer> "
                "(peer-to-peer allreduce is synchronous by nature: use policy::Synchronous<topology::Ring>)");
  static constexpr std::string_view name = "bounded-staleness";
  using topology = topology::ParameterServer;
  static constexpr bool aggregate = S == 0;
  static constexpr std::size_t staleness_bound = S;
};

template <class Topology = topology::ParameterServer>
struct Asynchronous {
  static_assert(std::same_as<Topology, topology::ParameterServer>,
                "policy::Asynchronous: asynchronous updates need parameter servers to apply each worker's update as it "
                "arrives; use policy::Asynchronous<topology::ParameterServer> (or, peer to peer, "
                "policy::Synchronous<topology::Ring>)");
  static constexpr std::string_view name = "asynchronous";
  using topology = topology::ParameterServer;
  static constexpr bool aggregate = false;
  static constexpr std::size_t staleness_bound = std::numeric_limits<std::size_t>::max();
};

}  // namespace flotilla::policy
#endif  // FLOTILLA_POLICY_ASYNCHRONOUS_HPP_INCLUDED
