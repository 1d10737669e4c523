// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A user's layer that PyTorch has no module for cannot be saved in PyTorch's layout: the compiler
// says so, rather than a file that no script can load.
#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/interop/torch.hpp"

using namespace flotilla;

struct Scale {  // y = 2 x, a layer of a user's own
  template <class In, class T>
  struct layer {
    using spec = Scale;
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

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<4>, Scale, Dense<2>>;
#else
using Net = Sequential<Input<4>, ReLU, Dense<2>>;
#endif

int main() { return static_cast<int>(interop::torch_model<Net>().tensors.size()); }
