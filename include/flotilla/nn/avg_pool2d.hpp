// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_AVGPOOL2D_HPP_INCLUDED
#define FLOTILLA_NN_AVGPOOL2D_HPP_INCLUDED
// AvgPool2D<K, Stride, Padding>: the mean of each K x K window, per channel, with PyTorch's
// nn.AvgPool2d conventions: windows that would run past the (padded) edge are dropped (floor), and
// the padding counts as zeros in every window's mean (count_include_pad), so that every window
// divides by K * K and backward spreads each output gradient evenly over its window.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla {

template <std::size_t Kernel, std::size_t Stride = Kernel, std::size_t Padding = 0>
struct AvgPool2D {
  static_assert(Kernel > 0, "AvgPool2D<K>: the window size K must be > 0");
  static_assert(Stride > 0, "AvgPool2D<K, Stride>: the stride must be > 0");
  // As PyTorch: a window then always holds at least one value of the image.
  static_assert(2 * Padding <= Kernel, "AvgPool2D<K, Stride, Padding>: the padding must be at most half the window");

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "AvgPool2D: input_shape must be a flotilla::Shape");
    static_assert(ImageShape<In>, "AvgPool2D: its input is a vector (Shape<N>); it needs an image Shape<C, H, W>");
    static constexpr std::size_t C = In::dims[0], H = In::dims[1], W = In::dims[2];
    static_assert(Kernel <= H + 2 * Padding && Kernel <= W + 2 * Padding,
                  "AvgPool2D<K>: the window is larger than the (padded) input image");
    static constexpr std::size_t OH = (H + 2 * Padding - Kernel) / Stride + 1;
    static constexpr std::size_t OW = (W + 2 * Padding - Kernel) / Stride + 1;

    using spec = AvgPool2D;  // the spec this layer was bound from (device backends dispatch on it)
    static constexpr std::size_t kernel = Kernel, stride = Stride, padding = Padding;
    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<C, OH, OW>;
    static constexpr std::string_view name = "AvgPool2D";
    static constexpr std::size_t parameter_count = 0;
    // Every output value adds up its window: overlapping windows read each input value several
    // times, which the default estimate (one operation per input value) would miss.
    static constexpr std::uint64_t forward_flops = std::uint64_t{output_shape::size} * Kernel * Kernel;

    void forward(const ForwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      constexpr T scale = T(1) / T(Kernel * Kernel);
      for (std::size_t s = 0; s < batch; ++s) {
        const T* x = a.input.data() + s * In::size;
        T* y = a.output.data() + s * output_shape::size;
        for (std::size_t oy = 0; oy < OH; ++oy) {
          const Cover rows = covered(oy, H);
          for (std::size_t ox = 0; ox < OW; ++ox) {
            const Cover cols = covered(ox, W);
            T* out = y + (oy * OW + ox) * C;
            for (std::size_t c = 0; c < C; ++c) out[c] = T(0);
            for (std::size_t iy = rows.begin; iy < rows.end; ++iy)
              for (std::size_t ix = cols.begin; ix < cols.end; ++ix) {
                const T* in = x + (iy * W + ix) * C;
                for (std::size_t c = 0; c < C; ++c) out[c] += in[c];
              }
            for (std::size_t c = 0; c < C; ++c) out[c] *= scale;
          }
        }
      }
    }

    void backward(const BackwardArgs<T>& a) {
      if (!a.wants_input_grad()) return;
      const auto batch = static_cast<std::size_t>(a.input.cols());
      constexpr T scale = T(1) / T(Kernel * Kernel);
      // Windows that miss some input values (a stride above K, a ragged edge) leave them at zero.
      a.input_grad.setZero();
      for (std::size_t s = 0; s < batch; ++s) {
        const T* dy = a.output_grad.data() + s * output_shape::size;
        T* dx = a.input_grad.data() + s * In::size;
        for (std::size_t oy = 0; oy < OH; ++oy) {
          const Cover rows = covered(oy, H);
          for (std::size_t ox = 0; ox < OW; ++ox) {
            const Cover cols = covered(ox, W);
            const T* g = dy + (oy * OW + ox) * C;
            for (std::size_t iy = rows.begin; iy < rows.end; ++iy)
              for (std::size_t ix = cols.begin; ix < cols.end; ++ix) {
                T* d = dx + (iy * W + ix) * C;
                for (std::size_t c = 0; c < C; ++c) d[c] += g[c] * scale;
              }
          }
        }
      }
    }

   private:
    struct Cover {
      std::size_t begin, end;
    };
    /// The image rows (or columns, of an image `extent` wide) that window `o` covers, its padding cut off.
    static constexpr Cover covered(std::size_t o, std::size_t extent) {
      const std::size_t first = o * Stride;  // in padded coordinates
      return {std::max(first, Padding) - Padding, std::min(first + Kernel - Padding, extent)};
    }
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_AVGPOOL2D_HPP_INCLUDED
