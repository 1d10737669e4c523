// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_LAYERS_HPP_INCLUDED
#define FLOTILLA_CUDA_LAYERS_HPP_INCLUDED
// The GPU implementation of each built-in layer: cuda::DeviceLayer<L> for the concrete layer type
// L that the CPU backend uses (Dense<N>::layer<In, float> and so on), so that one network type runs
// on either device. Parameters and activations have the CPU's layouts (cuda/index_math.hpp), so the
// flat parameter buffer, checkpoints and transports do not change with the device.
//
// Dispatch is on the layer's spec (`L::spec`, e.g. Dense<10, init::Glorot>) or, for the
// activations, on the CPU's element-wise layer template. A layer with no GPU implementation (a
// user's own) is a compile error naming DeviceLayer: write a specialization of it (docs/gpu.md).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flotilla/cuda/avg_pool.hpp"
#include "flotilla/cuda/blas.hpp"
#include "flotilla/cuda/buffer.hpp"
#include "flotilla/cuda/context.hpp"
#include "flotilla/cuda/elementwise.hpp"
#include "flotilla/cuda/im2col.hpp"
#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/maxpool.hpp"
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/dropout.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/global_avg_pool.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/maxpool2d.hpp"

namespace flotilla::cuda {

/// What a device layer's forward gets (all pointers are device memory).
struct DeviceForwardArgs {
  const Context& ctx;
  const float* input;   ///< (input size) x batch
  float* output;        ///< (output size) x batch
  std::size_t batch;
  const float* params;  ///< the layer's slice of the flat parameters
  Mode mode;
  const std::uint64_t* sample_ids;  ///< batch ids (device), never null
  std::uint64_t noise_key;          ///< as nn/network.hpp forms it
  /// As in ForwardArgs: where normalisation statistics meet the other workers' (null: this batch
  /// is all there is), and each sample's weight in the update (0 outside training steps).
  const StatisticsSum* statistics = nullptr;
  double sample_weight = 0;
};

/// What a device layer's backward gets. `param_grads` is added to; `input_grad` is written, or is
/// null when nobody needs it (the first layer). `ones` holds at least as many 1.0f as any layer's
/// batch * pixels (bias gradients are row sums: a matrix-vector product with it).
struct DeviceBackwardArgs {
  const Context& ctx;
  const float* input;
  const float* output;
  const float* output_grad;
  float* input_grad;
  const float* params;
  float* param_grads;
  std::size_t batch;
  const float* ones;
  const StatisticsSum* statistics = nullptr;  ///< as in the forward this backward follows
  double sample_weight = 0;
};

/// The GPU implementation of layer type L; specialized below for the built-in layers.
template <class L, class Spec = void>
struct DeviceLayer {
  static_assert(!std::is_same_v<L, L>,
                "flotilla::cuda::DeviceLayer<L>: this layer has no CUDA implementation. Built in: Dense, Conv2D, "
                "MaxPool2D, AvgPool2D, GlobalAvgPool, Flatten, Dropout, ReLU, LeakyReLU, Tanh, Sigmoid, GELU, "
                "BatchNorm2D, BatchNorm1D, LayerNorm, Block, Repeat, Residual, Add, Concat, Identity (cuda/composite.hpp); "
                "for your own layer, specialize flotilla::cuda::DeviceLayer (see docs/gpu.md)");
};

namespace detail {
template <class L, class = void>
struct spec_of {
  using type = void;
};
template <class L>
struct spec_of<L, std::void_t<typename L::spec>> {
  using type = typename L::spec;
};
}  // namespace detail

/// The device layer for L: the partial specializations below match on (L, its spec).
template <class L>
using device_layer_t = DeviceLayer<L, typename detail::spec_of<L>::type>;

// ---- Dense ------------------------------------------------------------------------------------

/// y = W x + b through cuBLAS (W: Outputs x inputs, column-major, then b: as nn/dense.hpp).
template <class L, std::size_t Outputs, class Init>
struct DeviceLayer<L, Dense<Outputs, Init>> {
  static constexpr std::size_t n = Outputs, k = L::inputs;

  void forward(const DeviceForwardArgs& a) {
    detail::gemm(a.ctx.blas(), false, false, n, a.batch, k, a.params, n, a.input, k, a.output, n, false);
    detail::add_bias(a.ctx.compute(), a.output, a.params + n * k, n, a.batch);
  }
  void backward(const DeviceBackwardArgs& a) {
    // dW += dY X^T; db += dY 1; dX = W^T dY.
    detail::gemm(a.ctx.blas(), false, true, n, k, a.batch, a.output_grad, n, a.input, k, a.param_grads, n, true);
    detail::gemv_accumulate(a.ctx.blas(), n, a.batch, a.output_grad, a.ones, a.param_grads + n * k);
    if (a.input_grad) detail::gemm(a.ctx.blas(), true, false, k, a.batch, n, a.params, n, a.output_grad, n, a.input_grad, k, false);
  }
};

// ---- Conv2D -----------------------------------------------------------------------------------

/// im2col, then Y (F x pixels*batch) = W (F x patch) cols + b through cuBLAS; Y is the channels-last
/// output batch as it stands. Backward: dW += dY cols^T, db += dY 1, dcols = W^T dY, col2im. The
/// geometry takes the layer's padding, `same` resolved, not the spec's argument.
template <class L, std::size_t Filters, std::size_t Kernel, std::size_t Stride, std::size_t Padding, class Init>
struct DeviceLayer<L, Conv2D<Filters, Kernel, Stride, Padding, Init>> {
  static constexpr ConvGeometry g = conv_geometry<L>();
  static constexpr auto F = static_cast<std::size_t>(g.F), patch = static_cast<std::size_t>(g.patch()),
                        pixels = static_cast<std::size_t>(g.pixels());

  void forward(const DeviceForwardArgs& a) {
    const std::size_t cols_n = pixels * a.batch;
    cols_.reserve(patch * cols_n);
    detail::im2col(a.ctx.compute(), g, a.input, cols_.data(), a.batch);
    detail::gemm(a.ctx.blas(), false, false, F, cols_n, patch, a.params, F, cols_.data(), patch, a.output, F, false);
    detail::add_bias(a.ctx.compute(), a.output, a.params + F * patch, F, cols_n);
  }
  void backward(const DeviceBackwardArgs& a) {
    const std::size_t cols_n = pixels * a.batch;
    detail::gemm(a.ctx.blas(), false, true, F, patch, cols_n, a.output_grad, F, cols_.data(), patch, a.param_grads, F, true);
    detail::gemv_accumulate(a.ctx.blas(), F, cols_n, a.output_grad, a.ones, a.param_grads + F * patch);
    if (!a.input_grad) return;
    dcols_.reserve(patch * cols_n);
    detail::gemm(a.ctx.blas(), true, false, patch, cols_n, F, a.params, F, a.output_grad, F, dcols_.data(), patch, false);
    detail::col2im(a.ctx.compute(), g, dcols_.data(), a.input_grad, a.batch);
  }

 private:
  DeviceBuffer<float> cols_;   // im2col of the last forward's input (read again by backward)
  DeviceBuffer<float> dcols_;  // W^T dY
};

// ---- MaxPool2D --------------------------------------------------------------------------------

template <class L, std::size_t Kernel, std::size_t Stride>
struct DeviceLayer<L, MaxPool2D<Kernel, Stride>> {
  static constexpr PoolGeometry g = pool_geometry<L>();

  void forward(const DeviceForwardArgs& a) {
    argmax_.reserve(static_cast<std::size_t>(g.out_size()) * a.batch);
    detail::maxpool_forward(a.ctx.compute(), g, a.input, a.output, argmax_.data(), a.batch);
  }
  void backward(const DeviceBackwardArgs& a) {
    if (a.input_grad) detail::maxpool_backward(a.ctx.compute(), g, a.output_grad, argmax_.data(), a.input_grad, a.batch);
  }

 private:
  DeviceBuffer<std::uint32_t> argmax_;  // per output value, the offset of its maximum in the sample
};

// ---- AvgPool2D, GlobalAvgPool -----------------------------------------------------------------

template <class L, std::size_t Kernel, std::size_t Stride, std::size_t Padding>
struct DeviceLayer<L, AvgPool2D<Kernel, Stride, Padding>> {
  static constexpr AvgPoolGeometry g = avg_pool_geometry<L>();

  void forward(const DeviceForwardArgs& a) { detail::avg_pool_forward(a.ctx.compute(), g, a.input, a.output, a.batch); }
  void backward(const DeviceBackwardArgs& a) {
    if (a.input_grad) detail::avg_pool_backward(a.ctx.compute(), g, a.output_grad, a.input_grad, a.batch);
  }
};

template <class L>
struct DeviceLayer<L, GlobalAvgPool> {
  static constexpr GlobalPoolGeometry g = global_pool_geometry<L>();

  void forward(const DeviceForwardArgs& a) {
    detail::global_avg_pool_forward(a.ctx.compute(), g, a.input, a.output, a.batch);
  }
  void backward(const DeviceBackwardArgs& a) {
    if (a.input_grad) detail::global_avg_pool_backward(a.ctx.compute(), g, a.output_grad, a.input_grad, a.batch);
  }
};

// ---- Flatten ----------------------------------------------------------------------------------

template <class L>
struct DeviceLayer<L, Flatten> {
  static constexpr std::size_t size = L::input_shape::size;
  void forward(const DeviceForwardArgs& a) {
    FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(a.output, a.input, size * a.batch * sizeof(float), cudaMemcpyDeviceToDevice,
                                        a.ctx.compute()));
  }
  void backward(const DeviceBackwardArgs& a) {
    if (a.input_grad)
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(a.input_grad, a.output_grad, size * a.batch * sizeof(float),
                                          cudaMemcpyDeviceToDevice, a.ctx.compute()));
  }
};

// ---- Dropout ----------------------------------------------------------------------------------

/// The mask is drawn on the GPU from the same (seed, epoch, layer, sample id) keys as the CPU's,
/// value for value (cuda::dropout_scale).
template <class L, std::size_t Num, std::size_t Den>
struct DeviceLayer<L, Dropout<Num, Den>> {
  static constexpr std::size_t size = L::input_shape::size;
  void forward(const DeviceForwardArgs& a) {
    active_ = a.mode == Mode::train && Num != 0;
    if (!active_) {
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(a.output, a.input, size * a.batch * sizeof(float), cudaMemcpyDeviceToDevice,
                                          a.ctx.compute()));
      return;
    }
    scale_.reserve(size * a.batch);
    detail::dropout_mask(a.ctx.compute(), scale_.data(), size, a.batch, a.sample_ids, a.noise_key, L::rate,
                         static_cast<float>(1.0 / (1.0 - L::rate)));
    detail::multiply(a.ctx.compute(), a.input, scale_.data(), a.output, size * a.batch);
  }
  void backward(const DeviceBackwardArgs& a) {
    if (!a.input_grad) return;
    if (active_) {
      detail::multiply(a.ctx.compute(), a.output_grad, scale_.data(), a.input_grad, size * a.batch);
    } else {
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(a.input_grad, a.output_grad, size * a.batch * sizeof(float),
                                          cudaMemcpyDeviceToDevice, a.ctx.compute()));
    }
  }

 private:
  DeviceBuffer<float> scale_;
  bool active_ = false;
};

// ---- activations ------------------------------------------------------------------------------

// The CPU layer's own element functions (nn/activation.hpp), one element per thread; backward
// reads the input or the output, whichever the function's derivative is written in.
template <class F, class In>
struct DeviceLayer<flotilla::detail::ElementwiseLayer<F, In, float>, void> {
  static constexpr std::size_t size = In::size;
  void forward(const DeviceForwardArgs& a) {
    const float* x = a.input;
    float* y = a.output;
    detail::for_each_index(a.ctx.compute(), size * a.batch, "activation_forward",
                           [=] __device__(index_t i) { y[i] = F::forward(x[i]); });
  }
  void backward(const DeviceBackwardArgs& a) {
    if (!a.input_grad) return;
    const float* saved = flotilla::detail::backward_from_input<F> ? a.input : a.output;
    const float* dy = a.output_grad;
    float* dx = a.input_grad;
    detail::for_each_index(a.ctx.compute(), size * a.batch, "activation_backward",
                           [=] __device__(index_t i) { dx[i] = F::backward(saved[i], dy[i]); });
  }
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_LAYERS_HPP_INCLUDED
