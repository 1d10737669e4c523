// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_EXCHANGE_RINGALLREDUCE_HPP_INCLUDED
#define FLOTILLA_EXCHANGE_RINGALLREDUCE_HPP_INCLUDED
// exchange::RingAllreduce: each bucket is summed over the workers by a ring allreduce, with
// `Codec` on the wire; with error feedback, what this worker's encoding rounds away is carried
// into its next step's value of the same bucket. The default exchange of peer-to-peer policies
// that reduce in backward (policy::Synchronous<>, and policy::Compressed over it).
#include <string_view>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/exchange/detail/residuals.hpp"

namespace flotilla::exchange {

template <class T, class Codec = codec::Fp32, bool ErrorFeedback = false>
class RingAllreduce : public detail::FeedbackState<T, Codec, ErrorFeedback> {
  using Feedback = detail::FeedbackState<T, Codec, ErrorFeedback>;
  static_assert(flotilla::Codec<Codec, T>, "exchange::RingAllreduce<T, Codec>: Codec cannot encode T");

 public:
  static constexpr std::string_view name = "ring-allreduce";

  template <class Peers>
  void exchange(GradientBucket<T, Peers>& bucket) {
    // This worker's contribution is rounded once on its way out; the ring's first encoding of
    // the rounded values is then exact, so the residual covers all this worker loses.
    if constexpr (Feedback::feeds_back) this->residuals_[bucket.index].round_trip(Codec{}, bucket.gradients);
    collective::RingOptions o;
    o.tag = bucket.tag;
    collective::ring_allreduce<Codec>(bucket.peers, bucket.gradients, o);
  }
};

}  // namespace flotilla::exchange
#endif  // FLOTILLA_EXCHANGE_RINGALLREDUCE_HPP_INCLUDED
