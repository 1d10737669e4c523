#pragma once
// Runs an action on each range of a buffer as soon as backward has made it final, on a thread of
// its own: the mechanism behind overlapping communication with backward. The ring topology's
// action allreduces a gradient bucket; the parameter-server topology's pushes a shard.
//
// Ranges are given in the order backward finalises them (from the end of the buffer). Compute
// threads call ready(offset) when [offset, end) is final; the runner's thread then takes every
// range lying wholly in it, in order. After backward, finish() waits for the rest: that wait is
// the communication backward could not hide.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "flotilla/topology/ring.hpp"

namespace flotilla::detail {

class ReadyRunner {
 public:
  /// `action(index, range)` runs on the runner's thread for each range in turn.
  ReadyRunner(std::vector<Range> ranges, std::function<void(std::size_t, Range)> action)
      : ranges_(std::move(ranges)), action_(std::move(action)) {
    thread_ = std::thread([this] { loop(); });
  }
  ReadyRunner(const ReadyRunner&) = delete;
  ReadyRunner& operator=(const ReadyRunner&) = delete;
  ~ReadyRunner() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  const std::vector<Range>& ranges() const noexcept { return ranges_; }

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

  /// Marks everything final, waits until every range's action has run, and returns the seconds
  /// spent waiting. Rethrows the first failure of an action.
  double finish() {
    ready(0);
    const auto begin = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !armed_; });
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (error_) std::rethrow_exception(error_);
    return waited;
  }

 private:
  bool runnable() const { return armed_ && (next_ == ranges_.size() || ready_from_ <= ranges_[next_].begin); }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || runnable(); });
      if (stop_) return;
      if (next_ == ranges_.size()) {
        armed_ = false;
        done_.notify_all();
        continue;
      }
      const std::size_t index = next_;
      lock.unlock();
      try {
        action_(index, ranges_[index]);
        lock.lock();
        ++next_;
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        next_ = ranges_.size();
      }
    }
  }

  std::vector<Range> ranges_;
  std::function<void(std::size_t, Range)> action_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::size_t ready_from_ = 0, next_ = 0;
  bool armed_ = false, stop_ = false;
  std::exception_ptr error_;
};

}  // namespace flotilla::detail
