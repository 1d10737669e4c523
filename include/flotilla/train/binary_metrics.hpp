// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_BINARYMETRICS_HPP_INCLUDED
#define FLOTILLA_TRAIN_BINARYMETRICS_HPP_INCLUDED
// Quality of a binary classifier's probabilities (a click model's): ROC AUC, log loss, average
// precision, and calibration (the mean predicted probability against the observed rate).
//
// Conventions:
// - AUC is exact: the probability that a random positive scores above a random negative, a tie
//   counting one half (the Mann-Whitney statistic with midranks). It is NaN when the labels hold
//   only one class (or nothing), where it is undefined.
// - Log loss is the mean of -[y log p + (1 - y) log(1 - p)] with p clamped to
//   [log_loss_clamp, 1 - log_loss_clamp], log_loss_clamp = 1e-7: a single confident mistake then
//   costs at most about 16.1 rather than infinity, and a float probability that rounded to exactly 0
//   or 1 (float's spacing just below 1 is 6e-8) still gives a finite, comparable number.
// - Average precision is scikit-learn's average_precision_score: sum over distinct thresholds,
//   highest first, of (R_k - R_{k-1}) * P_k, all samples with one score entering together. It is NaN
//   when there is no positive.
// - count 0: every value NaN, counts 0.
// Computed in O(n log n) (one sort), in double precision whatever the input type.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"

namespace flotilla {

struct BinaryMetrics {
  double auc = std::numeric_limits<double>::quiet_NaN();
  double log_loss = std::numeric_limits<double>::quiet_NaN();
  double average_precision = std::numeric_limits<double>::quiet_NaN();
  double mean_predicted = std::numeric_limits<double>::quiet_NaN();
  double observed_rate = std::numeric_limits<double>::quiet_NaN();
  std::size_t count = 0;
  std::size_t positives = 0;
};

/// The clamp of probabilities in the log loss (see above).
inline constexpr double log_loss_clamp = 1e-7;

namespace detail {

template <class T>
BinaryMetrics binary_metrics(std::span<const T> probabilities, std::span<const T> labels) {
  if (probabilities.size() != labels.size())
    throw ShapeError("binary_metrics: " + std::to_string(probabilities.size()) + " probabilities for " +
                     std::to_string(labels.size()) + " labels");
  BinaryMetrics m;
  const std::size_t n = probabilities.size();
  m.count = n;
  if (n == 0) return m;

  std::vector<std::pair<T, bool>> scored(n);
  double sum_p = 0, loss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T p = probabilities[i];
    const T y = labels[i];
    if (!(p >= T(0) && p <= T(1)))
      throw Error("binary_metrics: probability " + std::to_string(static_cast<double>(p)) + " of sample " +
                  std::to_string(i) + " is not in [0, 1]");
    if (y != T(0) && y != T(1))
      throw Error("binary_metrics: label " + std::to_string(static_cast<double>(y)) + " of sample " + std::to_string(i) +
                  " is neither 0 nor 1");
    const bool positive = y == T(1);
    scored[i] = {p, positive};
    m.positives += positive ? 1 : 0;
    const double pd = static_cast<double>(p);
    sum_p += pd;
    const double c = std::clamp(pd, log_loss_clamp, 1.0 - log_loss_clamp);
    loss -= positive ? std::log(c) : std::log1p(-c);
  }
  m.mean_predicted = sum_p / static_cast<double>(n);
  m.observed_rate = static_cast<double>(m.positives) / static_cast<double>(n);
  m.log_loss = loss / static_cast<double>(n);

  // Highest score first; a group of equal scores is one threshold.
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const std::uint64_t pos = m.positives;
  const std::uint64_t neg = n - m.positives;
  std::uint64_t tp = 0, fp = 0;
  // Twice the Mann-Whitney count, so that half credits stay integers.
  std::uint64_t twice_pairs = 0;
  double ap = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    std::uint64_t gp = 0, gn = 0;
    while (j < n && scored[j].first == scored[i].first) {
      (scored[j].second ? gp : gn) += 1;
      ++j;
    }
    const std::uint64_t negatives_below = neg - fp - gn;
    twice_pairs += 2 * gp * negatives_below + gp * gn;
    tp += gp;
    fp += gn;
    if (gp > 0) ap += (static_cast<double>(gp) / static_cast<double>(pos)) * (static_cast<double>(tp) / static_cast<double>(tp + fp));
    i = j;
  }
  if (pos > 0 && neg > 0)
    m.auc = static_cast<double>(twice_pairs) / (2.0 * static_cast<double>(pos) * static_cast<double>(neg));
  if (pos > 0) m.average_precision = ap;
  return m;
}

}  // namespace detail

/// AUC, log loss, average precision and calibration of `probabilities` (each in [0, 1]) against
/// `labels` (each 0 or 1). Throws ShapeError when the sizes differ, Error naming the sample when a
/// probability is outside [0, 1] (or NaN) or a label is neither 0 nor 1.
inline BinaryMetrics binary_metrics(std::span<const float> probabilities, std::span<const float> labels) {
  return detail::binary_metrics<float>(probabilities, labels);
}
inline BinaryMetrics binary_metrics(std::span<const double> probabilities, std::span<const double> labels) {
  return detail::binary_metrics<double>(probabilities, labels);
}

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_BINARYMETRICS_HPP_INCLUDED
