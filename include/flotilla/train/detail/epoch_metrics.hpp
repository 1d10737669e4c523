// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_EPOCHMETRICS_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_EPOCHMETRICS_HPP_INCLUDED
// What a data-parallel worker measured over an epoch, by name, and how the workers' measurements
// combine: counts, losses, times and traffic add up; the epoch's wall time and the parameter
// servers' staleness take the largest. The collectives move them as two arrays of doubles (sums,
// maxima), whose order the field lists fix once (ReducedMetrics, which pipeline stages use too).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/timeline.hpp"

namespace flotilla::detail {

/// What two collectives (a sum, a max) carry of a struct of named measurements: Derived lists
/// its fields in `summed_fields` and `maximised_fields` (member pointers to double), and may add
/// an array of further summed values (`summed_array()`), so the order on the wire is written once.
template <class Derived>
struct ReducedMetrics {
  std::vector<double> sums() const {
    const Derived& d = static_cast<const Derived&>(*this);
    std::vector<double> v;
    for (auto f : Derived::summed_fields) v.push_back(d.*f);
    if constexpr (requires { d.summed_array(); })
      for (const double x : d.summed_array()) v.push_back(x);
    return v;
  }
  std::vector<double> maxima() const {
    const Derived& d = static_cast<const Derived&>(*this);
    std::vector<double> v;
    for (auto f : Derived::maximised_fields) v.push_back(d.*f);
    return v;
  }
  /// Takes the reduced arrays back (as sums() and maxima() laid them out).
  void assign(std::span<const double> sums, std::span<const double> maxima) {
    Derived& d = static_cast<Derived&>(*this);
    for (std::size_t i = 0; i < Derived::summed_fields.size(); ++i) d.*Derived::summed_fields[i] = sums[i];
    if constexpr (requires { d.summed_array(); }) {
      std::size_t i = Derived::summed_fields.size();
      for (double& x : d.summed_array()) x = sums[i++];
    }
    for (std::size_t i = 0; i < Derived::maximised_fields.size(); ++i) d.*Derived::maximised_fields[i] = maxima[i];
  }
  /// Sums and maximises over the ranks through `reduce(sums, maxima)` (collectives, or the
  /// parameter servers' reduction).
  template <class Reduce>
  void reduce(Reduce&& reduce) {
    std::vector<double> s = sums(), x = maxima();
    reduce(std::span<double>(s), std::span<double>(x));
    assign(s, x);
  }
};

struct EpochMetrics : ReducedMetrics<EpochMetrics> {
  // Summed over the workers.
  double loss_sum = 0;  ///< per-sample losses
  double correct = 0;   ///< samples classified right
  double samples = 0;
  double steps = 0;     ///< worker-steps
  double compute_seconds = 0, exposed_comm_seconds = 0, update_seconds = 0;
  std::array<double, traffic_counter_fields.size()> traffic{};  ///< in traffic_counter_fields' order
  // The largest over the workers.
  double seconds = 0;  ///< the epoch's wall time
  double max_steps_ahead = 0, max_staleness = 0;

  static constexpr std::array<double EpochMetrics::*, 7> summed_fields{
      &EpochMetrics::loss_sum,        &EpochMetrics::correct,          &EpochMetrics::samples,
      &EpochMetrics::steps,           &EpochMetrics::compute_seconds, &EpochMetrics::exposed_comm_seconds,
      &EpochMetrics::update_seconds};
  static constexpr std::array<double EpochMetrics::*, 3> maximised_fields{
      &EpochMetrics::seconds, &EpochMetrics::max_steps_ahead, &EpochMetrics::max_staleness};

  /// One worker's epoch.
  static EpochMetrics of(double loss_sum, std::size_t correct, std::size_t samples, double seconds,
                         const CounterTotals& totals) {
    EpochMetrics m;
    m.loss_sum = loss_sum;
    m.correct = static_cast<double>(correct);
    m.samples = static_cast<double>(samples);
    m.steps = static_cast<double>(totals.steps);
    m.compute_seconds = totals.compute_seconds;
    m.exposed_comm_seconds = totals.exposed_comm_seconds;
    m.update_seconds = totals.update_seconds;
    for (std::size_t i = 0; i < traffic_counter_fields.size(); ++i)
      m.traffic[i] = static_cast<double>(totals.traffic.*traffic_counter_fields[i].member);
    m.seconds = seconds;
    m.max_steps_ahead = static_cast<double>(totals.max_steps_ahead);
    m.max_staleness = static_cast<double>(totals.max_staleness);
    return m;
  }

  std::span<double> summed_array() { return traffic; }
  std::span<const double> summed_array() const { return traffic; }

  /// The training half of an epoch's record (validation is the trainer's), with the per-step
  /// means and maxima as `extra` columns; `workers` is how many contributed.
  void fill(EpochRecord& rec, bool classifier, std::size_t workers) const {
    const double n = std::max(samples, 1.0);
    rec.train_loss = loss_sum / n;
    rec.train_accuracy = classifier ? correct / n : std::numeric_limits<double>::quiet_NaN();
    rec.seconds = seconds;
    rec.samples_per_second = samples / std::max(seconds, 1e-9);
    const double per_step = std::max(steps, 1.0);
    rec.extra = {{"workers", static_cast<double>(workers)},
                 {"compute_ms_per_step", 1e3 * compute_seconds / per_step},
                 {"exposed_comm_ms_per_step", 1e3 * exposed_comm_seconds / per_step},
                 {"update_ms_per_step", 1e3 * update_seconds / per_step}};
    for (std::size_t i = 0; i < traffic_counter_fields.size(); ++i)
      rec.extra.emplace_back(std::string(traffic_counter_fields[i].name) + "_per_step", traffic[i] / per_step);
    rec.extra.emplace_back("max_steps_ahead", max_steps_ahead);
    rec.extra.emplace_back("max_staleness", max_staleness);
  }
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_EPOCHMETRICS_HPP_INCLUDED
