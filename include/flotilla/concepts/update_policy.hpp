// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_UPDATEPOLICY_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_UPDATEPOLICY_HPP_INCLUDED
// The UpdatePolicy extension point: how the updates of several workers are combined. See
// docs/concepts/update_policy.md.
//
// A policy is a small type that names its topology and what the trainer should do:
//  - peer to peer (topology::Ring): `step(ctx)` runs on every worker after each batch's gradients
//    are computed, with a context that offers allreduce, broadcast and the optimizer. If
//    `reduce_gradients_in_backward` is true, the gradients arrive in step() already the mean over
//    the global batch, reduced bucket by bucket while backward was still running; otherwise they
//    are this worker's own mean gradient;
//  - parameter server (topology::ParameterServer): `aggregate` says whether servers sum one push
//    from every worker before each update (synchronous) or apply each push as it comes; and
//    `staleness_bound` how many steps a worker may run ahead of the slowest (0 with aggregate is
//    synchronous; the largest std::size_t is fully asynchronous).
// Optional members, with their defaults: `codec` (codec::Fp32, the values' own type: what goes on the wire),
// `micro_batches` (1: batches accumulated per update), `error_feedback` (false).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "flotilla/concepts/codec.hpp"
#include "flotilla/core/topology.hpp"

namespace flotilla {

namespace detail {
/// The context a peer-to-peer policy's step() receives, reduced to its documented members: the
/// trainer's real context has these (and a policy should use nothing else).
template <class T>
struct PeerContextArchetype {
  std::size_t rank() const;
  std::size_t workers() const;
  std::uint64_t step() const;
  std::span<T> parameters();
  std::span<T> gradients();
  void allreduce(std::span<T> values, bool average);
  void broadcast(std::span<T> values, std::size_t root);
  void apply_optimizer();
};
}  // namespace detail

/// Batches accumulated per update (1 unless the policy says otherwise).
template <class P>
inline constexpr std::size_t policy_micro_batches = [] {
  if constexpr (requires { { P::micro_batches } -> std::convertible_to<std::size_t>; }) {
    return static_cast<std::size_t>(P::micro_batches);
  } else {
    return std::size_t{1};
  }
}();

/// Whether the rounding error of a lossy codec is carried into the next step (false by default).
template <class P>
inline constexpr bool policy_error_feedback = [] {
  if constexpr (requires { { P::error_feedback } -> std::convertible_to<bool>; }) {
    return static_cast<bool>(P::error_feedback);
  } else {
    return false;
  }
}();

template <class P>
concept PeerToPeerPolicy = std::same_as<typename P::topology, topology::Ring> &&
                           requires(P& p, detail::PeerContextArchetype<float>& ctx) {
                             { P::reduce_gradients_in_backward } -> std::convertible_to<bool>;
                             p.step(ctx);
                           };

template <class P>
concept ParameterServerPolicy = std::same_as<typename P::topology, topology::ParameterServer> && requires {
  { P::aggregate } -> std::convertible_to<bool>;
  { P::staleness_bound } -> std::convertible_to<std::size_t>;
};

/// A peer-to-peer policy that trains in fixed virtual shards of `shard_samples` samples, whose
/// gradients are added in one fixed tree order (policy::Reproducible): its step() receives the
/// mean over the global batch with the same bits for any number of workers and cores.
template <class P>
concept ReproduciblePolicy = PeerToPeerPolicy<P> && !P::reduce_gradients_in_backward && requires(const P& p) {
  { p.shard_samples } -> std::convertible_to<std::size_t>;
};

template <class P>
concept UpdatePolicy = requires {
  { P::name } -> std::convertible_to<std::string_view>;
  typename P::topology;
} && (PeerToPeerPolicy<P> || ParameterServerPolicy<P>) && (policy_micro_batches<P> > 0) &&
                       (!requires { typename P::codec; } || Codec<typename P::codec, float>);

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_UPDATEPOLICY_HPP_INCLUDED
