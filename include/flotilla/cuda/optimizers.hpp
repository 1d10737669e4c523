// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_OPTIMIZERS_HPP_INCLUDED
#define FLOTILLA_CUDA_OPTIMIZERS_HPP_INCLUDED
// Optimizer updates on the GPU, over the flat device buffers. Any ElementRuleOptimizer
// (concepts/optimizer.hpp) runs here: its element rule, the same function the CPU engine applies
// to Eigen arrays, is applied to one element per thread. Per-tensor behaviour (no weight decay on
// biases when the rule says so) is kept by launching once per run of consecutive tensors with the
// same flag: one launch for the whole buffer in the usual cases.
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/cuda/launch.hpp"

namespace flotilla::cuda {

/// Whether optimizer O has a GPU update (any other runs on the host: cuda::Engine copies).
template <class O>
inline constexpr bool has_device_update = ElementRuleOptimizer<O, float>;

/// How many state buffers (each one value per parameter) O keeps on the GPU.
template <class O>
inline constexpr std::size_t device_state_buffers = state_buffer_count<O, float>;

namespace detail {

/// Calls f(begin, count, flag) for each maximal run of consecutive tensors with the same flag.
template <class Rule, class F>
void for_each_flag_run(std::span<const TensorInfo> tensors, const Rule& rule, F&& f) {
  std::size_t i = 0;
  while (i < tensors.size()) {
    const bool flag = rule.decays(tensors[i]);
    std::size_t j = i + 1;
    while (j < tensors.size() && rule.decays(tensors[j]) == flag && tensors[j].offset == tensors[j - 1].offset + tensors[j - 1].size)
      ++j;
    f(tensors[i].offset, tensors[j - 1].offset + tensors[j - 1].size - tensors[i].offset, flag);
    i = j;
  }
}

/// The kernel body: one element's update. Each element is loaded into registers, updated by the
/// rule and stored once (the rule takes references, and through global memory the compiler could
/// not keep its values in registers).
template <class Rule, std::size_t K>
struct ApplyRule {
  Rule rule;
  bool flag;
  float* p;
  const float* g;
  float* state[K > 0 ? K : 1];

  __device__ void operator()(index_t i) const { apply(i, std::make_index_sequence<K>{}); }

  template <std::size_t... I>
  __device__ void apply(index_t i, std::index_sequence<I...>) const {
    float pi = p[i];
    float si[K > 0 ? K : 1] = {state[I][i]...};
    rule(flag, pi, g[i], si[I]...);
    p[i] = pi;
    ((state[I][i] = si[I]), ...);
  }
};

/// Applies `rule` (with `flag`) to elements [at, at + n) of p, g and the K buffers of `buffers`.
template <class Rule, std::size_t K, std::size_t... I>
void launch_rule(cudaStream_t s, const Rule& rule, bool flag, float* p, const float* g, float* const* buffers,
                 std::size_t at, std::size_t n, std::index_sequence<I...>) {
  for_each_index(s, n, "optimizer_update", ApplyRule<Rule, K>{rule, flag, p + at, g + at, {(buffers[I] + at)...}});
}

}  // namespace detail

/// One step of optimizer o on device buffers p and g (and its state buffers `state[k]`, each as long
/// as p), for the parameter tensors `tensors` (offsets into p), on stream s.
template <class O>
void device_update(cudaStream_t s, const O& o, float* p, const float* g, float* const* state,
                   std::span<const TensorInfo> tensors, const StepInfo& info) {
  static_assert(has_device_update<O>,
                "cuda::device_update: the optimizer has no element rule (see ElementRuleOptimizer in concepts/optimizer.hpp)");
  constexpr std::size_t K = device_state_buffers<O>;
  const auto rule = o.template element_rule<float>(info);
  detail::for_each_flag_run(tensors, rule, [&](std::size_t at, std::size_t n, bool flag) {
    detail::launch_rule<std::remove_const_t<decltype(rule)>, K>(s, rule, flag, p, g, state, at, n, std::make_index_sequence<K>{});
  });
}

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_OPTIMIZERS_HPP_INCLUDED
