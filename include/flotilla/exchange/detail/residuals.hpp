// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_EXCHANGE_DETAIL_RESIDUALS_HPP_INCLUDED
#define FLOTILLA_EXCHANGE_DETAIL_RESIDUALS_HPP_INCLUDED
// The error-feedback residuals of an exchange, one per bucket (or shard) it encodes, sized by the
// first step and saved with checkpoints (StatefulExchange).
#include <cstddef>
#include <span>
#include <vector>

#include "flotilla/codec/error_feedback.hpp"

namespace flotilla::exchange::detail {

template <class T>
class Residuals {
 public:
  /// Stream `index`'s residual, created (empty, sized by its first use) when new.
  codec::ErrorFeedback<T>& operator[](std::size_t index) {
    if (feedback_.size() <= index) feedback_.resize(index + 1);
    return feedback_[index];
  }
  std::vector<std::span<const T>> state() const {
    std::vector<std::span<const T>> out;
    for (const auto& f : feedback_) out.push_back(f.residual());
    return out;
  }
  void restore(const std::vector<std::vector<T>>& saved) {
    feedback_.assign(saved.size(), {});
    for (std::size_t i = 0; i < saved.size(); ++i) feedback_[i].restore(saved[i]);
  }

 private:
  std::vector<codec::ErrorFeedback<T>> feedback_;
};

/// What an exchange with `Codec` on the wire keeps for error feedback: nothing for a lossless
/// codec or without feedback; else a residual per bucket, offered to checkpoints (StatefulExchange).
template <class T, class Codec, bool ErrorFeedback>
class FeedbackState {
 protected:
  static constexpr bool feeds_back = ErrorFeedback && !Codec::lossless;
  Residuals<T> residuals_;

 public:
  std::vector<std::span<const T>> state() const
    requires feeds_back
  {
    return residuals_.state();
  }
  void restore(const std::vector<std::vector<T>>& saved)
    requires feeds_back
  {
    residuals_.restore(saved);
  }
};

}  // namespace flotilla::exchange::detail
#endif  // FLOTILLA_EXCHANGE_DETAIL_RESIDUALS_HPP_INCLUDED
