// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_GLOBALAVGPOOL_HPP_INCLUDED
#define FLOTILLA_NN_GLOBALAVGPOOL_HPP_INCLUDED
// GlobalAvgPool: an image Shape<C, H, W> becomes the vector Shape<C> of its channels' means over
// every pixel, as He et al.'s ResNets end before their classifier: a Dense can follow it directly,
// and the classifier's size does not grow with the image.
#include <cstddef>
#include <string_view>

#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla {

struct GlobalAvgPool {
  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "GlobalAvgPool: input_shape must be a flotilla::Shape");
    static_assert(ImageShape<In>,
                  "GlobalAvgPool: its input is a vector (Shape<N>); it needs an image Shape<C, H, W> (it averages "
                  "each channel over the pixels)");
    static constexpr std::size_t C = In::dims[0], H = In::dims[1], W = In::dims[2];
    static constexpr std::size_t pixels = H * W;

    using spec = GlobalAvgPool;  // the spec this layer was bound from (device backends dispatch on it)
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<C>;
    static constexpr std::string_view name = "GlobalAvgPool";
    static constexpr std::size_t parameter_count = 0;

    // Channels-last, a sample is the column-major (C x pixels) matrix: the means are its row means.
    void forward(const ForwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      for (std::size_t s = 0; s < batch; ++s)
        a.output.col(static_cast<Eigen::Index>(s)) = image(a.input.data(), s).rowwise().sum() * scale;
    }

    void backward(const BackwardArgs<T>& a) {
      if (!a.wants_input_grad()) return;
      const auto batch = static_cast<std::size_t>(a.input.cols());
      for (std::size_t s = 0; s < batch; ++s) {
        auto dx = MatrixView<T>(a.input_grad.data() + s * In::size, static_cast<Eigen::Index>(C),
                                static_cast<Eigen::Index>(pixels));
        dx.colwise() = a.output_grad.col(static_cast<Eigen::Index>(s)) * scale;
      }
    }

   private:
    static constexpr T scale = T(1) / T(pixels);
    static ConstMatrixView<T> image(const T* x, std::size_t s) {
      return ConstMatrixView<T>(x + s * In::size, static_cast<Eigen::Index>(C), static_cast<Eigen::Index>(pixels));
    }
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_GLOBALAVGPOOL_HPP_INCLUDED
