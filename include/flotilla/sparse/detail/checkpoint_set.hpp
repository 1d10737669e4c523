// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_DETAIL_CHECKPOINTSET_HPP_INCLUDED
#define FLOTILLA_SPARSE_DETAIL_CHECKPOINTSET_HPP_INCLUDED
// Checkpoint sets of sparse training. A set is a directory, one per step:
//
//   <directory>/sparse-step-000000000120/
//     rows-table0-shard0-of-2.bin    each server's shard of each table: rows, optimizer state,
//     rows-table0-shard1-of-2.bin    update counts (sparse/row_table.hpp's format, with its CRC)
//     worker.ckpt                    worker 0: the tower, its optimizer state, the position
//
// Worker 0 asks every server to save its shards at a step (after the step is applied, in
// synchronous training) and writes worker.ckpt only once every server has said it saved: a set is
// complete exactly when worker.ckpt is there and verifies. A restarted job resumes from the newest
// complete set; older sets beyond the number kept are removed after each successful save.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/train/checkpoint_format.hpp"

namespace flotilla::sparse::detail {

inline constexpr std::string_view set_prefix = "sparse-step-";

/// The directory of the set saved at `step`.
inline std::filesystem::path set_directory(const std::filesystem::path& dir, std::uint64_t step) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%012llu", static_cast<unsigned long long>(step));
  return dir / (std::string(set_prefix) + digits);
}

inline std::filesystem::path worker_file(const std::filesystem::path& set) { return set / "worker.ckpt"; }

/// The step of a set directory's name, or nothing for any other name.
inline std::optional<std::uint64_t> set_step(std::string_view name) {
  if (name.substr(0, set_prefix.size()) != set_prefix) return std::nullopt;
  const std::string_view digits = name.substr(set_prefix.size());
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return step;
}

/// The set directories in `dir`, newest first (a missing directory has none).
inline std::vector<std::pair<std::uint64_t, std::filesystem::path>> list_sets(const std::filesystem::path& dir) {
  std::vector<std::pair<std::uint64_t, std::filesystem::path>> sets;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    if (const auto step = set_step(it->path().filename().string())) sets.emplace_back(*step, it->path());
  }
  std::sort(sets.begin(), sets.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return sets;
}

/// The newest complete set: its step, directory and worker 0's verified file. Sets whose worker
/// file is missing (a save cut short) or does not verify are passed over, each named in the log
/// (core/log.hpp) when `log` is true.
struct FoundSet {
  std::uint64_t step = 0;
  std::filesystem::path directory;
  checkpoint::Reader worker;
};
inline std::optional<FoundSet> newest_complete_set(const std::filesystem::path& dir, bool log = true) {
  for (const auto& [step, set] : list_sets(dir)) {
    const auto file = worker_file(set);
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      if (log)
        log_message(LogLevel::warning, "checkpoint",
                    "skipped " + set.string() + ": incomplete (no worker.ckpt: its save did not finish)");
      continue;
    }
    try {
      return FoundSet{step, set, checkpoint::Reader(file)};
    } catch (const CheckpointError& e) {
      if (log) log_message(LogLevel::warning, "checkpoint", "skipped " + set.string() + ": " + e.what());
    }
  }
  return std::nullopt;
}

/// Removes every set of `dir` older than the newest `keep` complete ones, and incomplete sets
/// older than the newest complete one (0 keeps all). Removal is housekeeping: a set that cannot be
/// removed stays, and says nothing.
inline void rotate_sets(const std::filesystem::path& dir, std::size_t keep) {
  if (keep == 0) return;
  std::size_t complete = 0;
  for (const auto& [step, set] : list_sets(dir)) {
    std::error_code ec;
    const bool done = std::filesystem::exists(worker_file(set), ec);
    if (complete >= keep || (complete > 0 && !done)) {
      std::filesystem::remove_all(set, ec);
      continue;
    }
    if (done) ++complete;
  }
}

}  // namespace flotilla::sparse::detail
#endif  // FLOTILLA_SPARSE_DETAIL_CHECKPOINTSET_HPP_INCLUDED
