// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_READYRUNNER_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_READYRUNNER_HPP_INCLUDED
// Runs an action on each range of a buffer as soon as backward has made it final, on a thread of
// its own: the mechanism behind overlapping communication with backward. The ring topology's
// action allreduces a gradient bucket; the parameter-server topology's pushes a shard.
//
// Ranges are given in the order backward finalises them (from the end of the buffer). Compute
// threads call ready(offset) when [offset, end) is final; the runner's thread then takes every
// range lying wholly in it, in order. After backward, finish() runs the rest on the calling
// thread (or waits for the one action in progress): that time is the communication backward
// could not hide. A runner made without a thread of its own (TrainerOptions::overlap) leaves
// every range to finish().
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "flotilla/topology/detail/ring.hpp"

namespace flotilla::detail {

class ReadyRunner {
 public:
  /// `action(index, range)` runs for each range in turn: on the runner's thread (`background`) as
  /// soon as backward has made the range final, else in finish().
  ReadyRunner(std::vector<Range> ranges, std::function<void(std::size_t, Range)> action, bool background = true)
      : ranges_(std::move(ranges)), action_(std::move(action)) {
    if (background) thread_ = std::thread([this] { loop(); });
  }
  ReadyRunner(const ReadyRunner&) = delete;
  ReadyRunner& operator=(const ReadyRunner&) = delete;
  ~ReadyRunner() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  const std::vector<Range>& ranges() const noexcept { return ranges_; }
  /// Whether the actions run on a thread of their own, during backward (then compute threads
  /// should call ready()).
  bool background() const noexcept { return thread_.joinable(); }

  /// Arms the runner for one pass over the ranges; nothing runs until ready() says so.
  void start(std::size_t buffer_size) {
    const std::lock_guard lock(mutex_);
    ready_from_ = buffer_size + 1;
    next_ = 0;
    armed_ = true;
    error_ = nullptr;
  }

  /// [offset, end) is final. Called from compute threads, with offsets decreasing.
  void ready(std::size_t offset) {
    {
      const std::lock_guard lock(mutex_);
      ready_from_ = std::min(ready_from_, offset);
    }
    wake_.notify_all();
  }

  /// Marks everything final, sees every range's action run, and returns the seconds this took.
  /// Rethrows the first failure of an action. Ranges the runner's thread has not taken yet are
  /// run here, on the calling thread: after backward that thread has nothing else to do, and it
  /// holds a core, where the runner's thread would first have to be woken and scheduled (on a
  /// machine with no spare core, that delay can be as long as the communication itself:
  /// docs/benchmarks.md, "Gradient buckets").
  double finish() {
    const auto begin = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    ready_from_ = 0;
    while (armed_) {
      if (!running_ && next_ < ranges_.size()) {
        run_next(lock);
      } else if (!running_) {
        armed_ = false;
      } else {
        done_.wait(lock);  // the runner's thread is in an action; it notifies when it ends
      }
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (error_) std::rethrow_exception(error_);
    return waited;
  }

 private:
  bool runnable() const {
    return armed_ && !running_ && next_ < ranges_.size() && ready_from_ <= ranges_[next_].begin;
  }

  // Runs the next range's action with the lock released; at most one thread is ever in one.
  void run_next(std::unique_lock<std::mutex>& lock) {
    const std::size_t index = next_;
    running_ = true;
    lock.unlock();
    std::exception_ptr failed;
    try {
      action_(index, ranges_[index]);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    running_ = false;
    if (failed) {
      error_ = failed;
      next_ = ranges_.size();
    } else {
      ++next_;
    }
    done_.notify_all();
  }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || runnable(); });
      if (stop_) return;
      run_next(lock);
    }
  }

  std::vector<Range> ranges_;
  std::function<void(std::size_t, Range)> action_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::size_t ready_from_ = 0, next_ = 0;
  bool armed_ = false, stop_ = false, running_ = false;
  std::exception_ptr error_;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_READYRUNNER_HPP_INCLUDED
