// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_SEQUENTIAL_HPP_INCLUDED
#define FLOTILLA_NN_SEQUENTIAL_HPP_INCLUDED
// Sequential<Input<...>, Layers...>: a network as a type. Each layer spec is bound to the shape the
// previous one produces, so shapes are inferred, and a mismatch stops the compiler with the
// offending layer's static_assert message.
#include <cstddef>
#include <type_traits>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/concepts/layer.hpp"
#include "flotilla/core/shape.hpp"

namespace flotilla {
namespace detail {

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class T, class List>
struct prepend;
template <class T, class... Ts>
struct prepend<T, type_list<Ts...>> {
  using type = type_list<T, Ts...>;
};

template <class In, class T, class... Specs>
struct bind_chain {
  using layers = type_list<>;
  using output_shape = In;
};
template <class In, class T, class S, class... Rest>
struct bind_chain<In, T, S, Rest...> {
  static_assert(check_layer_spec<S, In, T>());
  using first = typename S::template layer<In, T>;
  using next = bind_chain<typename first::output_shape, T, Rest...>;
  using layers = typename prepend<first, typename next::layers>::type;
  using output_shape = typename next::output_shape;
};

template <class S>
struct is_input : std::false_type {};
template <std::size_t... D>
struct is_input<Input<D...>> : std::true_type {};

}  // namespace detail

template <class InputSpec, class... Specs>
struct Sequential {
  static_assert(detail::is_input<InputSpec>::value,
                "Sequential<Input<...>, Layers...>: the first argument must be Input<...>, the shape of one "
                "sample (e.g. Input<784> or Input<1, 28, 28>)");
  static_assert(sizeof...(Specs) > 0, "Sequential<Input<...>, Layers...>: a network needs at least one layer");

  using input_shape = typename InputSpec::shape;
  /// The concrete layers for scalar type T, as a detail::type_list.
  template <class T>
  using layers = typename detail::bind_chain<input_shape, T, Specs...>::layers;
  using output_shape = typename detail::bind_chain<input_shape, float, Specs...>::output_shape;
  static constexpr std::size_t depth = sizeof...(Specs);
};

namespace detail {
template <class A>
struct is_sequential : std::false_type {};
template <class I, class... S>
struct is_sequential<Sequential<I, S...>> : std::true_type {};
}  // namespace detail

}  // namespace flotilla
#endif  // FLOTILLA_NN_SEQUENTIAL_HPP_INCLUDED
