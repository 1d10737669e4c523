// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_THREADPOOL_HPP_INCLUDED
#define FLOTILLA_CORE_THREADPOOL_HPP_INCLUDED
// A fork-join pool for splitting one batch across cores. A training step lasts well under a
// millisecond for small models, so dispatch must cost microseconds: workers wait on an atomic
// generation counter (C++20 atomic wait, which spins briefly before sleeping) rather than on a
// queue, and the calling thread does share 0 of the work itself.
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace flotilla::detail {

class ThreadPool {
 public:
  /// A pool of `threads` participants: the caller plus threads - 1 workers.
  explicit ThreadPool(std::size_t threads) : size_(threads == 0 ? 1 : threads) {
    workers_.reserve(size_ - 1);
    for (std::size_t i = 1; i < size_; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  std::size_t size() const noexcept { return size_; }

  /// Calls f(i) for every i in [0, size()) in parallel (i = 0 on the caller) and returns when all
  /// calls have returned. The first exception thrown by any call is rethrown here.
  template <class F>
  void run(F&& f) {
    if (size_ == 1) {
      f(std::size_t{0});
      return;
    }
    job_ = [](void* ctx, std::size_t i) { (*static_cast<std::remove_reference_t<F>*>(ctx))(i); };
    ctx_ = static_cast<void*>(&f);
    error_ = nullptr;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    invoke(0);
    spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; });
    for (std::size_t left = pending_.load(std::memory_order_acquire); left != 0;
         left = pending_.load(std::memory_order_acquire))
      pending_.wait(left, std::memory_order_acquire);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void invoke(std::size_t i) noexcept {
    try {
      job_(ctx_, i);
    } catch (...) {
      const std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void work(std::size_t i) {
    std::size_t seen = 0;
    for (;;) {
      // Steps follow each other within microseconds: spin a little before sleeping, since waking a
      // sleeping thread (a futex call and a reschedule) costs more than a short step's gap.
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
      generation_.wait(seen, std::memory_order_acquire);
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_relaxed)) return;
      invoke(i);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  /// Polls `done` for at most some tens of microseconds (then the caller sleeps in atomic::wait).
  template <class Done>
  static void spin_until(Done&& done) noexcept {
    for (int i = 0; i < 2000 && !done(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  std::size_t size_;
  std::vector<std::thread> workers_;
  std::atomic<std::size_t> generation_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<bool> stop_{false};
  void (*job_)(void*, std::size_t) = nullptr;
  void* ctx_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

/// Splits [0, n) into `parts` contiguous ranges of nearly equal size; returns range `k`.
inline std::pair<std::size_t, std::size_t> split_range(std::size_t n, std::size_t parts, std::size_t k) {
  const std::size_t base = n / parts, extra = n % parts;
  const std::size_t begin = k * base + (k < extra ? k : extra);
  return {begin, begin + base + (k < extra ? 1 : 0)};
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_THREADPOOL_HPP_INCLUDED
