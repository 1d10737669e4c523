// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_HISTORY_HPP_INCLUDED
#define FLOTILLA_TRAIN_HISTORY_HPP_INCLUDED
// What a training run records once per epoch. The Trainer fills one EpochRecord at the end of each
// epoch; MetricsLog writes it to disk, write_svg_plot draws a History of them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla {

/// One epoch's summary. Losses are means over the epoch's samples; accuracies are fractions in
/// [0, 1]. Validation values are empty on epochs that were not validated, so that a log can tell
/// "not measured" from a measured 0.
struct EpochRecord {
  std::uint64_t epoch = 0;  ///< 1-based number of the epoch just finished
  std::uint64_t step = 0;   ///< optimizer steps taken since the start of the run (not the epoch)
  double train_loss = 0;
  double train_accuracy = 0;
  std::optional<double> val_loss, val_accuracy;
  double samples_per_second = 0;  ///< training throughput of this epoch, all workers together
  double seconds = 0;             ///< wall time of this epoch, validation included
  double learning_rate = 0;       ///< at the end of the epoch (schedules change it step by step)
  /// Further named values (gradient norm, a custom metric). Names must not repeat within a record
  /// nor reuse one of the fields above; MetricsLog writes them as extra keys / columns in order.
  std::vector<std::pair<std::string, double>> extra;
};

/// Every epoch of a run, oldest first.
using History = std::vector<EpochRecord>;

namespace detail {

/// The line a trainer prints when an epoch ends: losses, accuracies, throughput and time.
inline std::string epoch_summary(const EpochRecord& r) {
  auto fixed = [](double v, int digits) {
    if (std::isnan(v)) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return std::string(buf);
  };
  std::string s = "loss " + fixed(r.train_loss, 4);
  if (!std::isnan(r.train_accuracy)) s += ", accuracy " + fixed(100 * r.train_accuracy, 2) + "%";
  if (r.val_loss) s += " | validation loss " + fixed(*r.val_loss, 4);
  if (r.val_accuracy) s += ", accuracy " + fixed(100 * *r.val_accuracy, 2) + "%";
  s += " | " + fixed(r.samples_per_second, 0) + " samples/s, " + fixed(r.seconds, 1) + " s";
  return s;
}

}  // namespace detail

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_HISTORY_HPP_INCLUDED
