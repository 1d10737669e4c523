// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_DETAIL_SERIALWORKER_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_DETAIL_SERIALWORKER_HPP_INCLUDED
// A helper thread that runs one call's work items in the order they are posted: the arithmetic
// half of a pipelined collective. An endpoint may be used by one thread at a time, so the calling
// thread does all communication and hands each received segment to this thread to be reduced
// while the next segment is on the wire.
//
// Items run one at a time and in order, but not always on the helper: a caller that must wait for
// an item the helper has not started runs it itself. Where every core is busy (two ranks on two
// cores), a woken helper waits to be scheduled while the caller, which holds a core, would only
// sleep; where a core is free, the helper has usually finished the item before the caller asks.
//
// Hand-offs cost a few microseconds: the two threads wait on 32-bit atomic counters (C++20 atomic
// wait: a short spin, then a futex), never on a mutex or a queue allocation.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>

namespace flotilla::detail {

class SerialWorker {
 public:
  using Job = void (*)(void* context, std::size_t item);

  SerialWorker() : thread_([this] { loop(); }) {}
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  ~SerialWorker() {
    stop_.store(true, std::memory_order_relaxed);
    posted_.fetch_add(1, std::memory_order_release);
    posted_.notify_one();
    thread_.join();
  }

  /// Starts a call: item i (counted from 0) will run job(context, i). The previous call must
  /// have been finished (every item posted has run).
  void begin(Job job, void* context) noexcept {
    job_ = job;
    context_ = context;
    error_ = nullptr;
    base_ = posted_.load(std::memory_order_relaxed);
  }

  /// Makes items [0, count) available to run.
  void post(std::size_t count) noexcept {
    posted_.store(base_ + static_cast<std::uint32_t>(count), std::memory_order_release);
    posted_.notify_one();
  }

  /// Waits until items [0, count) have run, running those the helper has not started; rethrows
  /// the first exception an item threw.
  void wait(std::size_t count) {
    const auto target = static_cast<std::uint32_t>(count);
    // Counters wrap around; distances from base_ do not (a call posts far fewer than 2^31 items).
    for (std::uint32_t d = done_.load(std::memory_order_acquire); static_cast<std::uint32_t>(d - base_) < target;
         d = done_.load(std::memory_order_acquire)) {
      if (!run_next(posted_.load(std::memory_order_acquire)))
        done_.wait(d, std::memory_order_acquire);  // the helper is running item d
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  /// Claims and runs the next item below `posted` if no item is running; false if one is, or if
  /// none is left. claimed_ == done_ means no item is running; claiming moves claimed_ one ahead.
  bool run_next(std::uint32_t posted) noexcept {
    std::uint32_t next = done_.load(std::memory_order_acquire);
    // The helper's `posted` may be older than done_ when the caller ran the items since.
    if (static_cast<std::int32_t>(posted - next) <= 0) return false;
    if (!claimed_.compare_exchange_strong(next, next + 1, std::memory_order_acq_rel)) return false;
    // After a failure the call is abandoned: later items only count as done.
    if (!error_) {
      try {
        job_(context_, static_cast<std::uint32_t>(next - base_));
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    done_.store(next + 1, std::memory_order_release);
    done_.notify_all();
    return true;
  }

  void loop() {
    for (;;) {
      const std::uint32_t posted = posted_.load(std::memory_order_acquire);
      // A posted_ that includes the destructor's increment comes with stop_ set.
      if (stop_.load(std::memory_order_relaxed)) return;
      if (run_next(posted)) continue;
      const std::uint32_t done = done_.load(std::memory_order_acquire);
      if (done == posted)
        posted_.wait(posted, std::memory_order_acquire);  // nothing left: wait for a post
      else if (claimed_.load(std::memory_order_acquire) != done)
        done_.wait(done, std::memory_order_acquire);  // the caller is running an item
    }
  }

  // Set by the calling thread before it posts items, read by whichever thread runs them after it
  // sees them posted.
  Job job_ = nullptr;
  void* context_ = nullptr;
  std::uint32_t base_ = 0;
  // Set by the thread that ran the failing item before it counts the item done; read after that.
  std::exception_ptr error_;
  std::atomic<std::uint32_t> posted_{0};   // items [0, posted_) may run
  std::atomic<std::uint32_t> claimed_{0};  // items [0, claimed_) have been started
  std::atomic<std::uint32_t> done_{0};     // items [0, done_) have finished
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once every member above is initialised
};

/// The calling thread's helper, started on first use and joined when the thread exits.
inline SerialWorker& collective_worker() {
  thread_local SerialWorker worker;
  return worker;
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_COLLECTIVE_DETAIL_SERIALWORKER_HPP_INCLUDED
