// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_STATISTICSRENDEZVOUS_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_STATISTICSRENDEZVOUS_HPP_INCLUDED
// Where the parts of one training step (the threads of a worker, each with a slice of its batch)
// meet to sum a normalisation layer's batch statistics, so that they cover the worker's batch
// however many threads share it; and, for statistics over the global batch, where that sum goes on
// to the other workers (a function the worker's gradient path sets).
//
// The parts' values are added in part order, not arrival order, and the result is copied back to
// every part: the same bits whatever the timing.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "flotilla/core/layer_args.hpp"

namespace flotilla::detail {

class StatisticsRendezvous {
 public:
  /// Sums a worker's values over the other workers (in place); empty: the worker is alone.
  using AcrossWorkers = std::function<void(std::span<double>)>;

  explicit StatisticsRendezvous(std::size_t parts) : slots_(parts), joined_(parts, 0) {}

  void set_across_workers(AcrossWorkers f) { across_ = std::move(f); }

  /// Before a step: how many parts will call sum() (those with samples).
  void begin_step(std::size_t parties) noexcept { parties_ = parties; }

  /// Part `part`'s values in, every part's sum out (and the other workers', for the global scope).
  /// Blocks until every part of the step has called it.
  void sum(std::size_t part, std::span<double> values, StatisticsScope scope) {
    if (parties_ <= 1) {
      if (scope == StatisticsScope::global && across_) across_(values);
      return;
    }
    std::unique_lock lock(mutex_);
    slots_[part].assign(values.begin(), values.end());
    joined_[part] = 1;
    if (++arrived_ < parties_) {
      const std::uint64_t round = round_;
      ready_.wait(lock, [&] { return round_ != round; });
    } else {
      result_.assign(values.size(), 0.0);
      for (std::size_t k = 0; k < slots_.size(); ++k) {
        if (!joined_[k]) continue;
        joined_[k] = 0;
        for (std::size_t i = 0; i < result_.size() && i < slots_[k].size(); ++i) result_[i] += slots_[k][i];
      }
      error_ = nullptr;
      // The other parts wait for this one: an error here must wake them too, not leave them waiting.
      if (scope == StatisticsScope::global && across_) {
        try {
          across_(std::span<double>(result_));
        } catch (...) {
          error_ = std::current_exception();
        }
      }
      arrived_ = 0;
      ++round_;
      ready_.notify_all();
    }
    // Read under the lock: the next round cannot complete (and overwrite these) before every part
    // of this one has arrived at it.
    if (error_) std::rethrow_exception(error_);
    std::copy_n(result_.begin(), std::min(result_.size(), values.size()), values.begin());
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<std::vector<double>> slots_;
  std::vector<char> joined_;
  std::vector<double> result_;
  std::exception_ptr error_;
  std::size_t parties_ = 1, arrived_ = 0;
  std::uint64_t round_ = 0;
  AcrossWorkers across_;
};

/// Part `part`'s way into a rendezvous, as the StatisticsSum that its layers are given.
struct PartStatistics {
  StatisticsRendezvous* rendezvous = nullptr;
  std::size_t part = 0;
  void operator()(std::span<double> values, StatisticsScope scope) const { rendezvous->sum(part, values, scope); }
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_STATISTICSRENDEZVOUS_HPP_INCLUDED
