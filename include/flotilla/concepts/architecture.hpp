// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_ARCHITECTURE_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_ARCHITECTURE_HPP_INCLUDED
// What a network architecture type provides: Sequential<...> is the built-in one.
#include <concepts>
#include <cstddef>

namespace flotilla {

/// An architecture names its input and output shapes, its depth, and binds its layers for a scalar
/// type T as `layers<T>`, a detail::type_list of concrete Layer types whose shapes chain.
template <class A>
concept Architecture = requires {
  typename A::input_shape;
  typename A::output_shape;
  typename A::template layers<float>;
  { A::depth } -> std::convertible_to<std::size_t>;
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_ARCHITECTURE_HPP_INCLUDED
