// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_DENSE_HPP_INCLUDED
#define FLOTILLA_NN_DENSE_HPP_INCLUDED
// Dense<N>: a fully connected layer, y = W x + b, with W of shape (N x inputs).
#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/concepts/initializer.hpp"
#include "flotilla/core/gemm.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/init.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

template <std::size_t Outputs, class Init = init::Glorot>
struct Dense {
  static_assert(Outputs > 0, "Dense<N>: the number of outputs N must be > 0");

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "Dense<N>: input_shape must be a flotilla::Shape");
    static_assert(VectorShape<In>,
                  "Dense<N>: its input is an image (Shape<C, H, W>); put Flatten before Dense");
    static_assert(Initializer<Init, T>, "Dense<N, Init>: Init must be an initialiser (see nn/init.hpp)");

    using spec = Dense;  // the spec this layer was bound from (device backends dispatch on it)
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<Outputs>;
    static constexpr std::string_view name = "Dense";
    static constexpr std::size_t inputs = In::size;
    static constexpr std::array<TensorSpec, 2> tensors{{
        {"weight", Outputs * inputs, TensorRole::weight},
        {"bias", Outputs, TensorRole::bias},
    }};
    static constexpr std::size_t parameter_count = Outputs * inputs + Outputs;

    void initialize(std::span<T> params, Generator& g) const {
      Init::fill(params.first(Outputs * inputs), inputs, Outputs, g);
      for (auto& b : params.subspan(Outputs * inputs)) b = T(0);
    }

    void forward(const ForwardArgs<T>& a) {
      detail::gemm_bias(a.output, weight(a.params), a.input, bias(a.params));
    }

    void backward(const BackwardArgs<T>& a) {
      auto nobody = [](std::size_t) {};
      backward_in_blocks(a, inputs, GradientProgress(nobody));  // dW in one product
    }

    /// The same gradients, in an order that lets communication start early (StreamsGradients): dW
    /// in blocks of columns, each reported final as soon as it is computed.
    void backward(const BackwardArgs<T>& a, const GradientProgress& final_from) {
      backward_in_blocks(a, stream_block_columns, final_from);
    }

   private:
    // The bias first (the end of the slice), then dW in blocks of `block_columns` columns from the
    // last (a column is one input's weights, contiguous), each reported final, and d(input) last.
    void backward_in_blocks(const BackwardArgs<T>& a, std::size_t block_columns, const GradientProgress& final_from) {
      detail::add_row_sums(a.output_grad.data(), static_cast<Eigen::Index>(Outputs), a.output_grad.cols(),
                           a.param_grads.data() + Outputs * inputs);
      final_from(Outputs * inputs);
      auto dw = MatrixView<T>(a.param_grads.data(), Outputs, inputs);
      for (std::size_t end = inputs; end > 0;) {
        const std::size_t begin = end > block_columns ? end - block_columns : 0;
        const auto first = static_cast<Eigen::Index>(begin), count = static_cast<Eigen::Index>(end - begin);
        detail::gemm(dw.middleCols(first, count), a.output_grad, a.input.middleRows(first, count).transpose(),
                     /*accumulate=*/true);
        final_from(begin * Outputs);
        end = begin;
      }
      if (a.wants_input_grad())
        detail::gemm(a.input_grad, weight(std::span<const T>(a.params)).transpose(), a.output_grad, /*accumulate=*/false);
    }

    // Streaming backward: up to 8 blocks of dW, none under 16384 values (64 KiB of floats), so that
    // each block is still a GEMM worth running and a report per block costs nothing by comparison.
    static constexpr std::size_t stream_blocks = std::clamp<std::size_t>(Outputs * inputs / 16384, 1, 8);
    static constexpr std::size_t stream_block_columns = (inputs + stream_blocks - 1) / stream_blocks;

    static ConstMatrixView<T> weight(std::span<const T> p) { return ConstMatrixView<T>(p.data(), Outputs, inputs); }
    static ConstVectorView<T> bias(std::span<const T> p) {
      return ConstVectorView<T>(p.data() + Outputs * inputs, Outputs);
    }
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_DENSE_HPP_INCLUDED
