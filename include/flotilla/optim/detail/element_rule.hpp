// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_DETAIL_ELEMENTRULE_HPP_INCLUDED
#define FLOTILLA_OPTIM_DETAIL_ELEMENTRULE_HPP_INCLUDED
// The CPU side of the built-in optimizers' element rules (see concepts/optimizer.hpp,
// ElementRuleOptimizer): each rule is applied to a tensor at a time as Eigen arrays, so the update
// is vectorised; the CUDA engine applies the same rule to one element per GPU thread
// (cuda/optimizers.hpp).
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla::optim::detail {

/// Which tensors a rule decays: none (no weight decay), or all but those the options leave out
/// (biases; the scale and shift of normalisation layers). Rules inherit it as their `decays(tensor)`.
struct DecayChoice {
  bool any = false;
  bool biases = true;
  bool normalization = true;
  bool decays(const TensorInfo& t) const {
    return any && (biases || t.role != TensorRole::bias) && (normalization || t.role != TensorRole::normalization);
  }
};

/// A tensor's segment of a flat span, as an Eigen array (read-only when the span is).
template <class T>
auto segment(std::span<T> s, const TensorInfo& t) {
  using Array = Eigen::Array<std::remove_const_t<T>, Eigen::Dynamic, 1>;
  using Mapped = std::conditional_t<std::is_const_v<T>, const Array, Array>;
  return Eigen::Map<Mapped>(s.data() + t.offset, static_cast<Eigen::Index>(t.size));
}

template <class Rule, class T, std::size_t K, std::size_t... I>
void apply_rule(const Rule& rule, std::span<T> params, std::span<const T> grads, const std::array<std::span<T>, K>& state,
                std::span<const TensorInfo> tensors, std::index_sequence<I...>) {
  for (const auto& t : tensors) rule(rule.decays(t), segment(params, t), segment(grads, t), segment(state[I], t)...);
}

/// Applies `rule` to each of `tensors`: rule(decays, p, g, state...) with every argument an Eigen
/// array over that tensor's segment of the spans.
template <class Rule, class T, std::size_t K>
void apply_rule(const Rule& rule, std::span<T> params, std::span<const T> grads, const std::array<std::span<T>, K>& state,
                std::span<const TensorInfo> tensors) {
  apply_rule(rule, params, grads, state, tensors, std::make_index_sequence<K>{});
}

}  // namespace flotilla::optim::detail
#endif  // FLOTILLA_OPTIM_DETAIL_ELEMENTRULE_HPP_INCLUDED
