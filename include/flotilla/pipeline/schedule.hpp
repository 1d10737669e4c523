// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_SCHEDULE_HPP_INCLUDED
#define FLOTILLA_PIPELINE_SCHEDULE_HPP_INCLUDED
// The order in which one stage runs the forward (F) and backward (B) passes of a step's M
// micro-batches. Both schedules run every micro-batch's forward in order 0..M-1 and every backward
// in order 0..M-1, so the messages between two stages arrive in the order they are needed and one
// tag per direction suffices; they differ in when backward starts:
//
//  - fill_drain (GPipe): all M forwards, then all M backwards. Stage s holds the activations of
//    all M micro-batches at once.
//  - one_forward_one_backward (1F1B, PipeDream-Flush): stage s of P first runs min(P - 1 - s, M)
//    forwards (the warm-up), then alternates one forward and one backward, then runs the remaining
//    backwards. It holds at most P - s micro-batches at once, whatever M.
//
// Both leave the same idle time, the bubble: with equal stages, (P - 1) / (M + P - 1) of the step.
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::pipeline {

enum class Schedule { fill_drain, one_forward_one_backward };

constexpr std::string_view name(Schedule s) noexcept {
  return s == Schedule::fill_drain ? "fill-drain (GPipe)" : "1F1B";
}

struct Op {
  enum Kind { forward, backward } kind;
  std::size_t micro_batch;
  friend bool operator==(const Op&, const Op&) = default;
};

/// Stage `stage` of `stages`' operations for `micro_batches` micro-batches, in order.
inline std::vector<Op> schedule_ops(Schedule schedule, std::size_t stages, std::size_t stage, std::size_t micro_batches) {
  if (stage >= stages)
    throw ConfigError("pipeline::schedule_ops: stage " + std::to_string(stage) + " of a " + std::to_string(stages) +
                      "-stage pipeline");
  std::vector<Op> ops;
  ops.reserve(2 * micro_batches);
  const std::size_t m = micro_batches;
  if (schedule == Schedule::fill_drain) {
    for (std::size_t i = 0; i < m; ++i) ops.push_back({Op::forward, i});
    for (std::size_t i = 0; i < m; ++i) ops.push_back({Op::backward, i});
    return ops;
  }
  const std::size_t warmup = std::min(stages - 1 - stage, m);
  for (std::size_t i = 0; i < warmup; ++i) ops.push_back({Op::forward, i});
  for (std::size_t i = 0; i + warmup < m; ++i) {
    ops.push_back({Op::forward, warmup + i});
    ops.push_back({Op::backward, i});
  }
  for (std::size_t i = m - warmup; i < m; ++i) ops.push_back({Op::backward, i});
  return ops;
}

/// The most micro-batches whose activations stage `stage` holds at once under `schedule`.
constexpr std::size_t max_in_flight(Schedule schedule, std::size_t stages, std::size_t stage, std::size_t micro_batches) {
  return schedule == Schedule::fill_drain ? micro_batches : std::min(stages - stage, micro_batches);
}

/// The idle fraction of a step of equal stages with free communication: (P - 1) / (M + P - 1).
constexpr double theoretical_bubble(std::size_t stages, std::size_t micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_SCHEDULE_HPP_INCLUDED
