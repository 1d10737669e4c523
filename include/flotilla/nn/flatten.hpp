// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_FLATTEN_HPP_INCLUDED
#define FLOTILLA_NN_FLATTEN_HPP_INCLUDED
// Flatten: an image Shape<C, H, W> becomes the vector Shape<C*H*W>, in the channels-last order it
// is stored in. The values are copied unchanged.
#include <cstddef>
#include <string_view>

#include "flotilla/core/shape.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

struct Flatten {
  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "Flatten: input_shape must be a flotilla::Shape");
    using spec = Flatten;  // the spec this layer was bound from (device backends dispatch on it)
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<In::size>;
    static constexpr std::string_view name = "Flatten";
    static constexpr std::size_t parameter_count = 0;

    void forward(const ForwardArgs<T>& a) { a.output = a.input; }
    void backward(const BackwardArgs<T>& a) {
      if (a.wants_input_grad()) a.input_grad = a.output_grad;
    }
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_FLATTEN_HPP_INCLUDED
