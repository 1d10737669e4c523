// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_CHECKPOINTDIR_HPP_INCLUDED
#define FLOTILLA_TRAIN_CHECKPOINTDIR_HPP_INCLUDED
// A directory of checkpoint sets: what periodic checkpoints are named, which set a restarted job
// resumes from, and how old sets are rotated away. The files themselves are checkpoint_format.hpp
// containers; what goes in them is the Trainer's business.
//
// A set is what the job saved at one step: one file from worker 0 (position, seed, and the model
// and optimizer state when the workers hold them) and, with parameter servers, one file per
// server (its slice of the parameters, its optimizer state, its update count):
//
//   step-000000000120.worker.ckpt
//   step-000000000120.server-0-of-2.ckpt
//   step-000000000120.server-1-of-2.ckpt
//
// A pipeline's set (pipeline::Trainer) is one file per stage, each written by that stage's rank
// of replica 0: its slice of the parameters and of the optimizer state, and the position:
//
//   step-000000000120.stage-0-of-3.ckpt
//   step-000000000120.stage-1-of-3.ckpt
//   step-000000000120.stage-2-of-3.ckpt
//
// The step is zero-padded, so names sort by step. Each file is written atomically by the process
// that owns the state (Writer::commit), so a set is complete only when every one of its files is
// there and verifies; resume takes the newest complete set and says what it passed over and why.
// Each writer rotates its own files (keeping its newest `keep` steps) only after a successful
// write, so a failed save never removes what an earlier one left. When the disk is full, a
// writer makes room by removing its own files older than the newest complete set, oldest first,
// and tries again (write_making_room); the newest complete set and other writers' files stay.
#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

#include "flotilla/core/log.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/linkage.hpp"
#include "flotilla/train/checkpoint_format.hpp"

namespace flotilla {

/// When fit() writes checkpoint sets into a directory, and whether it starts from one.
struct CheckpointPolicy {
  /// Where the sets go (created if missing); empty: no periodic checkpoints, no resume.
  std::filesystem::path directory;
  /// A set every this many updates (counted from the start of the run, so a resumed run keeps the
  /// same schedule); 0: not by steps.
  std::uint64_t every_steps = 0;
  /// A set when this many seconds have passed since the last one (or since fit() began); 0: not
  /// by time.
  double every_seconds = 0;
  /// Sets kept; older ones are removed after each successful save. 0 keeps every set.
  std::size_t keep = 3;
  /// A set when fit() ends: normally, and also when it leaves by an exception while the workers'
  /// state is that of a completed update (not with parameter servers, which may be what failed).
  bool at_exit = true;
  /// fit() starts from the newest complete set in `directory`, when there is one, and then treats
  /// FitOptions::epochs as the length of the whole run: a restarted program passes the same flags
  /// and trains only what is left.
  bool resume = false;
  /// When a set could not be saved during a fit() call (even after making room on a full disk),
  /// fit() still trains to the end and writes its outputs, then logs which steps' sets are
  /// missing, where and why, and throws UnsavedCheckpointsError saying the same (the epoch
  /// records stay in the trainer's history()), so that the program does not end as if every set
  /// were saved. Off:
  /// the same log line, and fit() returns normally; the failures are in checkpoint_failures().
  bool fail_at_end_on_save_failure = true;

  bool enabled() const noexcept { return !directory.empty(); }

  /// Throws ConfigError naming the field when a value is unusable.
  FLOTILLA_DECL void validate() const;
};

/// What fit() throws when it ends with checkpoint sets it could not save during the call
/// (CheckpointPolicy::fail_at_end_on_save_failure). Training completed: the outputs are written
/// and the epoch records are in the trainer's history(); the sets saved are as they were.
class UnsavedCheckpointsError : public CheckpointError {
 public:
  UnsavedCheckpointsError(const std::string& what, std::vector<std::uint64_t> steps)
      : CheckpointError(what), steps_(std::move(steps)) {}
  /// The steps whose sets are incomplete, in order.
  const std::vector<std::uint64_t>& steps() const noexcept { return steps_; }

 private:
  std::vector<std::uint64_t> steps_;
};

namespace checkpoint {

/// The file of part `part` ("worker", "server-0-of-2") of the set saved at `step`.
FLOTILLA_DECL std::filesystem::path set_file(const std::filesystem::path& dir, std::uint64_t step,
                                             std::string_view part);

inline std::string worker_part() { return "worker"; }
inline std::string server_part(std::size_t index, std::size_t servers) {
  return "server-" + std::to_string(index) + "-of-" + std::to_string(servers);
}
inline std::string stage_part(std::size_t stage, std::size_t stages) {
  return "stage-" + std::to_string(stage) + "-of-" + std::to_string(stages);
}
/// The parts of a data-parallel job's set: worker 0's file and each of `servers` servers' shard.
inline std::vector<std::string> trainer_parts(std::size_t servers) {
  std::vector<std::string> parts = {worker_part()};
  // `!=`, not `<`: nvcc warns of a comparison with zero when `servers` is the constant 0.
  for (std::size_t k = 0; k != servers; ++k) parts.push_back(server_part(k, servers));
  return parts;
}
/// The parts of a pipeline's set: one file per stage.
inline std::vector<std::string> pipeline_parts(std::size_t stages) {
  std::vector<std::string> parts;
  for (std::size_t s = 0; s != stages; ++s) parts.push_back(stage_part(s, stages));
  return parts;
}

namespace detail {

/// (step, part) of a set file's name, or nothing for any other name (temporary files included).
FLOTILLA_DECL std::optional<std::pair<std::uint64_t, std::string>> parse_set_name(std::string_view name);

}  // namespace detail

/// The set files in `dir`: step -> part -> path. A missing directory has none.
FLOTILLA_DECL std::map<std::uint64_t, std::map<std::string, std::filesystem::path>> list_sets(
    const std::filesystem::path& dir);

/// A file resume passed over, and why ("truncated ...", "checksum mismatch in record 5 ...",
/// "of another model ...", "the set has no file for part server-1-of-2").
struct Skipped {
  std::uint64_t step = 0;
  std::filesystem::path file;
  std::string reason;
};

/// A complete set: its step and its parts' verified readers (part name -> reader).
struct ResumePoint {
  std::uint64_t step = 0;
  std::map<std::string, Reader> parts;
};

/// What a search for the newest complete set found, and what it passed over to find it.
struct ResumeSearch {
  std::optional<ResumePoint> point;
  std::vector<Skipped> skipped;
};

/// What a trainer's resume_from() did: the step it resumed from (none: no complete set, nothing
/// changed), the files it read, and every newer file or set it passed over, with the reason.
struct ResumeReport {
  std::optional<std::uint64_t> step;
  std::vector<std::filesystem::path> files;
  std::vector<Skipped> skipped;
};

/// A resume's report before anything is loaded: the files `found` passed over, each also written
/// to `log`, and, when it found no set, a line that the run starts from the beginning.
inline ResumeReport start_report(const ResumeSearch& found, const std::filesystem::path& dir, std::ostream* log) {
  ResumeReport report;
  report.skipped = found.skipped;
  for (const auto& k : report.skipped)
    flotilla::detail::log_to(log, LogLevel::warning, "checkpoint", "skipped " + k.file.string() + ": " + k.reason);
  if (!found.point)
    flotilla::detail::log_to(log, LogLevel::info, "checkpoint",
                             "no complete checkpoint set in " + dir.string() + "; starting from the beginning");
  return report;
}

/// Completes `report` once the set of `step` (parts `parts`) is loaded, and says on `log` where the
/// run goes on: epoch and batch as the loaded state has them (0-based).
inline void finish_report(ResumeReport& report, const std::filesystem::path& dir, std::uint64_t step,
                          const std::vector<std::string>& parts, std::uint64_t epoch, std::uint64_t batch, std::ostream* log) {
  report.step = step;
  for (const auto& part : parts) report.files.push_back(set_file(dir, step, part));
  flotilla::detail::log_to(log, LogLevel::info, "checkpoint",
                           "resuming from step " + std::to_string(step) + " (epoch " + std::to_string(epoch + 1) + ", batch " +
                               std::to_string(batch) + ") in " + dir.string());
}

/// Finds the newest set of `dir` whose parts `required` are all present and verify, and for which
/// `check(part, reader)` throws no CheckpointError (the caller's test that the file fits this
/// job: same model, same shard layout). Returns that set, if any, and every newer file or set it
/// passed over.
FLOTILLA_DECL ResumeSearch find_resume_point(
    const std::filesystem::path& dir, const std::vector<std::string>& required,
    const std::function<void(const std::string& part, const Reader&)>& check);

/// Removes the files of part `part` in `dir` except those of its newest `keep` steps (0: keeps
/// all), and the temporary files of that part that another process left (a writer killed while
/// saving: each part has one writer, so they are no one's now). With `parts` (the parts a set is
/// complete with), the part's file of the newest complete set stays too, however many newer files
/// of incomplete sets there are: another writer's failing saves must not cost the set a resume
/// needs. Returns the files removed. A file that cannot be removed is left (and not reported):
/// rotation is housekeeping, never a reason to fail a save that succeeded.
FLOTILLA_DECL std::vector<std::filesystem::path> rotate(const std::filesystem::path& dir, const std::string& part,
                                                       std::size_t keep, const std::vector<std::string>& parts = {});

/// Whether a write failed because the disk, or the user's quota, is full (ENOSPC, EDQUOT).
inline bool disk_full(const CheckpointError& e) noexcept {
  return e.cause() == std::errc::no_space_on_device || e.cause() == std::error_code(EDQUOT, std::generic_category());
}

/// The newest step of `dir` that has a file for each of `parts` (a complete set, as far as its
/// names tell), if any.
FLOTILLA_DECL std::optional<std::uint64_t> newest_complete_step(const std::filesystem::path& dir,
                                                                const std::vector<std::string>& parts);

/// Runs `write`, which writes the file of part `part` of the set of `step` in `dir` (sets are
/// complete with a file for each of `parts`), and when it fails because the disk is full
/// (disk_full()), makes room and runs it again: it removes this part's own files older than the
/// newest complete set, oldest first, one before each new try. The newest complete set, the
/// files of other parts (other writers') and this part's files of newer, incomplete sets stay.
/// Each removal is written to `log`. Returns the files removed; rethrows the last CheckpointError
/// when no file is left to remove, and any other failure at once.
FLOTILLA_DECL std::vector<std::filesystem::path> write_making_room(const std::filesystem::path& dir, std::uint64_t step,
                                                                  const std::string& part,
                                                                  const std::vector<std::string>& parts,
                                                                  const std::function<void()>& write, std::ostream* log);

}  // namespace checkpoint

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL void CheckpointPolicy::validate() const {
  if (!(every_seconds >= 0) || !std::isfinite(every_seconds))
    throw ConfigError("CheckpointPolicy::every_seconds must be a finite number >= 0, not " + std::to_string(every_seconds));
  if (!enabled() && (every_steps || every_seconds > 0 || resume))
    throw ConfigError("CheckpointPolicy: every_steps, every_seconds and resume need a directory");
}

namespace checkpoint {

FLOTILLA_DECL std::filesystem::path set_file(const std::filesystem::path& dir, std::uint64_t step,
                                             std::string_view part) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%012llu.", static_cast<unsigned long long>(step));
  return dir / (std::string(name) + std::string(part) + ".ckpt");
}

namespace detail {

FLOTILLA_DECL std::optional<std::pair<std::uint64_t, std::string>> parse_set_name(std::string_view name) {
  constexpr std::string_view prefix = "step-", suffix = ".ckpt";
  if (name.size() < prefix.size() + 12 + 1 + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix)
    return std::nullopt;
  const std::string_view digits = name.substr(prefix.size(), 12);
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  if (name[prefix.size() + 12] != '.') return std::nullopt;
  const std::string_view part = name.substr(prefix.size() + 13, name.size() - prefix.size() - 13 - suffix.size());
  if (part.empty()) return std::nullopt;
  return std::pair(step, std::string(part));
}

}  // namespace detail

FLOTILLA_DECL std::map<std::uint64_t, std::map<std::string, std::filesystem::path>> list_sets(
    const std::filesystem::path& dir) {
  std::map<std::uint64_t, std::map<std::string, std::filesystem::path>> sets;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return sets;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (const auto parsed = detail::parse_set_name(entry.path().filename().string()))
      sets[parsed->first][parsed->second] = entry.path();
  }
  if (ec) throw CheckpointError(dir.string() + ": cannot list the checkpoint directory: " + ec.message());
  return sets;
}

FLOTILLA_DECL ResumeSearch find_resume_point(
    const std::filesystem::path& dir, const std::vector<std::string>& required,
    const std::function<void(const std::string& part, const Reader&)>& check) {
  ResumeSearch out;
  std::vector<Skipped>& skipped = out.skipped;
  const auto sets = list_sets(dir);
  for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
    const auto& [step, files] = *it;
    ResumePoint point;
    point.step = step;
    bool complete = true;
    for (const auto& part : required) {
      const auto f = files.find(part);
      if (f == files.end()) {
        skipped.push_back({step, set_file(dir, step, part), "the set of step " + std::to_string(step) + " has no file for part " + part});
        complete = false;
        continue;
      }
      try {
        Reader r(f->second);
        check(part, r);
        point.parts.emplace(part, std::move(r));
      } catch (const CheckpointError& e) {
        skipped.push_back({step, f->second, e.what()});
        complete = false;
      }
    }
    if (complete) {
      out.point = std::move(point);
      return out;
    }
  }
  return out;
}

FLOTILLA_DECL std::vector<std::filesystem::path> rotate(const std::filesystem::path& dir, const std::string& part,
                                                       std::size_t keep, const std::vector<std::string>& parts) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  const std::string own_suffix = ".ckpt.tmp-" + std::to_string(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto tmp = name.rfind(".ckpt.tmp-");
    if (tmp == std::string::npos || name.substr(tmp) == own_suffix) continue;
    const auto parsed = detail::parse_set_name(std::string_view(name).substr(0, tmp + 5));
    std::error_code rm;
    if (parsed && parsed->second == part && std::filesystem::remove(entry.path(), rm) && !rm) removed.push_back(entry.path());
  }
  if (keep == 0) return removed;
  std::vector<std::pair<std::uint64_t, std::filesystem::path>> mine;
  for (const auto& [step, files] : list_sets(dir))
    if (const auto f = files.find(part); f != files.end()) mine.emplace_back(step, f->second);
  if (mine.size() <= keep) return removed;
  const auto complete = parts.empty() ? std::nullopt : newest_complete_step(dir, parts);
  for (std::size_t i = 0; i + keep < mine.size(); ++i) {
    if (complete && mine[i].first == *complete) continue;
    std::error_code rm;
    if (std::filesystem::remove(mine[i].second, rm) && !rm) removed.push_back(mine[i].second);
  }
  return removed;
}

FLOTILLA_DECL std::optional<std::uint64_t> newest_complete_step(const std::filesystem::path& dir,
                                                                const std::vector<std::string>& parts) {
  const auto sets = list_sets(dir);
  for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
    const auto& files = it->second;
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return files.count(p) != 0; })) return it->first;
  }
  return std::nullopt;
}

FLOTILLA_DECL std::vector<std::filesystem::path> write_making_room(const std::filesystem::path& dir, std::uint64_t step,
                                                                  const std::string& part,
                                                                  const std::vector<std::string>& parts,
                                                                  const std::function<void()>& write, std::ostream* log) {
  std::vector<std::filesystem::path> removed;
  for (;;) {
    try {
      write();
      return removed;
    } catch (const CheckpointError& e) {
      if (!disk_full(e)) throw;
      // Listed again before each removal: other writers' saves may have completed a newer set.
      const auto newest = newest_complete_step(dir, parts);
      std::optional<std::filesystem::path> oldest;
      if (newest) {
        for (const auto& [s, files] : list_sets(dir)) {
          if (s >= *newest) break;
          if (const auto f = files.find(part); f != files.end()) {
            oldest = f->second;
            break;
          }
        }
      }
      std::error_code ec;
      if (!oldest || !std::filesystem::remove(*oldest, ec) || ec) throw;
      flotilla::detail::log_to(log, LogLevel::warning, "checkpoint",
                               "the disk is full; removed " + oldest->string() + " (older than the newest complete set, step " +
                                   std::to_string(*newest) + ") to make room for step " + std::to_string(step));
      removed.push_back(*oldest);
    }
  }
}

}  // namespace checkpoint
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_CHECKPOINTDIR_HPP_INCLUDED
