#pragma once
// What a training loop does about checkpoint sets (FitOptions::checkpoints), the same for
// flotilla::Trainer and pipeline::Trainer: preparing the directory and resuming when fit() starts,
// the rule that says when the next set is due, and the list of saves that failed. What a set's
// files hold, and how the newest complete set is found and old ones rotated, is
// train/checkpoint_dir.hpp; which rank writes which file is each trainer's own.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/train/checkpoint_dir.hpp"

namespace flotilla::detail {

/// The start of a fit() call of `epochs` epochs: refuses an unusable policy (ConfigError naming
/// the field) and, when the policy saves sets, creates its directory and, with `resume`, calls
/// `resume()` (the trainer's resume_from, which returns the
/// epoch the trainer is at afterwards). Returns the epochs this call runs: with `resume`,
/// FitOptions::epochs counts the whole run, so a restarted program trains only what is left (a
/// part-done epoch counts as one). `caller` names the trainer in the error.
template <class Resume>
std::size_t prepare_checkpoint_sets(const CheckpointPolicy& cp, std::size_t epochs, std::string_view caller, Resume&& resume) {
  cp.validate();
  if (!cp.enabled()) return epochs;
  std::error_code ec;
  std::filesystem::create_directories(cp.directory, ec);
  if (ec)
    throw ConfigError(std::string(caller) + ": FitOptions::checkpoints.directory: cannot create " + cp.directory.string() +
                      ": " + ec.message());
  if (!cp.resume) return epochs;
  const std::uint64_t epoch = std::forward<Resume>(resume)();
  return epochs > epoch ? static_cast<std::size_t>(epochs - epoch) : 0;
}

/// When a rank's training loop saves its next set: after every `every_steps`-th update (counted
/// from the start of the run, so every rank and a resumed run agree), when `every_seconds` have
/// passed on this rank's clock since its last save (or since fit() began), and when fit() ends;
/// never twice for one step. One per rank and fit() call.
class CheckpointClock {
 public:
  using clock = std::chrono::steady_clock;

  /// `start_step`: where this fit() call starts. With `resume`, a run past step 0 starts from the
  /// set resume_from() loaded, which needs no saving again.
  CheckpointClock(const CheckpointPolicy& cp, std::uint64_t start_step)
      : policy_(&cp),
        has_saved_(cp.enabled() && cp.resume && start_step > 0),
        saved_step_(start_step),
        last_save_(clock::now()) {}

  /// Whether the set of `step` was saved (or loaded) already.
  bool saved(std::uint64_t step) const noexcept { return has_saved_ && saved_step_ == step; }
  /// The steps rule: the same answer on every rank.
  bool due_by_steps(std::uint64_t step) const noexcept {
    return policy_->every_steps != 0 && step % policy_->every_steps == 0;
  }
  /// Whether the policy saves by time at all (the same on every rank, unlike due_by_time()).
  bool timed() const noexcept { return policy_->every_seconds > 0; }
  /// The seconds rule on this rank's clock: ranks that must save together combine their answers.
  bool due_by_time() const {
    return timed() && clock::now() - last_save_ >= std::chrono::duration<double>(policy_->every_seconds);
  }
  /// Either rule, for a rank that decides alone.
  bool due(std::uint64_t step) const { return !saved(step) && (due_by_steps(step) || due_by_time()); }
  /// Whether fit()'s end saves the set of `step`.
  bool due_at_exit(std::uint64_t step) const noexcept { return policy_->at_exit && !saved(step); }

  /// A set of `step` was just saved (or its save failed: the next try waits for the next rule).
  void mark_saved(std::uint64_t step) {
    has_saved_ = true;
    saved_step_ = step;
    last_save_ = clock::now();
  }

 private:
  const CheckpointPolicy* policy_;
  // A flag and a step rather than std::optional: GCC 12 misreports the optional's value as
  // maybe-uninitialized where the clock is inlined into the trainers' loops.
  bool has_saved_;
  std::uint64_t saved_step_;
  clock::time_point last_save_;
};

/// The saves that failed during a trainer's life. A failed save does not stop training: it is
/// written to the log when it happens and kept for checkpoint_failures(). The ranks' threads may
/// note failures at once.
class CheckpointFailures {
 public:
  void note(std::string what, std::ostream* log) {
    const std::lock_guard lock(mutex_);
    if (log) *log << "checkpoint: save failed, training goes on: " << what << "\n";
    list_.push_back(std::move(what));
  }
  std::vector<std::string> list() const {
    const std::lock_guard lock(mutex_);
    return list_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
};

}  // namespace flotilla::detail
