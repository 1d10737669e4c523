// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_STATETENSORS_HPP_INCLUDED
#define FLOTILLA_OPTIM_STATETENSORS_HPP_INCLUDED
// Tensors of role `state` (BatchNorm's running statistics) are not trained: an update adds the
// increment the layer wrote into their gradient slots and hands the optimizer the other tensors
// only. Everything that applies an optimizer goes through update_trainable, so no optimizer, the
// user's included, ever sees a state tensor (core/layer_args.hpp, TensorRole, says why state is
// carried in the parameter buffer).
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla::optim {

/// Whether any of `tensors` is state.
inline bool has_state_tensors(std::span<const TensorInfo> tensors) noexcept {
  return std::any_of(tensors.begin(), tensors.end(), [](const TensorInfo& t) { return t.role == TensorRole::state; });
}

/// params += grads over the state tensors of `tensors` (offsets relative to the spans).
template <class T>
void apply_state_increments(std::span<T> params, std::span<const T> grads, std::span<const TensorInfo> tensors) {
  for (const auto& t : tensors) {
    if (t.role != TensorRole::state) continue;
    for (std::size_t i = t.offset; i < t.offset + t.size; ++i) params[i] += grads[i];
  }
}

/// `tensors` without the state tensors, into `out` (kept by the caller, so that a step allocates
/// nothing once it has grown).
inline std::span<const TensorInfo> trainable_tensors(std::span<const TensorInfo> tensors, std::vector<TensorInfo>& out) {
  out.clear();
  for (const auto& t : tensors)
    if (t.role != TensorRole::state) out.push_back(t);
  return out;
}

/// The state tensors' half of an update: adds their increments, and returns the tensors the
/// optimizer is to update (`tensors` itself when none is state; else built in `scratch`).
template <class T>
std::span<const TensorInfo> take_state_increments(std::span<T> params, std::span<const T> grads,
                                                  std::span<const TensorInfo> tensors, std::vector<TensorInfo>& scratch) {
  if (!has_state_tensors(tensors)) return tensors;
  apply_state_increments(params, grads, tensors);
  return trainable_tensors(tensors, scratch);
}

/// One update: the optimizer on the trainable tensors, the increments on the state tensors.
template <class O, class T, class State>
void update_trainable(const O& optimizer, std::span<T> params, std::span<const T> grads, State& state,
                      std::span<const TensorInfo> tensors, const StepInfo& info, std::vector<TensorInfo>& scratch) {
  optimizer.update(params, grads, state, take_state_increments(params, grads, tensors, scratch), info);
}

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_STATETENSORS_HPP_INCLUDED
