// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_EXCHANGE_POLICYEXCHANGE_HPP_INCLUDED
#define FLOTILLA_EXCHANGE_POLICYEXCHANGE_HPP_INCLUDED
// Which exchange a policy's gradients go through: the one it names (`template <class T> using
// exchange = ...;`), else the default of its topology, with the policy's codec and error feedback.
#include <type_traits>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/exchange/local.hpp"
#include "flotilla/exchange/push_to_servers.hpp"
#include "flotilla/exchange/ring_allreduce.hpp"

namespace flotilla {

/// The codec a policy uses (codec::Fp32, the values' own type, unless it says otherwise).
template <class P>
struct policy_codec {
  using type = codec::Fp32;
};
template <class P>
  requires requires { typename P::codec; }
struct policy_codec<P> {
  using type = typename P::codec;
};

/// The codec a policy's collectives use for values of T (codec::Fp32 means "the values' own type").
template <class Policy, class T>
using policy_codec_t = codec::for_value_t<typename policy_codec<Policy>::type, T>;

template <class Policy, class T>
struct policy_exchange {
  using type = std::conditional_t<
      ParameterServerPolicy<Policy>,
      exchange::PushToServers<T, policy_codec_t<Policy, T>, policy_error_feedback<Policy>>,
      std::conditional_t<PeerToPeerPolicy<Policy> && requires { requires Policy::reduce_gradients_in_backward; },
                         exchange::RingAllreduce<T, policy_codec_t<Policy, T>, policy_error_feedback<Policy>>,
                         exchange::Local<T>>>;
};

template <class Policy, class T>
  requires requires { typename Policy::template exchange<T>; }
struct policy_exchange<Policy, T> {
  using type = typename Policy::template exchange<T>;
  static_assert(GradientExchange<type, T>,
                "a policy's exchange<T> is not a gradient exchange (see docs/concepts/gradient_exchange.md): it needs "
                "`static constexpr std::string_view name`, a default constructor and `exchange(GradientBucket<T, Peers>&)`");
  static_assert(!PeerToPeerPolicy<Policy> || Policy::reduce_gradients_in_backward,
                "a peer-to-peer policy that names its own exchange must set reduce_gradients_in_backward = true: "
                "the exchange is what runs on each bucket during backward");
};

template <class Policy, class T>
using policy_exchange_t = typename policy_exchange<Policy, T>::type;

}  // namespace flotilla
#endif  // FLOTILLA_EXCHANGE_POLICYEXCHANGE_HPP_INCLUDED
