// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A user type in Sequential that is not a layer spec (no member template `layer`).
#include <cstddef>
#include <string_view>

#include "flotilla/nn/dense.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
struct Scale {
  float factor = 2;  // a plain struct: what a layer does, but not how flotilla binds it
};
#else
struct Scale {
  template <class In, class T>
  struct layer {
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "Scale";
    static constexpr std::size_t parameter_count = 0;
    void forward(const ForwardArgs<T>& a) { a.output = a.input * T(2); }
    void backward(const BackwardArgs<T>& a) {
      if (a.wants_input_grad()) a.input_grad = a.output_grad * T(2);
    }
  };
};
#endif

using Net = Sequential<Input<4>, Scale, Dense<1>>;

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
