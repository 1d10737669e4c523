// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_TIMELINE_HPP_INCLUDED
#define FLOTILLA_TRAIN_TIMELINE_HPP_INCLUDED
// Per-step counters of one rank, and a timeline of what each rank did when, written in the Chrome
// trace format (open it in chrome://tracing or https://ui.perfetto.dev).
//
// Timestamps are the steady clock's own (microseconds since its epoch: CLOCK_MONOTONIC on Linux,
// which every process of a machine shares), so the files that the processes of one job write line
// up as they are: scripts/merge_traces.py joins them into one timeline. Each file also records its
// host and the steady clock's offset from the system clock, with which the script aligns files
// from different hosts (to within the hosts' clock synchronisation, about a millisecond with NTP).
//
// The counters answer "where does a step's time go": computing (forward and backward), waiting for
// communication that backward could not hide (the *exposed* communication time), updating, and
// how many bytes went each way, payload and framing apart. Parameter-server workers also see how
// far ahead of the slowest worker they ran, and how stale their gradients were when applied.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/train/metrics_log.hpp"

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

namespace detail {

/// The file of rank `rank`'s process for a per-process output (step log, trace): the path itself
/// for rank 0, path + ".rank<k>" for rank k.
inline std::filesystem::path per_rank_file(const std::filesystem::path& path, std::size_t rank) {
  return rank == 0 ? path : std::filesystem::path(path.string() + ".rank" + std::to_string(rank));
}

/// Appends `,"<name>":<value>` for every traffic counter (traffic_counter_fields' names and
/// order): what every trainer's step-log line carries of a step's traffic.
inline void append_traffic_fields(std::string& line, const TrafficCounters& c) {
  for (const auto& f : traffic_counter_fields) line += ",\"" + std::string(f.name) + "\":" + std::to_string(c.*f.member);
}

}  // namespace detail

/// A thread-safe list of trace events for the ranks of this process.
class Timeline {
 public:
  using clock = std::chrono::steady_clock;

  explicit Timeline(bool enabled = false) : enabled_(enabled) {
    // The steady clock's offset from the system clock, read once: what aligns the files of
    // different hosts (merge_traces.py).
    const auto steady = clock::now();
    const auto system = std::chrono::system_clock::now();
    steady_to_unix_us_ = std::chrono::duration<double, std::micro>(system.time_since_epoch()).count() - microseconds(steady);
  }

  /// A time point as the trace writes it: microseconds since the steady clock's epoch.
  static double microseconds(clock::time_point t) noexcept {
    return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
  }

  bool enabled() const noexcept { return enabled_; }

  /// Records a complete event ("ph":"X") of `rank` on `lane` (0: compute thread, 1: communication).
  void record(std::string_view name, std::string_view category, std::size_t rank, int lane, clock::time_point begin,
              clock::time_point end) {
    if (!enabled_) return;
    const double b = microseconds(begin);
    const std::lock_guard lock(mutex_);
    events_.push_back(Event{std::string(name), std::string(category), rank, lane, b, microseconds(end) - b});
  }

  /// Writes the events as a Chrome trace (JSON object format, with this process's host and clock
  /// offset under "otherData"), atomically.
  FLOTILLA_DECL void write(const std::filesystem::path& path) const;

  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return events_.size();
  }

  /// This machine's name, as the trace records it ("" if the system will not say).
  FLOTILLA_DECL static std::string host_name();

 private:
  struct Event {
    std::string name, category;
    std::size_t rank;
    int lane;
    double ts, dur;
  };
  bool enabled_;
  double steady_to_unix_us_ = 0;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

namespace detail {

/// FitOptions::step_log_file during one fit() call, for both trainers. In-process, the ranks'
/// threads write to one file, opened before they start; over processes, each process writes its
/// own, rank k's at the path + ".rank<k>", opened when its rank is known. A resumed run (`append`)
/// continues its file. Every line is flushed as it is written, so a job that is killed keeps the
/// lines of the steps it finished.
class StepLog {
 public:
  /// No step log when `path` is empty.
  StepLog(std::filesystem::path path, bool in_process, bool append)
      : path_(std::move(path)), in_process_(in_process), append_(append) {
    if (in_process_ && !path_.empty()) open(path_);
  }
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;

  /// Over processes: opens the file of this process's rank, once. In-process: nothing to do.
  void open_rank(std::size_t rank) {
    if (!in_process_ && !path_.empty() && !out_.is_open()) open(per_rank_file(path_, rank));
  }
  bool enabled() const noexcept { return out_.is_open(); }

  /// Writes one line (given without its newline); the ranks' threads may call at once.
  void write(std::string line) {
    line += '\n';
    const std::lock_guard lock(mutex_);
    out_ << line;
    out_.flush();
  }

 private:
  void open(const std::filesystem::path& file) {
    out_.open(file, append_ ? std::ios::app : std::ios::trunc);
    if (!out_) throw ConfigError("cannot write the step log " + file.string());
  }

  std::filesystem::path path_;
  bool in_process_, append_;
  std::ofstream out_;
  std::mutex mutex_;
};

/// The trace file of fit() that rank `rank` writes: in-process one file for all ranks, written by
/// the reporter; over processes each rank's own. Empty where the rank writes none.
inline std::filesystem::path fit_trace_file(const std::filesystem::path& path, bool in_process, std::size_t rank,
                                            bool reporter) {
  if (path.empty() || (in_process && !reporter)) return {};
  return in_process ? path : per_rank_file(path, rank);
}

/// Writes fit()'s timeline, when it recorded one: in-process every rank's events to `path`; over
/// processes this process's to the file of `rank` (none: a process that records no events, such as
/// a parameter server's).
inline void write_fit_trace(const Timeline& timeline, const std::filesystem::path& path, bool in_process,
                            std::optional<std::size_t> rank) {
  if (!timeline.enabled() || (!in_process && !rank)) return;
  timeline.write(fit_trace_file(path, in_process, rank.value_or(0), true));
}

}  // namespace detail

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL void Timeline::write(const std::filesystem::path& path) const {
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
    // Every number is formatted here, not by the stream or printf, whose decimal point and grouping
    // are the program's locale's: microseconds to 3 decimals with to_chars, integers with to_string.
    auto number = [](double v) {
      char b[64];
      const auto r = std::to_chars(b, b + sizeof b, v, std::chars_format::fixed, 3);
      return std::string(b, r.ptr);
    };
    std::string text = "{\"traceEvents\":[\n";
    bool first = true;
    std::vector<std::size_t> ranks;
    for (const auto& e : events) {
      if (std::find(ranks.begin(), ranks.end(), e.rank) == ranks.end()) ranks.push_back(e.rank);
      text += first ? "{\"name\":" : ",\n{\"name\":";
      detail::metrics_append_json_string(text, e.name);
      text += ",\"cat\":";
      detail::metrics_append_json_string(text, e.category);
      text += ",\"ph\":\"X\",\"ts\":" + number(e.ts) + ",\"dur\":" + number(e.dur) + ",\"pid\":" + std::to_string(e.rank) +
              ",\"tid\":" + std::to_string(e.lane) + "}";
      first = false;
    }
    for (const std::size_t r : ranks) {
      const std::string pid = std::to_string(r);
      text += (first ? "" : ",\n") + std::string("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":") + pid +
              ",\"args\":{\"name\":\"rank " + pid + "\"}}";
      first = false;
      for (int lane = 0; lane < 2; ++lane)
        text += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + std::to_string(lane) +
                ",\"args\":{\"name\":\"" + (lane == 0 ? "compute" : "communication") + "\"}}";
    }
    text += "\n],\n\"otherData\":{\"host\":";
    detail::metrics_append_json_string(text, host_name());
    text += ",\"clock\":\"steady\",\"steady_to_unix_us\":" + number(steady_to_unix_us_) + "}}\n";
    out << text;
    if (!out.flush()) throw ConfigError("cannot write the timeline to " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

FLOTILLA_DECL std::string Timeline::host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_TIMELINE_HPP_INCLUDED
