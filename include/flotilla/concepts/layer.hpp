// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_LAYER_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_LAYER_HPP_INCLUDED
// The Layer extension point. See docs/concepts/layer.md for a user-written layer.
//
// Users put layer *specs* in Sequential<...> (Dense<10>, ReLU). A spec S is any type with a member
// template `S::layer<InputShape, Scalar>` that is a Layer: the concrete layer once the input shape
// and scalar type are known.
#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

/// Members every concrete layer has: its types and shapes, and forward/backward.
template <class L>
concept Layer =
    requires {
      typename L::scalar_type;
      typename L::input_shape;
      typename L::output_shape;
      { L::parameter_count } -> std::convertible_to<std::size_t>;
      { L::name } -> std::convertible_to<std::string_view>;
    } && AnyShape<typename L::input_shape> && AnyShape<typename L::output_shape> &&
    requires(L& layer, const ForwardArgs<typename L::scalar_type>& f,
             const BackwardArgs<typename L::scalar_type>& b) {
      layer.forward(f);
      layer.backward(b);
    };

/// A Layer with parameters also declares its tensors (which partition its parameter slice, in
/// order) and initialises them from a seeded generator.
template <class L>
concept ParameterizedLayer =
    Layer<L> && (L::parameter_count > 0) &&
    requires(const L& layer, std::span<typename L::scalar_type> params, Generator& g) {
      { L::tensors.size() } -> std::convertible_to<std::size_t>;
      layer.initialize(params, g);
    };

/// Optional for a layer with parameters: a second backward that, while it runs, reports the tail
/// of its parameter gradients that is already final (GradientProgress), so that their
/// communication starts before the layer is done. Worth it where one layer holds much of the
/// model (the first Dense of an MLP): otherwise its whole gradient waits for its whole backward.
/// Network calls it only when someone listens (gradient buckets, parameter-server pushes).
template <class L>
concept StreamsGradients = Layer<L> && requires(L& layer, const BackwardArgs<typename L::scalar_type>& b,
                                                const GradientProgress& final_from) { layer.backward(b, final_from); };

/// A spec that binds to a Layer for the given input shape and scalar type.
template <class S, class In, class T>
concept LayerSpec = requires { typename S::template layer<In, T>; } && Layer<typename S::template layer<In, T>>;

namespace detail {

/// One readable diagnostic per missing piece, instead of a wall of substitution failures.
/// Returns true so it can sit in a constant expression.
template <class S, class In, class T>
constexpr bool check_layer_spec() {
  static_assert(requires { typename S::template layer<In, T>; },
                "flotilla: this type is not a layer spec: it needs a member template "
                "`template <class InputShape, class Scalar> struct layer` (see docs/concepts/layer.md)");
  if constexpr (requires { typename S::template layer<In, T>; }) {
    using L = typename S::template layer<In, T>;
    static_assert(requires { typename L::scalar_type; typename L::input_shape; typename L::output_shape; },
                  "flotilla: a layer must declare scalar_type, input_shape and output_shape "
                  "(see docs/concepts/layer.md)");
    static_assert(requires { { L::parameter_count } -> std::convertible_to<std::size_t>; },
                  "flotilla: a layer must declare `static constexpr std::size_t parameter_count`");
    static_assert(requires { { L::name } -> std::convertible_to<std::string_view>; },
                  "flotilla: a layer must declare `static constexpr std::string_view name`");
    static_assert(requires(L& l, const ForwardArgs<T>& f) { l.forward(f); },
                  "flotilla: a layer must have `void forward(const ForwardArgs<Scalar>&)`");
    static_assert(requires(L& l, const BackwardArgs<T>& b) { l.backward(b); },
                  "flotilla: a layer must have `void backward(const BackwardArgs<Scalar>&)`");
    if constexpr (Layer<L>) {
      static_assert(std::same_as<typename L::input_shape, In>,
                    "flotilla: a layer's input_shape must be the shape it was bound to");
      static_assert(std::same_as<typename L::scalar_type, T>,
                    "flotilla: a layer's scalar_type must be the scalar it was bound to");
      if constexpr (L::parameter_count > 0) {
        static_assert(ParameterizedLayer<L>,
                      "flotilla: a layer with parameters must declare `static constexpr std::array<TensorSpec, K> "
                      "tensors` and `void initialize(std::span<Scalar>, Generator&) const`");
      }
    }
  }
  return true;
}

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_LAYER_HPP_INCLUDED
