// The checkpoint-set flags of the training examples (docs/reliability.md): the distributed ones
// (distributed_common.hpp) and fashion_mnist_pipeline.cpp take the same, with the same meaning.
#pragma once

#include <flotilla/flotilla.hpp>

#include <cmath>
#include <cstddef>
#include <string>

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

/// Adds --checkpoint-dir, --checkpoint-every, --checkpoint-seconds, --checkpoint-keep and --resume.
inline CheckpointFlags add_checkpoint_flags(flotilla::cli::Flags& flags, const std::string& what_a_set_is) {
  return {flags.add<std::string>("checkpoint-dir", "",
                                 "directory for periodic checkpoint sets, " + what_a_set_is + " (empty: none; see docs/reliability.md)"),
          flags.add<std::size_t>("checkpoint-every", 0, "a checkpoint set every N updates (0: not by steps)"),
          flags.add<double>("checkpoint-seconds", 0, "a checkpoint set every S seconds (0: not by time)"),
          flags.add<std::size_t>("checkpoint-keep", 3, "checkpoint sets kept (0: all)"),
          flags.add<bool>("resume", false,
                          "start from the newest complete set in --checkpoint-dir, if any (for restarts: "
                          "flotilla-launch --restarts N); --epochs then counts the whole run")};
}

}  // namespace example
