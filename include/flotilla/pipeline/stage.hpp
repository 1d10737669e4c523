// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_STAGE_HPP_INCLUDED
#define FLOTILLA_PIPELINE_STAGE_HPP_INCLUDED
// pipeline::Stage: a boundary marker written into a network's type, where the user wants one
// pipeline stage to end and the next to begin:
//
//   Sequential<Input<1, 28, 28>, Conv2D<32, 5>, ReLU, MaxPool2D<2>, pipeline::Stage,
//              Conv2D<64, 5>, ReLU, MaxPool2D<2>, Flatten, Dense<10>>
//
// It is an ordinary layer too (the identity, with no parameters), so the same type trains unsplit
// with any Trainer, and a pipeline of it computes exactly what the unsplit network does. The marker
// is the first layer of the stage it opens. StageMarkers<Arch> finds the markers at compile time
// and rejects placements that would leave a stage empty.
#include <array>
#include <cstddef>
#include <string_view>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/sequential.hpp"

namespace flotilla::pipeline {

struct Stage {
  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "pipeline::Stage: input_shape must be a flotilla::Shape");
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "Stage";
    static constexpr std::size_t parameter_count = 0;
    /// What StageMarkers looks for.
    static constexpr bool stage_boundary = true;

    void forward(const ForwardArgs<T>& a) { a.output = a.input; }
    void backward(const BackwardArgs<T>& a) {
      if (a.wants_input_grad()) a.input_grad = a.output_grad;
    }
  };
};

namespace detail {

template <class L>
constexpr bool is_stage_boundary() {
  if constexpr (requires { L::stage_boundary; })
    return L::stage_boundary;
  else
    return false;
}

template <class List>
struct boundary_flags;
template <class... Ls>
struct boundary_flags<flotilla::detail::type_list<Ls...>> {
  static constexpr std::array<bool, sizeof...(Ls)> value{is_stage_boundary<Ls>()...};
};

}  // namespace detail

/// The Stage markers of an architecture: `count`, and `cuts`, the layer index of each marker in
/// order (stage k + 1 starts at cuts[k]). A marker first or last, or two in a row, would leave a
/// stage with no layer to run, and stops the compiler with a sentence saying so.
template <Architecture Arch>
struct StageMarkers {
 private:
  static constexpr auto flags = detail::boundary_flags<typename Arch::template layers<float>>::value;
  static constexpr std::size_t depth = flags.size();
  static constexpr std::size_t count_markers() {
    std::size_t n = 0;
    for (bool f : flags) n += f ? 1 : 0;
    return n;
  }
  static constexpr bool adjacent() {
    for (std::size_t i = 1; i < depth; ++i)
      if (flags[i] && flags[i - 1]) return true;
    return false;
  }

 public:
  static_assert(depth == 0 || !flags[0],
                "pipeline::Stage: a Stage marker first in the network would leave the first stage with no layer; "
                "put markers between layers");
  static_assert(depth == 0 || !flags[depth - 1],
                "pipeline::Stage: a Stage marker last in the network would leave the last stage with no layer "
                "but the marker itself; put markers between layers");
  static_assert(!adjacent(),
                "pipeline::Stage: two Stage markers in a row would make a stage of nothing but a marker; "
                "remove one of them");

  static constexpr std::size_t count = count_markers();
  static constexpr std::array<std::size_t, count> cuts = [] {
    std::array<std::size_t, count> c{};
    std::size_t k = 0;
    for (std::size_t i = 0; i < depth; ++i)
      if (flags[i]) c[k++] = i;
    return c;
  }();
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_STAGE_HPP_INCLUDED
