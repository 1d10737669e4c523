// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_ENGINE_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_ENGINE_HPP_INCLUDED
// The ComputeEngine concept: one rank's compute for a Model on its device (train/engine.hpp on the CPU,
// cuda/engine.hpp on a GPU). Everything above the engine, the trainers, the exchanges and the
// checkpoints, is written against these members alone, so both devices train the same way.
//
// The engine names the types its members take (the model, its scalar, a batch, a data set), so
// that this concept needs nothing above core/.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla {

template <class E>
concept ComputeEngine = requires(E& e, const E& ce, typename E::scalar_type scale, const typename E::batch_type& batch,
                          const typename E::dataset_type& data, std::size_t n, std::uint64_t seed,
                          ConstMatrixView<typename E::scalar_type> inputs,
                          const typename E::model_type::optimizer& optimizer,
                          typename E::model_type::optimizer::template state<typename E::scalar_type>& state,
                          std::span<const TensorInfo> tensors, const StepInfo& info) {
  typename E::model_type;
  { E::parameter_count } -> std::convertible_to<std::size_t>;
  // The flat buffers, as host views (a GPU engine copies them across when asked for them).
  { e.parameters() } -> std::convertible_to<std::span<typename E::scalar_type>>;
  { ce.parameters() } -> std::convertible_to<std::span<const typename E::scalar_type>>;
  { e.gradients() } -> std::convertible_to<std::span<typename E::scalar_type>>;
  // Forward and backward of a batch, its loss scaled by `scale`, gradients summed in or replaced.
  e.compute_gradients(batch, scale, false);
  e.apply_optimizer(optimizer, state, tensors, info);
  // The optimizer's state: brought to the host before it is read, told when it was replaced.
  ce.optimizer_state_to_host(state);
  e.optimizer_state_changed();
  e.evaluate(data, n, n);
  e.predict(inputs);
  { ce.seed() } -> std::convertible_to<std::uint64_t>;
  e.set_seed(seed);
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_ENGINE_HPP_INCLUDED
