// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The checkpoint-set flags of the training examples (docs/reliability.md): the distributed ones
// (distributed_common.hpp) and fashion_mnist_pipeline.cpp take the same, with the same meaning.
#pragma once

#include <flotilla/flotilla.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

#include "flag_help.hpp"

namespace example {

/// The flags' values once parsed, as fit()'s CheckpointPolicy.
struct CheckpointFlags {
  std::string& directory;
  std::size_t& every_steps;
  double& every_seconds;
  std::size_t& keep;
  bool& resume;

  /// ConfigError naming the flag when the values cannot work together.
  flotilla::CheckpointPolicy policy() const {
    if (!(every_seconds >= 0) || !std::isfinite(every_seconds))
      throw flotilla::ConfigError("--checkpoint-seconds: " + std::to_string(every_seconds) + " is not a number of seconds >= 0");
    if (directory.empty() && (every_steps > 0 || every_seconds > 0 || resume))
      throw flotilla::ConfigError("--checkpoint-every, --checkpoint-seconds and --resume need --checkpoint-dir");
    flotilla::CheckpointPolicy p;
    p.directory = directory;
    p.every_steps = every_steps;
    p.every_seconds = every_seconds;
    p.keep = keep;
    p.resume = resume;
    return p;
  }
};

/// Checkpoint sets that a run could not save (a full disk that no removal made room on): the
/// program still prints its report, then exits non-zero.
struct UnsavedSets {
  std::string message;  ///< fit()'s UnsavedCheckpointsError, empty when every set was saved

  /// `status`, or 1 after saying on stderr which sets are missing.
  int exit_status(int status) const {
    if (message.empty()) return status;
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  }
};

/// trainer.fit(args...), whose records are the trainer's history() when fit() ends by
/// UnsavedCheckpointsError (training completed; `unsaved` keeps the message).
template <class Trainer, class... Args>
flotilla::History fit_noting_unsaved(Trainer& trainer, UnsavedSets& unsaved, Args&&... args) {
  try {
    return trainer.fit(std::forward<Args>(args)...);
  } catch (const flotilla::UnsavedCheckpointsError& e) {
    unsaved.message = e.what();
    return trainer.history();
  }
}

/// Adds --checkpoint-dir, --checkpoint-every, --checkpoint-seconds, --checkpoint-keep and --resume.
inline CheckpointFlags add_checkpoint_flags(flotilla::cli::Flags& flags) {
  return {flags.add<std::string>("checkpoint-dir", "",
                                 "directory for periodic checkpoint sets, a file for each part of the job's state "
                                 "(empty: none; --resume reads the newest complete set; see docs/reliability.md)"),
          flags.add<std::size_t>("checkpoint-every", 0, "a checkpoint set every N updates (0: not by steps)"),
          flags.add<double>("checkpoint-seconds", 0, "a checkpoint set every S seconds (0: not by time)"),
          flags.add<std::size_t>("checkpoint-keep", 3, "checkpoint sets kept (0: all)"),
          flags.add<bool>("resume", false, flag_help::resume)};
}

}  // namespace example
