// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_BALANCE_HPP_INCLUDED
#define FLOTILLA_PIPELINE_BALANCE_HPP_INCLUDED
// The automatic split: contiguous stages of a chain of layers whose most expensive stage is as
// cheap as possible (the time of a pipeline step is set by its slowest stage).
//
// Dynamic programming over the cut points, O(stages * layers^2): best[k][i] is the least possible
// maximum over k stages covering layers [i, L). It is exact (the maximum it reaches is the optimum,
// factor 1, which tests/pipeline checks against every split of small networks by brute force), and
// deterministic: of all optimal splits it returns the one whose cut points are lexicographically
// smallest (each stage ends as early as the optimum allows), so equal costs give the same split on
// every rank and every run.
//
// Everything here is constexpr, so a split of compile-time costs is a compile-time constant.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla::pipeline {

/// Stages as layer ranges: stage s is layers [bounds[s], bounds[s + 1]); bounds.front() == 0 and
/// bounds.back() is the depth.
struct Split {
  std::vector<std::size_t> bounds;
  std::uint64_t max_stage_cost = 0;  ///< the most expensive stage's cost
  std::size_t stages() const noexcept { return bounds.empty() ? 0 : bounds.size() - 1; }
};

/// Sum of costs[begin, end).
constexpr std::uint64_t range_cost(std::span<const std::uint64_t> costs, std::size_t begin, std::size_t end) {
  std::uint64_t s = 0;
  for (std::size_t i = begin; i < end; ++i) s += costs[i];
  return s;
}

/// The cost of the most expensive stage of `bounds`.
constexpr std::uint64_t max_stage_cost(std::span<const std::uint64_t> costs, std::span<const std::size_t> bounds) {
  std::uint64_t m = 0;
  for (std::size_t s = 0; s + 1 < bounds.size(); ++s) {
    const std::uint64_t c = range_cost(costs, bounds[s], bounds[s + 1]);
    m = c > m ? c : m;
  }
  return m;
}

/// Checks that `stages` contiguous, non-empty stages can be cut from `layers` layers.
inline void check_stage_count(std::size_t stages, std::size_t layers) {
  if (stages == 0) throw ConfigError("pipeline: a pipeline needs at least one stage, 0 were asked for");
  if (stages > layers)
    throw ConfigError("pipeline: " + std::to_string(stages) + " stages were asked for, but the network has " +
                      std::to_string(layers) + " layers, and each stage needs at least one");
}

/// The optimal split of `costs` (one per layer, in order) into `stages` contiguous non-empty stages.
constexpr Split balance(std::span<const std::uint64_t> costs, std::size_t stages) {
  const std::size_t n = costs.size();
  if (std::is_constant_evaluated()) {
    if (stages == 0 || stages > n) throw "pipeline::balance: need 1 <= stages <= layers";
  } else {
    check_stage_count(stages, n);
  }
  constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // best[k * (n + 1) + i]: k stages over [i, n) (k from 1), `none` when fewer than k layers remain.
  std::vector<std::uint64_t> best((stages + 1) * (n + 1), none);
  for (std::size_t i = 0; i < n; ++i) best[1 * (n + 1) + i] = prefix[n] - prefix[i];
  for (std::size_t k = 2; k <= stages; ++k) {
    for (std::size_t i = 0; i + k <= n; ++i) {
      std::uint64_t b = none;
      for (std::size_t j = i + 1; j + (k - 1) <= n; ++j) {
        const std::uint64_t first = prefix[j] - prefix[i], rest = best[(k - 1) * (n + 1) + j];
        const std::uint64_t worst = first > rest ? first : rest;
        if (worst < b) b = worst;
      }
      best[k * (n + 1) + i] = b;
    }
  }
  Split out;
  out.max_stage_cost = best[stages * (n + 1) + 0];
  out.bounds.push_back(0);
  std::size_t at = 0;
  for (std::size_t k = stages; k > 1; --k) {
    // The earliest end of this stage that still lets the rest meet the optimum.
    std::size_t j = at + 1;
    while (prefix[j] - prefix[at] > out.max_stage_cost || best[(k - 1) * (n + 1) + j] > out.max_stage_cost) ++j;
    out.bounds.push_back(j);
    at = j;
  }
  out.bounds.push_back(n);
  return out;
}

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_BALANCE_HPP_INCLUDED
