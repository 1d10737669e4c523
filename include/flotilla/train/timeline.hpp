#pragma once
// Per-step counters of one rank, and a timeline of what each rank did when, written in the Chrome
// trace format (open it in chrome://tracing or https://ui.perfetto.dev).
//
// The counters answer "where does a step's time go": computing (forward and backward), waiting for
// communication that backward could not hide (the *exposed* communication time), updating, and
// how many bytes went each way, payload and framing apart. Parameter-server workers also see how
// far ahead of the slowest worker they ran, and how stale their gradients were when applied.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"

namespace flotilla {

/// What one rank did in one step.
struct StepCounters {
  std::uint64_t step = 0;
  double compute_seconds = 0;        ///< forward and backward
  double exposed_comm_seconds = 0;   ///< waiting for communication after backward had finished
  double update_seconds = 0;         ///< the optimizer (or the push/pull round trip, on a server topology)
  TrafficCounters traffic;           ///< bytes and messages moved during the step
  std::uint64_t steps_ahead = 0;     ///< parameter servers: steps ahead of the slowest worker when released
  std::uint64_t staleness = 0;       ///< parameter servers: updates applied between this worker's pull and its push
};

/// Sums and maxima of StepCounters over an epoch.
struct CounterTotals {
  std::uint64_t steps = 0;
  double compute_seconds = 0, exposed_comm_seconds = 0, update_seconds = 0;
  TrafficCounters traffic;
  std::uint64_t max_steps_ahead = 0, max_staleness = 0;

  void add(const StepCounters& c) {
    ++steps;
    compute_seconds += c.compute_seconds;
    exposed_comm_seconds += c.exposed_comm_seconds;
    update_seconds += c.update_seconds;
    traffic += c.traffic;
    max_steps_ahead = std::max(max_steps_ahead, c.steps_ahead);
    max_staleness = std::max(max_staleness, c.staleness);
  }
};

/// A thread-safe list of trace events for the ranks of this process.
class Timeline {
 public:
  using clock = std::chrono::steady_clock;

  explicit Timeline(bool enabled = false) : enabled_(enabled), origin_(clock::now()) {}

  bool enabled() const noexcept { return enabled_; }

  /// Records a complete event ("ph":"X") of `rank` on `lane` (0: compute thread, 1: communication).
  void record(std::string_view name, std::string_view category, std::size_t rank, int lane, clock::time_point begin,
              clock::time_point end) {
    if (!enabled_) return;
    const auto us = [&](clock::time_point t) {
      return std::chrono::duration<double, std::micro>(t - origin_).count();
    };
    const std::lock_guard lock(mutex_);
    events_.push_back(Event{std::string(name), std::string(category), rank, lane, us(begin), us(end) - us(begin)});
  }

  /// Times `f` and records it.
  template <class F>
  decltype(auto) scoped(std::string_view name, std::string_view category, std::size_t rank, int lane, F&& f) {
    const auto begin = clock::now();
    struct Record {
      Timeline* t;
      std::string_view n, c;
      std::size_t r;
      int l;
      clock::time_point b;
      ~Record() { t->record(n, c, r, l, b, clock::now()); }
    } rec{this, name, category, rank, lane, begin};
    return f();
  }

  /// Writes the events as a Chrome trace (JSON array format), atomically.
  void write(const std::filesystem::path& path) const {
    std::vector<Event> events;
    {
      const std::lock_guard lock(mutex_);
      events = events_;
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      if (!out) throw ConfigError("cannot write the timeline to " + tmp.string());
      out << "{\"traceEvents\":[\n";
      bool first = true;
      std::vector<std::size_t> ranks;
      for (const auto& e : events) {
        if (std::find(ranks.begin(), ranks.end(), e.rank) == ranks.end()) ranks.push_back(e.rank);
        char buf[160];
        std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%zu,\"tid\":%d}", e.ts, e.dur,
                      e.rank, e.lane);
        out << (first ? "" : ",\n") << "{\"name\":\"" << e.name << "\",\"cat\":\"" << e.category << "\"" << buf;
        first = false;
      }
      for (const std::size_t r : ranks) {
        out << (first ? "" : ",\n") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r
            << ",\"args\":{\"name\":\"rank " << r << "\"}}";
        first = false;
        for (int lane = 0; lane < 2; ++lane)
          out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << r << ",\"tid\":" << lane
              << ",\"args\":{\"name\":\"" << (lane == 0 ? "compute" : "communication") << "\"}}";
      }
      out << "\n]}\n";
      if (!out.flush()) throw ConfigError("cannot write the timeline to " + tmp.string());
    }
    std::filesystem::rename(tmp, path);
  }

  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return events_.size();
  }

 private:
  struct Event {
    std::string name, category;
    std::size_t rank;
    int lane;
    double ts, dur;
  };
  bool enabled_;
  clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace flotilla
