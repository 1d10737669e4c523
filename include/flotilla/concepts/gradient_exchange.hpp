// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_GRADIENTEXCHANGE_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_GRADIENTEXCHANGE_HPP_INCLUDED
// The GradientExchange extension point: what happens to a bucket of gradients once backward has
// finished it. See docs/concepts/gradient_exchange.md.
//
// A worker's gradients live in one flat buffer, cut into buckets in the order backward finishes
// them (the last layers first). As soon as a bucket is final, the trainer hands it to the policy's
// exchange on the worker's communication thread, while backward goes on with the layers before
// it; the exchange turns this worker's values into the ones the update should use (the workers'
// sum, for an allreduce) and returns. When every bucket has returned, the policy updates.
//
// The built-in exchanges are exchange::RingAllreduce<Codec, ErrorFeedback> (flotilla/exchange/),
// exchange::Local (nothing: the policy combines gradients itself in step()) and, on parameter
// servers, the push of each shard. A policy names its own with `using exchange = X;`.
#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "flotilla/concepts/transport.hpp"

namespace flotilla {

/// A bucket of the flat gradient buffer that backward has finished, as an exchange sees it.
/// `Peers` is the group of workers: rank(), size(), and send, recv and sendrecv by group rank
/// and tag, with the members of a transport endpoint (concepts/transport.hpp).
template <class T, class Peers>
struct GradientBucket {
  /// 0 is the first bucket backward finishes (at the end of the buffer); the same on every worker.
  std::size_t index = 0;
  /// Where the bucket starts in the flat buffer (the network's tensor table says whose it is).
  std::size_t offset = 0;
  /// This worker's gradient in; what the update is to use out. Scaled so that the workers' values
  /// add up to the mean gradient over the global batch: a sum over workers needs no division.
  /// Empty where the peers encode the values on the device (`Peers::encodes_on_device`: a GPU's
  /// parameter-server pushes), whose fp32 gradients never cross to the host.
  std::span<T> gradients;
  Peers& peers;
  /// Reserved for this bucket's messages: buckets may be in flight on different threads of
  /// different workers at once, and never share a tag.
  Tag tag = 0;
};

namespace detail {
/// The workers an exchange talks to, reduced to their documented members: the trainer's group has
/// these, and an exchange should use nothing else.
struct PeersArchetype {
  std::size_t rank() const;
  std::size_t size() const;
  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes);
  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer);
  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in);
};
}  // namespace detail

/// An exchange: default-constructible (one per worker, kept across fit() calls), named, and able
/// to exchange a bucket of T. It may keep state across steps (error-feedback residuals).
template <class X, class T>
concept GradientExchange = std::default_initializable<X> && requires(X& x, GradientBucket<T, detail::PeersArchetype>& b) {
  { X::name } -> std::convertible_to<std::string_view>;
  x.exchange(b);
};

/// Optional: an exchange whose state carries from one step into the next (error feedback) offers
/// it as buffers that checkpoints save and restore, so that a resumed run continues the same
/// numbers. `state()` is empty until the first step sizes it; a restore hands back what was saved.
template <class X, class T>
concept StatefulExchange = requires(const X& x, X& y, const std::vector<std::vector<T>>& saved) {
  { x.state() } -> std::convertible_to<std::vector<std::span<const T>>>;
  y.restore(saved);
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_GRADIENTEXCHANGE_HPP_INCLUDED
