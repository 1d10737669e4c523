// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CODEC_ERRORFEEDBACK_HPP_INCLUDED
#define FLOTILLA_CODEC_ERRORFEEDBACK_HPP_INCLUDED
// Error feedback for lossy codecs: what one step's encoding lost is added to the next step's
// values before they are encoded, so nothing is lost for good.
//
// With residual r (initially 0), each step sends e_t = encode(v_t + r_{t-1}) and keeps
// r_t = (v_t + r_{t-1}) - decode(e_t). Summed over steps, the decoded values telescope:
//     sum_t decode(e_t) = sum_t v_t - r_T,
// so the accumulated error is one step's rounding error, whatever the number of steps, instead of
// growing with it (as without feedback, when rounding is biased: Bf16Truncate always rounds
// towards zero). Codecs stay stateless; the residual is the policy's, one per buffer it encodes.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/concepts/codec.hpp"
#include "flotilla/core/error.hpp"

namespace flotilla::codec {

template <class T>
class ErrorFeedback {
  static_assert(std::is_floating_point_v<T>, "codec::ErrorFeedback<T>: T must be a floating-point type");

 public:
  ErrorFeedback() = default;
  /// A residual for buffers of n values, initially zero.
  explicit ErrorFeedback(std::size_t n) : residual_(n, T(0)) {}

  std::size_t size() const noexcept { return residual_.size(); }
  /// What has been lost so far and not yet sent: the next encode adds it to its values.
  std::span<const T> residual() const noexcept { return residual_; }
  /// Takes a residual saved before (a checkpoint's), as if the steps that left it had run here.
  void restore(std::span<const T> residual) { residual_.assign(residual.begin(), residual.end()); }
  /// Forgets the residual (e.g. after the values it belongs to were replaced by a checkpoint).
  void reset() noexcept {
    for (auto& r : residual_) r = T(0);
  }

  /// bytes = encode(values + residual); residual = (values + residual) - decode(bytes).
  /// The first call sizes an empty residual; later calls must pass as many values.
  template <class C>
    requires Codec<C, T>
  void encode(C, std::span<const T> values, std::span<std::byte> bytes) {
    prepare(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) residual_[i] += values[i];
    C::encode(std::span<const T>(residual_), bytes);
    C::decode(std::span<const std::byte>(bytes), std::span<T>(scratch_));
    subtract_decoded();
  }

  /// In place: values = decode(encode(values + residual)), and the residual keeps what that lost.
  /// A policy that hands `values` to a collective encoding with the same codec makes the first
  /// encoding there exact (the values are already representable), so error feedback covers it.
  template <class C>
    requires Codec<C, T>
  void round_trip(C, std::span<T> values) {
    prepare(values.size());
    bytes_.resize(C::encoded_size(values.size()));
    for (std::size_t i = 0; i < values.size(); ++i) residual_[i] += values[i];
    C::encode(std::span<const T>(residual_), std::span<std::byte>(bytes_));
    C::decode(std::span<const std::byte>(bytes_), std::span<T>(scratch_));
    subtract_decoded();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = scratch_[i];
  }

 private:
  void prepare(std::size_t n) {
    if (residual_.empty()) residual_.assign(n, T(0));
    if (n != residual_.size())
      throw ShapeError("ErrorFeedback: " + std::to_string(n) + " values, but the residual holds " +
                       std::to_string(residual_.size()));
    scratch_.resize(n);
  }

  void subtract_decoded() noexcept {
    for (std::size_t i = 0; i < residual_.size(); ++i) {
      const T r = residual_[i] - scratch_[i];
      // An inf or NaN was sent as it is (codecs keep them) and every rank has seen it; carrying
      // inf - inf = NaN forward would poison every later step of this value.
      residual_[i] = std::isfinite(r) ? r : T(0);
    }
  }

  std::vector<T> residual_;
  std::vector<T> scratch_;
  std::vector<std::byte> bytes_;
};

}  // namespace flotilla::codec
#endif  // FLOTILLA_CODEC_ERRORFEEDBACK_HPP_INCLUDED
