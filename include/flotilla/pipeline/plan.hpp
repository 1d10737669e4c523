// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_PLAN_HPP_INCLUDED
#define FLOTILLA_PIPELINE_PLAN_HPP_INCLUDED
// Plan: which layers each pipeline stage runs, and why. Made in one of three ways:
//
//   auto p = pipeline::Plan::automatic<Net>(3);          // balance the estimated costs (balance.hpp)
//   auto p = pipeline::Plan::from_cuts<Net>({3, 6});     // the user's cut points: stages start there
//   auto p = pipeline::Plan::from_markers<Net>();        // where the type has pipeline::Stage markers
//   pipeline::Plan::for_network<Net>(3)                  // markers if the type has any, else automatic
//
// and optionally with other costs (pipeline::measure_layer_costs times the layers on this machine):
// Plan::automatic<Net>(3, measured). Every rank of a job must hold the same plan: each of these is a
// function of the type and its arguments alone. describe() prints the table a user reads to decide
// whether to override the split.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/pipeline/balance.hpp"
#include "flotilla/pipeline/cost_model.hpp"
#include "flotilla/pipeline/stage.hpp"

namespace flotilla::pipeline {

/// The compile-time automatic split of Arch into Stages stages (bounds, as in Split), for a network
/// whose split should be fixed in its type's neighbourhood: a constant expression.
template <Architecture Arch, std::size_t Stages, class T = float>
constexpr std::array<std::size_t, Stages + 1> balanced_bounds() {
  static_assert(Stages > 0, "pipeline::balanced_bounds<Net, P>: a pipeline needs at least one stage (P > 0)");
  static_assert(Stages <= Arch::depth,
                "pipeline::balanced_bounds<Net, P>: more stages than the network has layers; each stage needs at "
                "least one layer");
  constexpr auto costs = estimated_compute<Arch, T>();
  std::array<std::size_t, Stages + 1> r{};
  const Split s = balance(std::span<const std::uint64_t>(costs), Stages);
  for (std::size_t i = 0; i <= Stages; ++i) r[i] = s.bounds[i];
  return r;
}

class Plan {
 public:
  /// One entry per layer of the network.
  struct Layer {
    std::string_view name;
    std::uint64_t cost = 0;  ///< what was balanced: estimated FLOPs, or measured nanoseconds
    std::uint64_t output_bytes = 0;
    std::uint64_t parameter_bytes = 0;
  };

  /// Balances `costs` (one per layer; empty: the compile-time estimates) over `stages` stages;
  /// `costs_are` names them in describe() ("measured ns" for measure_layer_costs).
  template <Architecture Arch, class T = float>
  static Plan automatic(std::size_t stages, std::span<const std::uint64_t> costs = {},
                        std::string_view costs_are = "given costs") {
    Plan p = make<Arch, T>(costs);
    check_stage_count(stages, Arch::depth);
    p.bounds_ = balance(p.costs(), stages).bounds;
    p.source_ = costs.empty() ? "automatic, estimated FLOPs" : "automatic, " + std::string(costs_are);
    return p;
  }

  /// Stages starting at the given layers: cut k is the first layer of stage k + 1. Cut points must
  /// lie in [1, depth - 1] and increase strictly (ConfigError naming the offending cut otherwise).
  template <Architecture Arch, class T = float>
  static Plan from_cuts(std::span<const std::size_t> cuts, std::span<const std::uint64_t> costs = {}) {
    Plan p = make<Arch, T>(costs);
    check_stage_count(cuts.size() + 1, Arch::depth);
    p.bounds_.assign(1, 0);
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      const std::size_t c = cuts[k];
      if (c < 1 || c >= Arch::depth)
        throw ConfigError("pipeline::Plan::from_cuts: cut point " + std::to_string(k) + " is " + std::to_string(c) +
                          ", outside [1, " + std::to_string(Arch::depth - 1) + "] (a cut at layer i starts a stage there; the network has " +
                          std::to_string(Arch::depth) + " layers)");
      if (c <= p.bounds_.back())
        throw ConfigError("pipeline::Plan::from_cuts: cut points must increase strictly, but cut point " + std::to_string(k) +
                          " is " + std::to_string(c) + " after " + std::to_string(p.bounds_.back()));
      p.bounds_.push_back(c);
    }
    p.bounds_.push_back(Arch::depth);
    p.source_ = "explicit cut points";
    return p;
  }
  template <Architecture Arch, class T = float>
  static Plan from_cuts(std::initializer_list<std::size_t> cuts) {
    return from_cuts<Arch, T>(std::span<const std::size_t>(cuts.begin(), cuts.size()));
  }

  /// The split the network's pipeline::Stage markers give (one stage when it has none).
  template <Architecture Arch, class T = float>
  static Plan from_markers() {
    constexpr auto& cuts = StageMarkers<Arch>::cuts;
    Plan p = from_cuts<Arch, T>(std::span<const std::size_t>(cuts.data(), cuts.size()));
    p.source_ = "pipeline::Stage markers in the network type";
    return p;
  }

  /// The markers' split when the type has markers (then `stages` must match it), else automatic.
  template <Architecture Arch, class T = float>
  static Plan for_network(std::size_t stages) {
    if constexpr (StageMarkers<Arch>::count > 0) {
      if (stages != StageMarkers<Arch>::count + 1)
        throw ConfigError("pipeline::Plan::for_network: " + std::to_string(stages) + " stages were asked for, but the network's " +
                          std::to_string(StageMarkers<Arch>::count) + " pipeline::Stage markers make " +
                          std::to_string(StageMarkers<Arch>::count + 1));
      return from_markers<Arch, T>();
    } else {
      return automatic<Arch, T>(stages);
    }
  }

  std::size_t stages() const noexcept { return bounds_.size() - 1; }
  std::size_t depth() const noexcept { return layers_.size(); }
  /// Stage s runs layers [first_layer(s), end_layer(s)).
  std::size_t first_layer(std::size_t s) const { return bounds_.at(s); }
  std::size_t end_layer(std::size_t s) const { return bounds_.at(s + 1); }
  const std::vector<std::size_t>& bounds() const noexcept { return bounds_; }
  const std::vector<Layer>& layers() const noexcept { return layers_; }
  std::string_view source() const noexcept { return source_; }

  std::vector<std::uint64_t> costs() const {
    std::vector<std::uint64_t> c;
    for (const auto& l : layers_) c.push_back(l.cost);
    return c;
  }
  std::uint64_t stage_cost(std::size_t s) const {
    std::uint64_t c = 0;
    for (std::size_t i = first_layer(s); i < end_layer(s); ++i) c += layers_[i].cost;
    return c;
  }
  std::uint64_t max_stage_cost() const {
    std::uint64_t m = 0;
    for (std::size_t s = 0; s < stages(); ++s) m = std::max(m, stage_cost(s));
    return m;
  }
  /// Bytes per sample that stage s sends on (its last layer's output); 0 for the last stage.
  std::uint64_t boundary_bytes(std::size_t s) const {
    return s + 1 < stages() ? layers_[end_layer(s) - 1].output_bytes : 0;
  }

  /// A table: each stage's layers, cost and share, parameters and bytes sent per sample.
  std::string describe() const {
    std::uint64_t total = 0;
    for (const auto& l : layers_) total += l.cost;
    std::string out = "pipeline plan: " + std::to_string(stages()) + " stage(s) over " + std::to_string(depth()) +
                      " layers (" + source_ + ")\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-6s %-8s %-44s %14s %7s %12s %14s\n", "stage", "layers", "", "cost", "share",
                  "param bytes", "sends B/sample");
    out += line;
    for (std::size_t s = 0; s < stages(); ++s) {
      std::string names;
      std::uint64_t params = 0;
      for (std::size_t i = first_layer(s); i < end_layer(s); ++i) {
        if (!names.empty()) names += ' ';
        names += layers_[i].name;
        params += layers_[i].parameter_bytes;
      }
      if (names.size() > 44) names = names.substr(0, 41) + "...";
      const std::string range = std::to_string(first_layer(s)) + "-" + std::to_string(end_layer(s) - 1);
      std::snprintf(line, sizeof line, "%-6zu %-8s %-44s %14llu %6.1f%% %12llu %14llu\n", s, range.c_str(), names.c_str(),
                    static_cast<unsigned long long>(stage_cost(s)),
                    total ? 100.0 * static_cast<double>(stage_cost(s)) / static_cast<double>(total) : 0.0,
                    static_cast<unsigned long long>(params), static_cast<unsigned long long>(boundary_bytes(s)));
      out += line;
    }
    std::snprintf(line, sizeof line, "slowest stage %.1f%% of the total (ideal %.1f%%)\n",
                  total ? 100.0 * static_cast<double>(max_stage_cost()) / static_cast<double>(total) : 0.0,
                  100.0 / static_cast<double>(stages()));
    out += line;
    return out;
  }

 private:
  template <Architecture Arch, class T>
  static Plan make(std::span<const std::uint64_t> costs) {
    if (!costs.empty() && costs.size() != Arch::depth)
      throw ConfigError("pipeline::Plan: " + std::to_string(costs.size()) + " layer costs given for a network of " +
                        std::to_string(Arch::depth) + " layers");
    Plan p;
    const auto& est = estimated_costs<Arch, T>;
    for (std::size_t i = 0; i < Arch::depth; ++i)
      p.layers_.push_back({est[i].name, costs.empty() ? est[i].compute() : costs[i], est[i].output_bytes, est[i].parameter_bytes});
    return p;
  }

  std::vector<Layer> layers_;
  std::vector<std::size_t> bounds_{0};
  std::string source_;
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_PLAN_HPP_INCLUDED
