// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_EVALUATION_HPP_INCLUDED
#define FLOTILLA_TRAIN_EVALUATION_HPP_INCLUDED
// What evaluating a model on a data set gives (Evaluation), and how the counts that ranks add up
// (detail::EvaluationPart, from the Engine or a pipeline's last stage) become one. Shared by the
// data-parallel Trainer and pipeline::Trainer so both report the same numbers the same way.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "flotilla/model.hpp"
#include "flotilla/train/confusion.hpp"
#include "flotilla/train/detail/engine.hpp"

namespace flotilla {

/// Loss, accuracy and (for classifiers) the confusion matrix of a model on a data set.
struct Evaluation {
  double loss = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();  ///< NaN for regression
  std::size_t samples = 0;
  std::optional<ConfusionMatrix> confusion;
};

namespace detail {

/// The mean loss, and for a classifier the confusion matrix and accuracy, of summed counts.
template <ModelType M>
Evaluation to_evaluation(const EvaluationPart& part) {
  Evaluation ev;
  ev.samples = part.samples;
  ev.loss = part.samples ? part.loss_sum / static_cast<double>(part.samples) : 0.0;
  if constexpr (M::loss::target == TargetKind::labels) {
    constexpr std::size_t k = M::output_shape::size;
    ConfusionMatrix c(k);
    for (std::size_t a = 0; a < k; ++a)
      for (std::size_t p = 0; p < k; ++p)
        if (const auto n = part.confusion[a * k + p]) c.add(static_cast<std::int32_t>(p), static_cast<std::int32_t>(a), n);
    ev.accuracy = c.accuracy();
    ev.confusion = std::move(c);
  }
  return ev;
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_EVALUATION_HPP_INCLUDED
