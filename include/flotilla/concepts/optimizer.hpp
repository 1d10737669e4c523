// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_OPTIMIZER_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_OPTIMIZER_HPP_INCLUDED
// The Optimizer extension point. See docs/concepts/optimizer.md for a user-written optimizer.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "flotilla/core/layer_args.hpp"

namespace flotilla {

/// What an optimizer is told at each update.
struct StepInfo {
  std::uint64_t step = 1;      ///< 1 for the first update (Adam's bias correction counts from 1)
  double learning_rate = 0;    ///< the scheduled rate for this update
};

/// An optimizer O for scalar type T: a small configuration object (learning rate and friends) with
///  - a nested `state<T>`, constructible from the number of parameters it serves, holding the
///    per-parameter buffers (momentum, moments) and exposing them as `buffers()` for checkpoints;
///  - `update(params, grads, state, tensors, info)`, which applies one step to `params` in place.
///    `tensors` partitions the spans into parameter tensors (offsets relative to the spans), so an
///    optimizer can treat weights and biases differently. On a parameter-server shard the spans and
///    tensors cover only the shard.
template <class O, class T>
concept Optimizer =
    requires { { O::name } -> std::convertible_to<std::string_view>; } &&
    std::constructible_from<typename O::template state<T>, std::size_t> &&
    requires(const O& o, typename O::template state<T>& s, std::span<T> p, std::span<const T> g,
             std::span<const TensorInfo> tensors, const StepInfo& info) {
      { o.learning_rate } -> std::convertible_to<double>;
      o.update(p, g, s, tensors, info);
      { s.buffers() };
    };

/// Optional: an optimizer that declares `static constexpr bool elementwise = true;` promises that
/// update() computes each element from that element's parameter, gradient and state alone (and
/// the tensor's role), so that any split of the tensors into pieces gives the same result (to the
/// last bit, where a cut moves an element between vectorised and scalar code). The
/// trainer then updates large buffers on all its cores at once, each core a slice. Leave it out
/// for an optimizer that looks at a whole tensor (a norm, as LAMB or LARS take) or keeps state
/// outside its per-element buffers.
template <class O>
inline constexpr bool elementwise_optimizer = requires { requires O::elementwise; };

namespace detail {
template <std::size_t, class X>
using repeated = X;
template <class R, class T, std::size_t... I>
constexpr bool rule_takes_elements(std::index_sequence<I...>) {
  return std::is_invocable_v<const R&, bool, T&, const T&, repeated<I, T&>...>;
}
}  // namespace detail

/// Optional: an element-wise optimizer may also write its update once as an element rule, which
/// both engines run: `o.element_rule<T>(info)` returns a copyable object `r` (the step's
/// constants) with
///  - `r.decays(tensor)`, a flag computed per tensor on the host (whether weight decay applies);
///  - `r(flag, p, g, s...)`, one state argument per buffer of `state<T>` (a fixed-size `buffers()`
///    such as `std::array`), marked FLOTILLA_HOST_DEVICE (core/host_device.hpp). The CPU engine
///    calls it with Eigen arrays over a tensor; the CUDA engine with one element's values, one GPU
///    thread each. Write it with operators and `flotilla::element` functions
///    (core/element_math.hpp) so that it compiles for both.
/// With it, cuda::Engine updates the parameters on the GPU (without, on the host copies).
template <class O, class T>
concept ElementRuleOptimizer =
    Optimizer<O, T> && elementwise_optimizer<O> &&
    requires(const O& o, const StepInfo& info, const TensorInfo& t, typename O::template state<T>& s) {
      { o.template element_rule<T>(info).decays(t) } -> std::convertible_to<bool>;
      std::tuple_size<std::remove_cvref_t<decltype(s.buffers())>>::value;
    } &&
    detail::rule_takes_elements<decltype(std::declval<const O&>().template element_rule<T>(StepInfo{})), T>(
        std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(std::declval<typename O::template state<T>&>().buffers())>>>{});

/// The number of per-parameter buffers of an ElementRuleOptimizer's state.
template <class O, class T>
inline constexpr std::size_t state_buffer_count =
    std::tuple_size_v<std::remove_cvref_t<decltype(std::declval<typename O::template state<T>&>().buffers())>>;

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_OPTIMIZER_HPP_INCLUDED
