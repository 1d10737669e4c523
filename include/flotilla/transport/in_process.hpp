// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_INPROCESS_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_INPROCESS_HPP_INCLUDED
// The in-process transport: every rank is a thread of this process, and messages are copied
// between per-rank mailboxes. It is flotilla's embedded default: several workers on one machine
// with no setup (TensorFlow's in-graph replication), and the reference the other transports are
// tested against.
//
// When one rank fails, the job is aborted: every rank blocked in a wait wakes with a
// TransportError that names the failed rank, and run() rethrows the original failure.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/launcher.hpp"

namespace flotilla::transport {

struct InProcessOptions {
  /// The longest any wait may last before it fails with TransportError. In-process ranks cannot
  /// die separately (a failure aborts the job at once), so this only bounds a deadlock.
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  /// Whether a job may run in this process while a launcher's variables say the process is one of
  /// several of a job (flotilla-launch, torchrun, mpirun, srun: transport/launcher.hpp). false (the
  /// default) refuses with a ConfigError naming them: every process would otherwise train a model
  /// of its own, alone. true for in-process work beside a multi-process job (a reference run, an
  /// evaluation).
  bool beside_launched_job = false;
};

namespace detail {

class InProcessWorld {
 public:
  struct Message {
    std::size_t from;
    Tag tag;
    std::vector<std::byte> bytes;
  };
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<Message> queue;
  };

  explicit InProcessWorld(std::size_t ranks) : size_(ranks) {
    boxes_.reserve(ranks);
    for (std::size_t i = 0; i < ranks; ++i) boxes_.push_back(std::make_unique<Mailbox>());
  }

  std::size_t size() const noexcept { return size_; }
  Mailbox& box(std::size_t rank) { return *boxes_[rank]; }

  /// Wakes every waiting rank with `reason`; later waits fail at once. The first caller is
  /// remembered as the cause.
  void abort(std::size_t failed_rank, const std::string& reason) {
    {
      const std::lock_guard lock(abort_mutex_);
      if (aborted_) return;
      abort_reason_ = reason;
      failed_rank_ = failed_rank;
      aborted_ = true;
    }
    for (auto& b : boxes_) {
      const std::lock_guard lock(b->mutex);
      b->arrived.notify_all();
    }
    const std::lock_guard lock(barrier_mutex_);
    barrier_cv_.notify_all();
  }
  bool aborted() const {
    const std::lock_guard lock(abort_mutex_);
    return aborted_;
  }
  std::string abort_reason() const {
    const std::lock_guard lock(abort_mutex_);
    return abort_reason_;
  }
  /// The rank whose failure aborted the job (meaningful once aborted()).
  std::size_t failed_rank() const {
    const std::lock_guard lock(abort_mutex_);
    return failed_rank_;
  }

  /// A central barrier with a generation count, so that it can be reused at once.
  template <class OnTimeout>
  void barrier(std::chrono::steady_clock::time_point deadline, OnTimeout&& on_timeout) {
    std::unique_lock lock(barrier_mutex_);
    const std::size_t generation = barrier_generation_;
    if (++barrier_arrived_ == size_) {
      barrier_arrived_ = 0;
      ++barrier_generation_;
      barrier_cv_.notify_all();
      return;
    }
    while (barrier_generation_ == generation) {
      if (aborted()) return;
      if (barrier_cv_.wait_until(lock, deadline) == std::cv_status::timeout && barrier_generation_ == generation) {
        on_timeout(size_ - barrier_arrived_);
        return;
      }
    }
  }

 private:
  std::size_t size_;
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  mutable std::mutex abort_mutex_;
  bool aborted_ = false;
  std::string abort_reason_;
  std::size_t failed_rank_ = 0;
  std::mutex barrier_mutex_;
  std::condition_variable barrier_cv_;
  std::size_t barrier_arrived_ = 0;
  std::size_t barrier_generation_ = 0;
};

}  // namespace detail

/// One rank's endpoint. See the Transport concept for the semantics of each operation.
class InProcessEndpoint {
 public:
  InProcessEndpoint(std::shared_ptr<detail::InProcessWorld> world, std::size_t rank, InProcessOptions options)
      : world_(std::move(world)), rank_(rank), options_(options) {}

  std::size_t rank() const noexcept { return rank_; }
  /// Every rank is a thread of this process (KnowsRanksOnHost).
  std::size_t ranks_on_this_host() const noexcept { return size(); }
  std::size_t size() const noexcept { return world_->size(); }
  TrafficCounters counters() const noexcept { return counters_; }

  void send(std::size_t peer, Tag tag, std::span<const std::byte> bytes) {
    check_peer(peer, "send");
    check_not_aborted("send", peer, tag);
    auto& box = world_->box(peer);
    {
      const std::lock_guard lock(box.mutex);
      box.queue.push_back({rank_, tag, std::vector<std::byte>(bytes.begin(), bytes.end())});
    }
    box.arrived.notify_all();
    counters_.payload_bytes_sent += bytes.size();
    ++counters_.messages_sent;
  }

  void recv(std::size_t peer, Tag tag, std::span<std::byte> buffer) {
    check_peer(peer, "recv");
    take([&](const detail::InProcessWorld::Message& m) { return m.from == peer && m.tag == tag; }, buffer, "recv",
         peer, tag);
  }

  std::size_t recv_any(Tag tag, std::span<std::byte> buffer) {
    return take([&](const detail::InProcessWorld::Message& m) { return m.tag == tag; }, buffer, "recv_any", size(),
                tag);
  }

  void sendrecv(std::size_t to, Tag tag, std::span<const std::byte> out, std::size_t from, std::span<std::byte> in) {
    send(to, tag, out);  // never blocks in-process, so the receive cannot deadlock behind it
    recv(from, tag, in);
  }

  void barrier() {
    check_not_aborted("barrier", size(), 0);
    world_->barrier(deadline(), [&](std::size_t missing) {
      throw TransportError(who() + ": barrier timed out after " + std::to_string(options_.timeout.count()) +
                           " ms waiting for " + std::to_string(missing) + " rank(s)");
    });
    check_not_aborted("barrier", size(), 0);
  }

 private:
  std::chrono::steady_clock::time_point deadline() const { return std::chrono::steady_clock::now() + options_.timeout; }

  std::string who() const { return "in-process rank " + std::to_string(rank_) + " of " + std::to_string(size()); }

  static std::string describe(std::string_view op, std::size_t peer, Tag tag, std::size_t size) {
    return std::string(op) + (peer < size ? " from rank " + std::to_string(peer) : std::string(" from any rank")) +
           " (tag " + std::to_string(tag) + ")";
  }

  void check_peer(std::size_t peer, const char* op) const {
    if (peer >= size())
      throw TransportError(who() + ": " + op + " to rank " + std::to_string(peer) + ", but the job has " +
                           std::to_string(size()) + " ranks");
  }

  void check_not_aborted(std::string_view op, std::size_t peer, Tag tag) const {
    if (world_->aborted())
      throw TransportError(who() + ": " + describe(op, peer, tag, size()) + " abandoned: " + world_->abort_reason());
  }

  template <class Match>
  std::size_t take(Match&& match, std::span<std::byte> buffer, std::string_view op, std::size_t peer, Tag tag) {
    auto& box = world_->box(rank_);
    const auto until = deadline();
    std::unique_lock lock(box.mutex);
    for (;;) {
      for (auto it = box.queue.begin(); it != box.queue.end(); ++it) {
        if (!match(*it)) continue;
        detail::InProcessWorld::Message m = std::move(*it);
        box.queue.erase(it);
        lock.unlock();
        // A refused message still arrived: it is counted, and consumed, like any other.
        counters_.payload_bytes_received += m.bytes.size();
        ++counters_.messages_received;
        if (m.bytes.size() != buffer.size())
          throw TransportError(who() + ": " + describe(op, m.from, tag, size()) + " expected " +
                               std::to_string(buffer.size()) + " bytes, the message has " + std::to_string(m.bytes.size()));
        if (!m.bytes.empty()) std::memcpy(buffer.data(), m.bytes.data(), m.bytes.size());
        return m.from;
      }
      if (world_->aborted()) {
        lock.unlock();
        check_not_aborted(op, peer, tag);
      }
      if (box.arrived.wait_until(lock, until) == std::cv_status::timeout && std::chrono::steady_clock::now() >= until)
        throw TransportError(who() + ": " + describe(op, peer, tag, size()) + " timed out after " +
                             std::to_string(options_.timeout.count()) + " ms");
    }
  }

  std::shared_ptr<detail::InProcessWorld> world_;
  std::size_t rank_;
  InProcessOptions options_;
  TrafficCounters counters_{};
};

/// The in-process backend: run() starts one thread per rank (rank 0 on the calling thread).
struct InProcess {
  static constexpr std::string_view name = "in-process";
  static constexpr bool in_process = true;
  using options = InProcessOptions;
  using endpoint = InProcessEndpoint;

  /// The refusal of run() when `launch` says this process is one of several of a job.
  static void refuse_under_launcher(const LaunchEnvironment& launch) {
    if (!launch.several()) return;
    throw ConfigError("this process is rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world_size) +
                      " of a job that " + std::string(launcher_name(launch.launcher)) + " started (" + launch.variables +
                      "), but trains with the in-process transport, which runs a whole job in one process: each of the " +
                      std::to_string(launch.world_size) +
                      " would train a model of its own. Use transport::Tcp (it joins the job from these variables) or "
                      "transport::Mpi, or start one process (InProcessOptions::beside_launched_job allows in-process work "
                      "beside the job)");
  }

  static void run(const options& o, std::size_t ranks, const std::function<void(endpoint&)>& body) {
    if (ranks == 0) throw ConfigError("InProcess::run: a job needs at least one rank");
    if (!o.beside_launched_job) refuse_under_launcher(launch_environment());
    auto world = std::make_shared<detail::InProcessWorld>(ranks);
    std::vector<std::exception_ptr> errors(ranks);
    auto run_rank = [&](std::size_t r) {
      try {
        endpoint e(world, r, o);
        body(e);
      } catch (const std::exception& ex) {
        errors[r] = std::current_exception();
        world->abort(r, "rank " + std::to_string(r) + " failed: " + ex.what());
      } catch (...) {
        errors[r] = std::current_exception();
        world->abort(r, "rank " + std::to_string(r) + " failed");
      }
    };
    std::vector<std::thread> threads;
    threads.reserve(ranks - 1);
    for (std::size_t r = 1; r < ranks; ++r) threads.emplace_back(run_rank, r);
    run_rank(0);
    for (auto& t : threads) t.join();
    // The rank that aborted the job holds the cause; the others were woken by the abort.
    if (world->aborted()) std::rethrow_exception(errors[world->failed_rank()]);
  }
};

// Threads of one process are never lost on their own: the only ability is knowing how many ranks
// share the host (all of them).
static_assert(Transport<InProcessEndpoint> && KnowsRanksOnHost<InProcessEndpoint>);

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_INPROCESS_HPP_INCLUDED
