// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_FITOPTIONS_HPP_INCLUDED
#define FLOTILLA_TRAIN_FITOPTIONS_HPP_INCLUDED
// FitOptions: what one call of a trainer's fit() does besides training (epochs, metrics, plots,
// checkpoints, logs, progress). The data-parallel Trainer and pipeline::Trainer take the same.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "flotilla/core/error.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/progress.hpp"

namespace flotilla {

/// What one call of fit() does besides training.
struct FitOptions {
  /// Epochs to run in this call (a resumed trainer continues from its epoch()).
  std::size_t epochs = 1;
  /// Per-epoch metrics as JSON lines (.jsonl, .ndjson) or CSV (.csv); empty: none (.json is refused:
  /// the lines are not one JSON document).
  std::filesystem::path metrics_file;
  /// An SVG plot of loss and accuracy per epoch, rewritten after each epoch; empty: none.
  std::filesystem::path plot_file;
  std::string plot_title = "flotilla training";
  /// A checkpoint written after each epoch, atomically; empty: none.
  std::filesystem::path checkpoint_file;
  /// Periodic checkpoint sets in a directory, rotation, and resuming from the newest complete set
  /// (see train/checkpoint_dir.hpp); off unless checkpoints.directory is set.
  CheckpointPolicy checkpoints;
  /// Per-step counters of every worker (compute, exposed communication, update times, bytes,
  /// staleness; pipelines: each rank's stage, compute, wait, send, allreduce and update times,
  /// bytes) as JSON lines; empty: none. Processes other than rank 0's add ".rank<k>".
  std::filesystem::path step_log_file;
  /// A Chrome-trace timeline of compute and communication per rank (pipelines: every forward,
  /// backward, wait and send by micro-batch); empty: none. Every process with a worker writes one:
  /// rank 0's at this path, rank k's at this path + ".rank<k>" (parameter servers record no
  /// events). The files of one job share a clock: scripts/merge_traces.py joins them into one
  /// timeline.
  std::filesystem::path trace_file;
  /// Progress on `log`: a redrawn bar on a terminal, plain lines otherwise.
  ProgressBar::Style progress = ProgressBar::Style::automatic;
  /// Where worker 0 writes progress and epoch summaries; nullptr for none. The trainer's reports
  /// (checkpoints, skipped updates, lost and rejoined workers) go to it too when it is a stream of
  /// the program's own; while it is std::cerr (the default), std::clog or nullptr they are log
  /// records (core/log.hpp, which writes them to stderr unless the program routes them elsewhere
  /// with set_log_sink, or drops them below its level).
  std::ostream* log = &std::cerr;
  /// Stop after this many updates in this call (0: no limit); for quick runs and benchmarks.
  std::uint64_t max_steps = 0;
};

namespace detail {

/// Throws ConfigError naming `field`, the path and the system's reason when `path` cannot be
/// written (a missing or read-only directory, a file without write permission), so that a run
/// learns it before its first step rather than after its last. Leaves an existing file as it was
/// and creates none.
inline void check_writable(const std::filesystem::path& path, const char* field) {
  if (path.empty()) return;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) {
    const int err = errno;
    throw ConfigError(std::string("FitOptions::") + field + ": cannot write '" + path.string() +
                      "': " + (err ? std::strerror(err) : "the file cannot be opened"));
  }
  std::fclose(f);
  if (!existed) std::filesystem::remove(path, ec);
}

/// Checks the output files that this rank writes during fit(): the reporter's (worker 0's or the
/// last stage's) metrics, plot and checkpoint, and its trace (`trace`: fit_trace_file(), or empty).
inline void check_fit_outputs(const FitOptions& fit, bool reporter, const std::filesystem::path& trace) {
  if (reporter) {
    check_writable(fit.metrics_file, "metrics_file");
    check_writable(fit.plot_file, "plot_file");
    check_writable(fit.checkpoint_file, "checkpoint_file");
  }
  check_writable(trace, "trace_file");
}

/// Where a run is in its data: the epoch it is in and the batch that epoch continues from, so that
/// fit() after a fit() stopped by max_steps goes on where it stopped.
struct DataPosition {
  std::uint64_t epoch = 0;
  std::uint64_t batch = 0;
  /// After an epoch's loop: a stopped epoch resumes at batch `reached`; a finished one moves on.
  /// Where a run resumes after an update that leaves the epoch at batch `reached`: the same
  /// epoch at that batch, or the start of the next when that update ended the epoch.
  DataPosition after_update(std::uint64_t reached, std::uint64_t batches_per_epoch) const noexcept {
    return reached == batches_per_epoch ? DataPosition{epoch + 1, 0} : DataPosition{epoch, reached};
  }
  void end_epoch(bool stopped, std::uint64_t reached) noexcept {
    if (stopped) {
      batch = reached;
    } else {
      ++epoch;
      batch = 0;
    }
  }
};

}  // namespace detail

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_FITOPTIONS_HPP_INCLUDED
