#pragma once
// Conv2D<F, K, Stride, Padding>: 2-D convolution of an image Shape<C, H, W> with F filters of K x K,
// by im2col and one matrix product per chunk of images.
//
// Images are channels-last in memory, so one row of a K x K patch is K*C contiguous input values:
// im2col is a sequence of contiguous copies, and the product W (F x K*K*C) * cols (K*K*C x pixels)
// writes the output channels-last too, with no transposition anywhere.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "flotilla/concepts/initializer.hpp"
#include "flotilla/core/gemm.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/init.hpp"
#include "flotilla/nn/layer_args.hpp"

namespace flotilla {

template <std::size_t Filters, std::size_t Kernel, std::size_t Stride = 1, std::size_t Padding = 0,
          class Init = init::He>
struct Conv2D {
  static_assert(Filters > 0, "Conv2D<F, K>: the number of filters F must be > 0");
  static_assert(Kernel > 0, "Conv2D<F, K>: the kernel size K must be > 0");
  static_assert(Stride > 0, "Conv2D<F, K, Stride>: the stride must be > 0");

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "Conv2D: input_shape must be a flotilla::Shape");
    static_assert(ImageShape<In>,
                  "Conv2D: its input is a vector (Shape<N>); Conv2D needs an image Shape<C, H, W> "
                  "(declare Input<C, H, W>, and do not Flatten before it)");
    static constexpr std::size_t C = In::dims[0], H = In::dims[1], W = In::dims[2];
    static_assert(Kernel <= H + 2 * Padding && Kernel <= W + 2 * Padding,
                  "Conv2D<F, K>: the kernel is larger than the (padded) input image");
    static_assert(Padding < Kernel, "Conv2D<F, K, S, P>: padding must be smaller than the kernel");
    static_assert(Initializer<Init, T>, "Conv2D: Init must be an initialiser (see nn/init.hpp)");

    static constexpr std::size_t OH = (H + 2 * Padding - Kernel) / Stride + 1;
    static constexpr std::size_t OW = (W + 2 * Padding - Kernel) / Stride + 1;
    static constexpr std::size_t patch = Kernel * Kernel * C;
    static constexpr std::size_t pixels = OH * OW;

    using scalar_type = T;
    using input_shape = In;
    using output_shape = Shape<Filters, OH, OW>;
    static constexpr std::string_view name = "Conv2D";
    static constexpr std::array<TensorSpec, 2> tensors{{
        {"weight", Filters * patch, TensorRole::weight},
        {"bias", Filters, TensorRole::bias},
    }};
    static constexpr std::size_t parameter_count = Filters * patch + Filters;

    void initialize(std::span<T> params, Generator& g) const {
      Init::fill(params.first(Filters * patch), patch, Filters * Kernel * Kernel, g);
      for (auto& b : params.subspan(Filters * patch)) b = T(0);
    }

    void forward(const ForwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      cols_.resize(patch * pixels * batch);
      for (std::size_t s = 0; s < batch; ++s) im2col(a.input.col(static_cast<Eigen::Index>(s)).data(), cols_.data() + s * patch * pixels);
      const auto cols = ConstMatrixView<T>(cols_.data(), patch, static_cast<Eigen::Index>(pixels * batch));
      auto y = MatrixView<T>(a.output.data(), Filters, static_cast<Eigen::Index>(pixels * batch));
      y.colwise() = ConstVectorView<T>(a.params.data() + Filters * patch, Filters);
      detail::gemm(y, weight(a.params), cols, /*accumulate=*/true);
    }

    void backward(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      const auto n = static_cast<Eigen::Index>(pixels * batch);
      const auto dy = ConstMatrixView<T>(a.output_grad.data(), Filters, n);
      const auto cols = ConstMatrixView<T>(cols_.data(), patch, n);
      auto dw = MatrixView<T>(a.param_grads.data(), Filters, patch);
      auto db = VectorView<T>(a.param_grads.data() + Filters * patch, Filters);
      detail::gemm(dw, dy, cols.transpose(), /*accumulate=*/true);
      db += dy.rowwise().sum();
      if (!a.wants_input_grad()) return;
      dcols_.resize(patch * pixels * batch);
      auto dcols = MatrixView<T>(dcols_.data(), patch, n);
      detail::gemm(dcols, weight(a.params).transpose(), dy, /*accumulate=*/false);
      for (std::size_t s = 0; s < batch; ++s)
        col2im(dcols_.data() + s * patch * pixels, a.input_grad.col(static_cast<Eigen::Index>(s)).data());
    }

   private:
    static ConstMatrixView<T> weight(std::span<const T> p) { return ConstMatrixView<T>(p.data(), Filters, patch); }

    // Visits every (output pixel, kernel row) pair: `run(col, x_offset, kx_begin, kx_end)` for the
    // in-bounds part of the row; the caller handles the out-of-bounds rest (padding).
    template <class RowFn>
    static void for_each_patch_row(RowFn&& row) {
      for (std::size_t oy = 0; oy < OH; ++oy) {
        for (std::size_t ox = 0; ox < OW; ++ox) {
          const std::size_t q = oy * OW + ox;
          for (std::size_t ky = 0; ky < Kernel; ++ky) {
            const auto iy = static_cast<std::ptrdiff_t>(oy * Stride + ky) - static_cast<std::ptrdiff_t>(Padding);
            const auto ix0 = static_cast<std::ptrdiff_t>(ox * Stride) - static_cast<std::ptrdiff_t>(Padding);
            const std::size_t col_offset = q * patch + ky * Kernel * C;
            if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(H)) {
              row(col_offset, std::size_t{0}, std::size_t{0}, std::size_t{0});
              continue;
            }
            const auto kx_begin = static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, -ix0));
            const auto kx_end = static_cast<std::size_t>(
                std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(Kernel), static_cast<std::ptrdiff_t>(W) - ix0));
            const auto x_offset = (static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix0 + static_cast<std::ptrdiff_t>(kx_begin))) * C;
            row(col_offset, x_offset, kx_begin, kx_end);
          }
        }
      }
    }

    static void im2col(const T* x, T* cols) {
      for_each_patch_row([&](std::size_t col, std::size_t xo, std::size_t kb, std::size_t ke) {
        T* dst = cols + col;
        if constexpr (Padding > 0) {
          std::fill(dst, dst + kb * C, T(0));
          std::fill(dst + std::max(kb, ke) * C, dst + Kernel * C, T(0));
        }
        if (ke > kb) std::memcpy(dst + kb * C, x + xo, (ke - kb) * C * sizeof(T));
      });
    }

    static void col2im(const T* cols, T* dx) {
      std::fill(dx, dx + In::size, T(0));
      for_each_patch_row([&](std::size_t col, std::size_t xo, std::size_t kb, std::size_t ke) {
        const T* src = cols + col + kb * C;
        T* dst = dx + xo;
        for (std::size_t i = 0, n = (ke > kb ? ke - kb : 0) * C; i < n; ++i) dst[i] += src[i];
      });
    }

    Buffer<T> cols_;
    Buffer<T> dcols_;
  };
};

}  // namespace flotilla
