// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_DIVERGENCE_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_DIVERGENCE_HPP_INCLUDED
// The error a trainer raises when a batch's loss is not a finite number: training has diverged,
// and every update from there on would carry the NaN or infinity into the parameters.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>

#include "flotilla/core/error.hpp"

namespace flotilla::detail {

/// DivergenceError for `who` (e.g. "worker 0", "stage 2 of replica 0") at update `update` (1
/// first), batch `batch` (0 first) of `batches` in epoch `epoch` (0 first), whose rate was `rate`.
inline DivergenceError divergence(const std::string& who, double loss, std::uint64_t update, std::uint64_t epoch,
                                  std::uint64_t batch, std::uint64_t batches, double rate) {
  std::ostringstream m;
  m << who << ": the loss is " << (std::isnan(loss) ? "NaN" : loss > 0 ? "+inf" : "-inf") << " at update " << update
    << " (epoch " << epoch + 1 << ", batch " << batch + 1 << " of " << batches << "): training has diverged. "
    << "The learning rate of that update was " << rate
    << "; a lower one, or inputs scaled to a smaller range, usually avoids this";
  return DivergenceError(m.str(), update);
}

/// Whether every value of `values` is a finite number.
template <class T>
bool all_finite(std::span<const T> values) noexcept {
  for (const T v : values)
    if (!std::isfinite(v)) return false;
  return true;
}

/// DivergenceError for `who` when `skipped` updates in a row, the last `update`, had gradients that
/// were not finite (NonFiniteLoss::skip_update).
inline DivergenceError divergence_after_skips(const std::string& who, std::size_t skipped, std::uint64_t update,
                                              std::uint64_t epoch, double rate) {
  std::ostringstream m;
  m << who << ": " << skipped << " updates in a row, the last update " << update << " (epoch " << epoch + 1
    << "), were skipped because their gradient was not finite (TrainerOptions::max_consecutive_skips is " << skipped
    << "): training has diverged. The learning rate of the last was " << rate
    << "; a lower one, or inputs scaled to a smaller range, usually avoids this";
  return DivergenceError(m.str(), update);
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_DIVERGENCE_HPP_INCLUDED
