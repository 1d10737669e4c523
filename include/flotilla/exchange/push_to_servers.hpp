// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_EXCHANGE_PUSHTOSERVERS_HPP_INCLUDED
#define FLOTILLA_EXCHANGE_PUSHTOSERVERS_HPP_INCLUDED
// exchange::PushToServers: each bucket is a parameter server's shard, pushed to that server as
// soon as backward has finished it, with `Codec` on the wire; with error feedback, what the
// encoding rounds away is carried into this worker's next push of the shard. The default exchange
// of parameter-server policies; the pull of the updated parameters follows once every shard is
// pushed (train/detail/server_path.hpp).
//
// Its bucket's peers are the servers, with one member: push(shard), which sends the shard of the
// worker's gradient buffer; a GPU engine that encodes the pushed values itself (error feedback
// included, on the device) says so by `encodes_on_device`.
#include <string_view>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/concepts/codec.hpp"
#include "flotilla/concepts/gradient_exchange.hpp"
#include "flotilla/exchange/detail/residuals.hpp"

namespace flotilla::exchange {

template <class T, class Codec = codec::Fp32, bool ErrorFeedback = false>
class PushToServers : public detail::FeedbackState<T, Codec, ErrorFeedback> {
  using Feedback = detail::FeedbackState<T, Codec, ErrorFeedback>;
  static_assert(flotilla::Codec<Codec, T>, "exchange::PushToServers<T, Codec>: Codec cannot encode T");

 public:
  static constexpr std::string_view name = "push-to-servers";

  /// `bucket.index` is the shard's (and its server's) index.
  template <class Servers>
  void exchange(GradientBucket<T, Servers>& bucket) {
    if constexpr (Feedback::feeds_back && !Servers::encodes_on_device) {
      // Send the gradient plus what rounding dropped last step; keep what it drops now.
      this->residuals_[bucket.index].round_trip(Codec{}, bucket.gradients);
    }
    bucket.peers.push(bucket.index);
  }
};

}  // namespace flotilla::exchange
#endif  // FLOTILLA_EXCHANGE_PUSHTOSERVERS_HPP_INCLUDED
