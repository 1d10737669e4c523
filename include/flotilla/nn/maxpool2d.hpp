// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_MAXPOOL2D_HPP_INCLUDED
#define FLOTILLA_NN_MAXPOOL2D_HPP_INCLUDED
// MaxPool2D<K, Stride>: the maximum of each K x K window, per channel. Windows that would run past
// the edge are dropped (floor), as in PyTorch. The position of each maximum is remembered so that
// backward routes the gradient to it alone.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {

template <std::size_t Kernel, std::size_t Stride = Kernel>
struct MaxPool2D {
  static_assert(Kernel > 0, "MaxPool2D<K>: the window size K must be > 0");
  static_assert(Stride > 0, "MaxPool2D<K, Stride>: the stride must be > 0");

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "MaxPool2D: input_shape must be a flotilla::Shape");
    static_assert(ImageShape<In>, "MaxPool2D: its input is a vector (Shape<N>); it needs an image Shape<C, H, W>");
    static constexpr std::size_t C = In::dims[0], H = In::dims[1], W = In::dims[2];
    static_assert(Kernel <= H && Kernel <= W, "MaxPool2D<K>: the window is larger than the input image");
    static constexpr std::size_t OH = (H - Kernel) / Stride + 1;
    static constexpr std::size_t OW = (W - Kernel) / Stride + 1;

    using spec = MaxPool2D;  // the spec this layer was bound from (device backends dispatch on it)
    static constexpr std::size_t kernel = Kernel, stride = Stride;
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<C, OH, OW>;
    static constexpr std::string_view name = "MaxPool2D";
    static constexpr std::size_t parameter_count = 0;

    void forward(const ForwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      argmax_.resize(output_shape::size * batch);
      for (std::size_t s = 0; s < batch; ++s) {
        const T* x = a.input.data() + s * In::size;
        T* y = a.output.data() + s * output_shape::size;
        std::uint32_t* arg = argmax_.data() + s * output_shape::size;
        for (std::size_t oy = 0; oy < OH; ++oy) {
          for (std::size_t ox = 0; ox < OW; ++ox) {
            const std::size_t o = (oy * OW + ox) * C;
            const std::size_t first = (oy * Stride * W + ox * Stride) * C;
            for (std::size_t c = 0; c < C; ++c) {
              y[o + c] = x[first + c];
              arg[o + c] = static_cast<std::uint32_t>(first + c);
            }
            for (std::size_t ky = 0; ky < Kernel; ++ky) {
              for (std::size_t kx = 0; kx < Kernel; ++kx) {
                const std::size_t i = ((oy * Stride + ky) * W + ox * Stride + kx) * C;
                for (std::size_t c = 0; c < C; ++c) {
                  // Strict > keeps the first maximum, matching the usual convention on ties.
                  const bool larger = x[i + c] > y[o + c];
                  y[o + c] = larger ? x[i + c] : y[o + c];
                  arg[o + c] = larger ? static_cast<std::uint32_t>(i + c) : arg[o + c];
                }
              }
            }
          }
        }
      }
    }

    void backward(const BackwardArgs<T>& a) {
      if (!a.wants_input_grad()) return;
      const auto batch = static_cast<std::size_t>(a.input.cols());
      if constexpr (Stride == Kernel && H % Kernel == 0 && W % Kernel == 0) {
        // Windows tile the image exactly: every input value belongs to one window, so each can be
        // written once (the gradient or zero) instead of zeroing the whole gradient first.
        for (std::size_t s = 0; s < batch; ++s) {
          const T* dy = a.output_grad.data() + s * output_shape::size;
          T* dx = a.input_grad.data() + s * In::size;
          const std::uint32_t* arg = argmax_.data() + s * output_shape::size;
          for (std::size_t oy = 0; oy < OH; ++oy) {
            for (std::size_t ox = 0; ox < OW; ++ox) {
              const std::size_t o = (oy * OW + ox) * C;
              for (std::size_t ky = 0; ky < Kernel; ++ky) {
                for (std::size_t kx = 0; kx < Kernel; ++kx) {
                  const std::size_t i = ((oy * Stride + ky) * W + ox * Stride + kx) * C;
                  for (std::size_t c = 0; c < C; ++c) dx[i + c] = arg[o + c] == i + c ? dy[o + c] : T(0);
                }
              }
            }
          }
        }
        return;
      }
      a.input_grad.setZero();
      for (std::size_t s = 0; s < batch; ++s) {
        const T* dy = a.output_grad.data() + s * output_shape::size;
        T* dx = a.input_grad.data() + s * In::size;
        const std::uint32_t* arg = argmax_.data() + s * output_shape::size;
        for (std::size_t o = 0; o < output_shape::size; ++o) dx[arg[o]] += dy[o];
      }
    }

   private:
    std::vector<std::uint32_t> argmax_;
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_MAXPOOL2D_HPP_INCLUDED
