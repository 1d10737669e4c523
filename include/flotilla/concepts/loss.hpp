// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_LOSS_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_LOSS_HPP_INCLUDED
// The Loss extension point. See docs/concepts/loss.md for a user-written loss.
#include <concepts>
#include <string_view>

#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"

namespace flotilla {

/// A loss for scalar type T:
///  - `L::target` says whether it reads labels or values from Targets<T>;
///  - `L::value(output, targets)` is the *sum* of the per-sample losses of the batch;
///  - `L::value_and_gradient(output, targets, grad, scale)` returns the same sum and writes
///    grad = scale * d(sum)/d(output). The trainer passes scale = 1 / (global batch size), so that
///    gradients computed on parts of a batch (threads, workers) add up to the gradient of the mean.
template <class L, class T>
concept Loss = requires(ConstMatrixView<T> out, const Targets<T>& t, MatrixView<T> grad, T scale) {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::target } -> std::convertible_to<TargetKind>;
  { L::value(out, t) } -> std::convertible_to<T>;
  { L::value_and_gradient(out, t, grad, scale) } -> std::convertible_to<T>;
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_LOSS_HPP_INCLUDED
