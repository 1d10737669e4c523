// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_CHECKPOINTSAVING_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_CHECKPOINTSAVING_HPP_INCLUDED
// What a training loop does about checkpoint sets (FitOptions::checkpoints), the same for
// flotilla::Trainer and pipeline::Trainer: preparing the directory and resuming when fit() starts,
// the rule that says when the next set is due, and the list of saves that failed. What a set's
// files hold, and how the newest complete set is found and old ones rotated, is
// train/checkpoint_dir.hpp; which rank writes which file is each trainer's own.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "flotilla/core/log.hpp"
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
/// written to the log when it happens and kept for checkpoint_failures(), with the step whose set
/// it leaves incomplete. The ranks' threads may note failures at once.
class CheckpointFailures {
 public:
  void note(std::uint64_t step, std::string what, std::ostream* log) {
    const std::lock_guard lock(mutex_);
    flotilla::detail::log_to(log, LogLevel::warning, "checkpoint", "save failed, training goes on: " + what);
    list_.push_back(std::move(what));
    steps_.push_back(step);
  }
  std::vector<std::string> list() const {
    const std::lock_guard lock(mutex_);
    return list_;
  }
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return list_.size();
  }

  /// The steps whose sets failed from failure number `first` on, in order, each once.
  std::vector<std::uint64_t> steps_since(std::size_t first) const {
    const std::lock_guard lock(mutex_);
    if (first >= steps_.size()) return {};
    std::vector<std::uint64_t> steps(steps_.begin() + static_cast<std::ptrdiff_t>(first), steps_.end());
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    return steps;
  }

  /// What failed from failure number `first` on (those of one fit() call): empty if nothing did,
  /// else one line naming the steps whose sets are incomplete, the directory and the reasons.
  std::string summary(std::size_t first, const std::filesystem::path& dir) const {
    const std::vector<std::uint64_t> steps = steps_since(first);
    const std::lock_guard lock(mutex_);
    if (first >= list_.size()) return {};
    std::string text = "the checkpoint set" + std::string(steps.size() > 1 ? "s of steps " : " of step ");
    for (std::size_t i = 0; i < steps.size(); ++i) text += (i ? ", " : "") + std::to_string(steps[i]);
    text += " could not be saved in " + dir.string() + " (" + std::to_string(list_.size() - first) + " failed save" +
            (list_.size() - first > 1 ? "s" : "") + "; ";
    // The reasons, as many as a line holds; checkpoint_failures() has them all.
    constexpr std::size_t shown = 3;
    for (std::size_t i = first; i < list_.size() && i < first + shown; ++i) text += (i > first ? "; " : "") + list_[i];
    if (list_.size() - first > shown) text += "; and " + std::to_string(list_.size() - first - shown) + " more";
    return text + ")";
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
  std::vector<std::uint64_t> steps_;
};

/// The end of a fit() call (after its last save and its outputs): if saves failed since failure
/// number `first`, logs which sets are missing and, as the policy says, throws
/// (UnsavedCheckpointsError) saying the same, so that the program does not end as if its
/// checkpoints were all saved.
inline void report_unsaved_sets(const CheckpointFailures& failures, std::size_t first, const CheckpointPolicy& cp,
                                std::ostream* log) {
  const std::string summary = failures.summary(first, cp.directory);
  if (summary.empty()) return;
  flotilla::detail::log_to(log, LogLevel::error, "checkpoint", summary);
  if (cp.fail_at_end_on_save_failure)
    throw UnsavedCheckpointsError(summary + "; training completed, and the sets saved before are as they were",
                                  failures.steps_since(first));
}

/// Writes the file of `part` in the set of `step` with `write`, making room on a full disk
/// (checkpoint::write_making_room), then rotates that part's older files. A failure is noted in
/// `failures` (prefixed by `who`, when not empty), not thrown. Returns whether the file was
/// written.
inline bool save_set_file(const CheckpointPolicy& cp, std::uint64_t step, const std::string& part,
                          const std::vector<std::string>& parts, const std::string& who, CheckpointFailures& failures,
                          std::ostream* log, const std::function<void()>& write) {
  try {
    checkpoint::write_making_room(cp.directory, step, part, parts, write, log);
  } catch (const CheckpointError& err) {
    failures.note(step, who.empty() ? std::string(err.what()) : who + ": " + err.what(), log);
    return false;
  }
  try {
    checkpoint::rotate(cp.directory, part, cp.keep, parts);
  } catch (const CheckpointError& err) {  // housekeeping: the save itself succeeded
    flotilla::detail::log_to(log, LogLevel::warning, "checkpoint", std::string("older files not rotated: ") + err.what());
  }
  return true;
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_CHECKPOINTSAVING_HPP_INCLUDED
