// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_TRAININGOPTIONS_HPP_INCLUDED
#define FLOTILLA_TRAIN_TRAININGOPTIONS_HPP_INCLUDED
// What every trainer is set up with (the data-parallel Trainer and pipeline::Trainer alike): the
// optimizer and its schedule, the batch, the seed and the data order. Each trainer's options
// extend these with what only it has.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "flotilla/model.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/optim/schedule.hpp"

namespace flotilla {

template <ModelType M>
struct TrainingOptions {
  typename M::optimizer optimizer{};
  /// Factor on the optimizer's learning rate as a function of the update index (0 first).
  std::function<double(std::uint64_t)> schedule = schedule::Constant{};
  /// Samples per worker (data parallel) or per replica (pipelines) per step: a step of W workers
  /// consumes batch_size * W samples.
  std::size_t batch_size = 64;
  /// Fixes the initial parameters, the data order and the dropout masks.
  std::uint64_t seed = 1;
  bool shuffle = true;
  /// Batches gathered ahead on a background thread (0: gather on the training thread).
  std::size_t prefetch = 2;
  /// Samples a core runs through the network at once in evaluate() and predict(), at most: the CPU
  /// engine takes fewer where the model's activations would pass 64 MiB a core (each layer keeps
  /// workspaces the size of its largest batch: a residual network of 176k parameters would
  /// otherwise hold gigabytes).
  std::size_t eval_batch_size = 1000;

  /// The optimizer's step information for update `step` (0 first), at its scheduled rate.
  StepInfo step_info(std::uint64_t step) const { return scheduled_step(optimizer, schedule, step); }
  /// The learning rate of update `step`.
  double learning_rate(std::uint64_t step) const { return step_info(step).learning_rate; }

  /// Throws ConfigError naming the field (as `options` names the struct) when a size is 0 or the
  /// learning rate is negative or not a number.
  void validate(const std::string& options) const {
    const double lr = optimizer.learning_rate;
    if (!(lr >= 0) || !std::isfinite(lr))
      throw ConfigError(options + "::optimizer.learning_rate is " + std::to_string(lr) +
                        "; it must be a finite number >= 0");
    if (batch_size == 0) throw ConfigError(options + "::batch_size must be > 0");
    if (eval_batch_size == 0) throw ConfigError(options + "::eval_batch_size must be > 0");
  }
};

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_TRAININGOPTIONS_HPP_INCLUDED
