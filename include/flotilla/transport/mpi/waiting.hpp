// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_MPI_WAITING_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_MPI_WAITING_HPP_INCLUDED
// How the MPI endpoint waits: polls spaced by what the wait is doing (MpiBackoff), and a watchdog
// that bounds a blocking MPI call from a thread of its own (MpiWatchdog).
//
// The watchdog ends the process when it fires, after the program's handler (Options::on_timeout)
// or the default (log the timeout): a blocking MPI call cannot be cancelled, and the thread inside
// it cannot be woken, so the rank can do nothing else, and the others wait for it in the
// collective; the process's end is what makes mpirun stop the job.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "flotilla/core/log.hpp"
#include "flotilla/transport/mpi/options.hpp"

namespace flotilla::transport::mpi {

namespace detail {

/// What one poll of a wait found.
enum class MpiWait {
  done,  ///< the operation has completed
  busy,  ///< not yet, and this rank's MPI calls may be what moves it on (a transfer under way, the
         ///< rounds of a collective): MPI makes progress only inside MPI calls (Open MPI has no
         ///< progress thread), so the wait must not sleep
  idle,  ///< not yet, and nothing is under way: only a message that has not arrived is awaited
};

/// How a polling wait spends the time between polls, by what the wait is doing (timed from when it
/// started doing it):
///  - busy: polls back to back, as MPI's own blocking calls do; only after 10 ms does it yield
///    between polls, for jobs with more ranks than cores, whose peers need this core to move the
///    transfer on. Yielding sooner costs bandwidth on a loaded machine: sched_yield hands the core
///    to any runnable process for a time slice (measured: a 2 MiB exchange took 2 to 4 times as
///    long when yielding after 100 us, with other processes on the machine);
///  - idle: polls back to back for 100 us (most messages are that close), yields until 1 ms, then
///    sleeps, at most 100 us at a time, so that a rank waiting long for a message leaves its core
///    to other threads and still notices the message within about 150 us (the sleep and the
///    kernel's timer slack).
class MpiBackoff {
 public:
  void pause(MpiWait state) {
    const auto now = std::chrono::steady_clock::now();
    if (state != state_) {
      state_ = state;
      since_ = now;
      sleep_ = std::chrono::microseconds(10);
    }
    const auto waited = now - since_;
    if (state == MpiWait::busy) {
      if (waited >= std::chrono::milliseconds(10)) std::this_thread::yield();
      return;
    }
    if (waited < std::chrono::microseconds(100)) return;
    if (waited < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(100));
  }

 private:
  MpiWait state_ = MpiWait::done;  // no pause yet
  std::chrono::steady_clock::time_point since_;
  std::chrono::microseconds sleep_{10};
};

/// Bounds a blocking call from outside: while armed for longer than `timeout`, a thread of its own
/// hands `describe()`'s account to `on_timeout` (empty: log_watchdog_timeout) and ends the process
/// (std::_Exit(1)), which makes mpirun stop every other process of the job. It never calls MPI
/// (the library runs at MPI_THREAD_SERIALIZED, and the main thread is inside MPI when it fires).
/// Arming and disarming are a clock read and two atomic stores, so the guarded call costs what it
/// costs bare, which a barrier before it does not at small sizes.
class MpiWatchdog {
 public:
  MpiWatchdog(std::chrono::milliseconds timeout, std::function<WatchdogTimeout(std::uint64_t)> describe,
              std::function<void(const WatchdogTimeout&)> on_timeout = {})
      : timeout_(timeout), describe_(std::move(describe)), on_timeout_(std::move(on_timeout)),
        thread_([this] { watch(); }) {}
  ~MpiWatchdog() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  /// `detail` travels to describe() if the watchdog fires (the allreduce's element count).
  void arm(std::uint64_t detail) noexcept {
    detail_.store(detail, std::memory_order_relaxed);
    armed_at_.store(now_ns(), std::memory_order_release);
  }
  void disarm() noexcept { armed_at_.store(0, std::memory_order_release); }

 private:
  static std::int64_t now_ns() noexcept {
    // +1: zero means disarmed, and a steady clock may start at zero.
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
               .count() +
           1;
  }

  void watch() {
    const std::int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout_).count();
    // Checks eight times per timeout (between 10 ms and 1 s apart): it fires at most an eighth of
    // the timeout late.
    const auto period = std::clamp<std::chrono::milliseconds>(timeout_ / 8, std::chrono::milliseconds(10),
                                                              std::chrono::milliseconds(1000));
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, period, [&] { return stop_; })) {
      // The clock is read before the arm time: a call that was armed at `since` and still armed
      // after `now` has then really lasted `now - since`.
      const std::int64_t now = now_ns();
      const std::int64_t since = armed_at_.load(std::memory_order_acquire);
      if (since == 0 || now - since < limit) continue;
      fire(detail_.load(std::memory_order_relaxed));
    }
  }

  [[noreturn]] void fire(std::uint64_t detail) noexcept {
    try {
      const WatchdogTimeout what = describe_(detail);
      try {
        if (on_timeout_)
          on_timeout_(what);
        else
          log_watchdog_timeout(what);
      } catch (const std::exception& e) {
        log_watchdog_timeout(what);
        log_message(LogLevel::error, "mpi rank " + std::to_string(what.rank) + " of " + std::to_string(what.ranks),
                    std::string("the watchdog's on_timeout handler threw: ") + e.what());
      } catch (...) {
        log_watchdog_timeout(what);
      }
    } catch (...) {
    }
    // Not exit(): the main thread is inside MPI, and the static destructors and atexit handlers
    // exit() runs could wait on it, or on MPI, for ever.
    std::_Exit(1);
  }

  std::chrono::milliseconds timeout_;
  std::function<WatchdogTimeout(std::uint64_t)> describe_;
  std::function<void(const WatchdogTimeout&)> on_timeout_;
  std::atomic<std::int64_t> armed_at_{0};
  std::atomic<std::uint64_t> detail_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once everything it reads is constructed
};

}  // namespace detail

}  // namespace flotilla::transport::mpi
#endif  // FLOTILLA_TRANSPORT_MPI_WAITING_HPP_INCLUDED
