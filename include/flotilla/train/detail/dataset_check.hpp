// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_DATASETCHECK_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_DATASETCHECK_HPP_INCLUDED
// Whether a data set fits a model (features, labels or targets, classes), checked before training
// or evaluating starts, with a message that names the data set, the caller and both sizes.
#include <cstddef>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/model.hpp"

namespace flotilla::detail {

/// ShapeError unless `d` can train or evaluate M; `where` names the caller ("Trainer::fit: training set").
template <ModelType M>
void check_dataset(const data::Dataset<typename M::scalar_type>& d, std::string_view where) {
  const std::string name = std::string(where) + " '" + d.name + "'";
  if (d.feature_size() != M::input_shape::size)
    throw ShapeError(name + " has " + std::to_string(d.feature_size()) + " features per sample, the model's input is " +
                     std::to_string(M::input_shape::size));
  if constexpr (M::loss::target == TargetKind::labels) {
    if (d.labels.size() != d.size())
      throw ShapeError(name + " has " + std::to_string(d.labels.size()) + " labels for " + std::to_string(d.size()) +
                       " samples; the model's loss (" + std::string(M::loss::name) + ") needs one label per sample");
    if (d.classes > M::output_shape::size)
      throw ShapeError(name + " has " + std::to_string(d.classes) + " classes, the model has " +
                       std::to_string(M::output_shape::size) + " outputs");
  } else {
    if (static_cast<std::size_t>(d.targets.rows()) != M::output_shape::size ||
        static_cast<std::size_t>(d.targets.cols()) != d.size())
      throw ShapeError(name + " has targets of " + std::to_string(d.targets.rows()) + "x" + std::to_string(d.targets.cols()) +
                       ", the model needs " + std::to_string(M::output_shape::size) + "x" + std::to_string(d.size()));
  }
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_DATASETCHECK_HPP_INCLUDED
