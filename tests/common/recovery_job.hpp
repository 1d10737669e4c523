// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// For the multi-process recovery tests (tests/distributed/*_recovery.cpp, ps_trainer_rejoin.cpp):
// a driver starts its own program once per rank through transport::launch, lets every rank run to
// its end whatever happens to the others, keeps what each printed, and then checks how each ended
// and what it said. This header holds that shared part; each driver keeps its scenario (what it
// kills, what the survivors must report).
#include <signal.h>
#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/transport/tcp.hpp"

namespace flotilla_test {

/// How a job ran: how every rank ended, what each printed (both streams, a line per line), and
/// when it started and ended.
struct JobRun {
  using Clock = std::chrono::steady_clock;

  flotilla::transport::LaunchResult result;
  std::vector<std::string> out;
  Clock::time_point started, finished;

  std::size_t ranks() const noexcept { return out.size(); }
  const flotilla::transport::RankExit& exit(std::size_t rank) const { return result.ranks.at(rank); }
  std::string describe(std::size_t rank) const { return exit(rank).describe(rank); }
  long long milliseconds() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(finished - started).count();
  }
  double seconds() const { return std::chrono::duration<double>(finished - started).count(); }

  /// Every rank's end and output, so that a failed run in ctest's log shows what happened.
  void print() const {
    for (std::size_t r = 0; r < ranks(); ++r) std::printf("--- rank %zu: %s\n%s", r, describe(r).c_str(), out[r].c_str());
  }
};

// Sanitized builds run slower: tests/CMakeLists.txt multiplies the tests' time bounds.
#ifndef FLOTILLA_TEST_TIME_SCALE
#define FLOTILLA_TEST_TIME_SCALE 1
#endif
inline constexpr int time_scale = FLOTILLA_TEST_TIME_SCALE;

/// What a job needs besides the launcher's defaults.
struct JobSpec {
  std::size_t ranks = 1;
  /// The program and its arguments, for every rank.
  std::vector<std::string> command;
  /// The whole job's bound (times time_scale): a rank that hangs is stopped then, and the
  /// checks say so.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Added to the environment every rank gets (FLOTILLA_HEARTBEAT_MS=200 always: a dead peer is
  /// noticed in well under a second, where the tests' time bounds expect it).
  std::vector<std::string> environment;
  /// Called after each line a rank printed has been added to `out`, with the lock on `out` held:
  /// for drivers that act on what the job says while it runs (start a process once a server
  /// says where). It must not block for long: the launcher's output loop waits on it.
  std::function<void(std::size_t rank, const std::vector<std::string>& out)> on_line;
};

/// Runs the job to its end: a rank that fails does not stop the others (the survivors' behaviour
/// is what the tests check), and the launcher's own messages are left out of the output.
inline JobRun run_job(JobSpec spec) {
  JobRun run;
  run.out.resize(spec.ranks);
  std::mutex m;
  flotilla::transport::LaunchOptions o;
  o.ranks = spec.ranks;
  o.command = std::move(spec.command);
  o.stop_on_failure = false;
  o.timeout = spec.timeout * time_scale;
  o.environment = {"FLOTILLA_HEARTBEAT_MS=200"};
  o.environment.insert(o.environment.end(), spec.environment.begin(), spec.environment.end());
  o.on_output = [&](std::size_t r, int, std::string_view line) {
    const std::lock_guard lock(m);
    run.out.at(r) += std::string(line) + "\n";
    if (spec.on_line) spec.on_line(r, run.out);
  };
  o.on_message = [](const std::string&) {};
  run.started = JobRun::Clock::now();
  run.result = flotilla::transport::launch(o);
  run.finished = JobRun::Clock::now();
  return run;
}

/// The checks of one test: each failed one is printed with why, and the verdict is the exit status.
class Checks {
 public:
  void expect(bool condition, const std::string& why) {
    if (condition) return;
    std::printf("FAILED: %s\n", why.c_str());
    ok_ = false;
  }

  /// `who` (e.g. "rank 2") was killed by SIGKILL, as by kill -9: it did not exit on its own.
  void killed(const JobRun& run, std::size_t rank, const std::string& who) {
    const auto& e = run.exit(rank);
    expect(!e.exited && e.signal == SIGKILL, who + " should have been killed");
  }

  /// The rank exited 0; `what` says what it should have done ("should have finished training").
  void finished(const JobRun& run, std::size_t rank, const std::string& what) {
    expect(run.exit(rank).ok(), run.describe(rank) + ", " + what);
  }

  /// The rank stopped with the status the test programs give a transport error (3), naming the
  /// dead rank and its host: the message a user needs to find what went wrong.
  void stopped_naming(const JobRun& run, std::size_t rank, std::size_t dead) {
    const auto& e = run.exit(rank);
    expect(e.exited && e.status == 3, run.describe(rank) + ", expected status 3");
    expect(run.out.at(rank).find("rank " + std::to_string(dead) + " at 127.0.0.1:") != std::string::npos,
           "rank " + std::to_string(rank) + " should name rank " + std::to_string(dead) + " and its host");
  }

  /// The whole job took less than `limit`: `what` ("the job should stop at once") happened when
  /// it should have, not after some timeout let it end.
  void in_time(const JobRun& run, std::chrono::milliseconds limit, const std::string& what) {
    limit *= time_scale;
    expect(run.milliseconds() < limit.count(),
           what + ", not after a timeout (took " + std::to_string(run.milliseconds()) + " ms)");
  }

  bool ok() const noexcept { return ok_; }

  /// Prints OK or FAILED and returns the exit status.
  int verdict() const {
    std::printf(ok_ ? "OK\n" : "FAILED\n");
    return ok_ ? 0 : 1;
  }

 private:
  bool ok_ = true;
};

/// A fresh directory under /tmp for a job's files (step logs), removed with everything in it.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const std::string& prefix) {
    std::string name = "/tmp/" + prefix + ".XXXXXX";
    if (!::mkdtemp(name.data()))
      throw std::runtime_error("cannot create a temporary directory " + name + ": " + std::strerror(errno));
    path_ = name;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// Reading what the ranks printed.

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline std::size_t occurrences(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (auto at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

/// The lines of `s` that start with `prefix`, without their newlines.
inline std::vector<std::string> lines_with(const std::string& s, const std::string& prefix) {
  std::vector<std::string> found;
  std::size_t at = 0;
  while (at < s.size()) {
    const auto end = s.find('\n', at);
    std::string line = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(prefix, 0) == 0) found.push_back(std::move(line));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return found;
}

/// Lines joined again, each ending with a newline: one string to compare between ranks.
inline std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

/// The number after "name=" in a line such as "history epoch=3 loss=0.41"; -1 when it is absent.
inline double field(const std::string& line, const std::string& name) {
  const auto at = line.find(name + "=");
  return at == std::string::npos ? -1.0 : std::stod(line.substr(at + name.size() + 1));
}

/// The text after the first `marker` in `s`, up to a space or the end of its line; empty when
/// `marker` is absent.
inline std::string word_after(const std::string& s, const std::string& marker) {
  const auto at = s.find(marker);
  if (at == std::string::npos) return {};
  const auto from = at + marker.size();
  const auto end = s.find_first_of(" \n", from);
  return s.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

/// A test program's main(): `body` decides by its arguments whether it drives or is a rank; an
/// exception it lets out is printed and ends the program with status 1 (not an abort).
template <class Body>
int guarded_main(Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test
