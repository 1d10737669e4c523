// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_SCHEDULE_HPP_INCLUDED
#define FLOTILLA_OPTIM_SCHEDULE_HPP_INCLUDED
// Learning-rate schedules: each maps the index of an update (0 for the first) to a factor that
// multiplies the optimizer's base learning rate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/schedule.hpp"

namespace flotilla::schedule {

/// The base rate throughout.
struct Constant {
  double operator()(std::uint64_t /*step*/) const { return 1.0; }
};

/// Multiplies the rate by `gamma` every `every` updates (PyTorch's StepLR, counted in updates).
struct Step {
  std::uint64_t every = 1000;
  double gamma = 0.1;
  double operator()(std::uint64_t step) const {
    return std::pow(gamma, static_cast<double>(step / std::max<std::uint64_t>(every, 1)));
  }
};

/// Linear warm-up over `warmup` updates, then a half cosine from 1 down to `min_factor` at
/// `total` updates, constant after.
struct Cosine {
  std::uint64_t total = 1000;
  double min_factor = 0.0;
  std::uint64_t warmup = 0;
  double operator()(std::uint64_t step) const {
    if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
    const double span = static_cast<double>(std::max<std::uint64_t>(total, warmup + 1) - warmup);
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
    return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
};

}  // namespace flotilla::schedule

namespace flotilla {

/// What the optimizer is told of update `step` (0 first): its number, counted from 1, and its
/// learning rate, the optimizer's own times the schedule's factor. Every trainer and server asks
/// here, so the rate of a step has one definition.
template <class Optimizer, class Schedule>
StepInfo scheduled_step(const Optimizer& optimizer, const Schedule& schedule, std::uint64_t step) {
  return StepInfo{step + 1, optimizer.learning_rate * schedule(step)};
}

}  // namespace flotilla
#endif  // FLOTILLA_OPTIM_SCHEDULE_HPP_INCLUDED
