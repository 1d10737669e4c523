// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_COMPOSITE_HPP_INCLUDED
#define FLOTILLA_CUDA_COMPOSITE_HPP_INCLUDED
// The GPU side of the layers made of layers (nn/block.hpp, nn/branches.hpp, nn/residual.hpp) and of
// the normalisations (nn/batch_norm.hpp, nn/layer_norm.hpp): the same parts run by their own DeviceLayers, with the
// CPU layer's geometry (parameter offsets, kept outputs, Concat's channel layout), so that the
// flat buffers and results agree with the CPU's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/cuda/batch_norm.hpp"
#include "flotilla/cuda/buffer.hpp"
#include "flotilla/cuda/elementwise.hpp"
#include "flotilla/cuda/layers.hpp"
#include "flotilla/nn/batch_norm.hpp"
#include "flotilla/nn/block.hpp"
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/layer_norm.hpp"
#include "flotilla/nn/residual.hpp"

namespace flotilla::cuda {
namespace detail {

template <class List>
struct device_layers_of;
template <class... Ls>
struct device_layers_of<flotilla::detail::type_list<Ls...>> {
  using type = std::tuple<device_layer_t<Ls>...>;
};

inline void copy_device(cudaStream_t s, float* to, const float* from, std::size_t n) {
  FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

/// A branch's `width` channels of each of `pixels` pixels into channels [first, first + width) of a
/// joined output of `all` channels a pixel (channels-last), and back.
inline void concat_scatter(cudaStream_t s, const float* from, float* to, std::size_t width, std::size_t first,
                           std::size_t all, std::size_t pixels) {
  const auto w = static_cast<index_t>(width), f = static_cast<index_t>(first), a = static_cast<index_t>(all);
  for_each_index(s, pixels * width, "concat_scatter", [=] __device__(index_t i) { to[(i / w) * a + f + i % w] = from[i]; });
}
inline void concat_gather(cudaStream_t s, const float* from, float* to, std::size_t width, std::size_t first,
                          std::size_t all, std::size_t pixels) {
  const auto w = static_cast<index_t>(width), f = static_cast<index_t>(first), a = static_cast<index_t>(all);
  for_each_index(s, pixels * width, "concat_gather", [=] __device__(index_t i) { to[i] = from[(i / w) * a + f + i % w]; });
}

}  // namespace detail

// ---- Block, Repeat ----------------------------------------------------------------------------

/// The chain's layers one after another; inner activations kept for backward, as on the CPU.
template <class L>
struct DeviceChain {
  static constexpr std::size_t depth = L::depth;
  static constexpr std::size_t kept = L::activation_offsets[depth - 1];  // per sample, all but the last

  void forward(const DeviceForwardArgs& a) {
    batch_ = a.batch;
    activations_.reserve(kept * a.batch);
    flotilla::detail::for_each_index<depth>([&]<std::size_t I>() {
      const float* in = I == 0 ? a.input : activation(I - 1);
      float* out = I + 1 == depth ? a.output : activation(I);
      DeviceForwardArgs f{a.ctx, in, out, a.batch, a.params + L::parameter_offsets[I], a.mode, a.sample_ids,
                          flotilla::detail::mix(a.noise_key, I + 1), a.statistics, a.sample_weight};
      std::get<I>(layers_).forward(f);
    });
  }

  void backward(const DeviceBackwardArgs& a) {
    grad_a_.reserve(L::widest_inner * a.batch);
    grad_b_.reserve(L::widest_inner * a.batch);
    const float* upstream = a.output_grad;
    flotilla::detail::for_each_index_reverse<depth>([&]<std::size_t I>() {
      float* din = I == 0 ? a.input_grad : (I % 2 ? grad_a_ : grad_b_).data();
      DeviceBackwardArgs b{a.ctx,
                           I == 0 ? a.input : activation(I - 1),
                           I + 1 == depth ? a.output : activation(I),
                           upstream,
                           din,
                           a.params + L::parameter_offsets[I],
                           a.param_grads + L::parameter_offsets[I],
                           a.batch,
                           a.ones,
                           a.statistics,
                           a.sample_weight};
      std::get<I>(layers_).backward(b);
      upstream = din;
    });
  }

 private:
  float* activation(std::size_t i) { return activations_.data() + L::activation_offsets[i] * batch_; }

  typename detail::device_layers_of<typename L::layers>::type layers_;
  DeviceBuffer<float> activations_, grad_a_, grad_b_;
  std::size_t batch_ = 0;
};

template <class L, class... Specs>
struct DeviceLayer<L, Block<Specs...>> : DeviceChain<L> {};
template <class L, std::size_t N, class Spec>
struct DeviceLayer<L, Repeat<N, Spec>> : DeviceChain<L> {};

// ---- Identity, Residual, Add, Concat ----------------------------------------------------------

template <class L>
struct DeviceLayer<L, Identity> {
  static constexpr std::size_t size = L::input_shape::size;
  void forward(const DeviceForwardArgs& a) { detail::copy_device(a.ctx.compute(), a.output, a.input, size * a.batch); }
  void backward(const DeviceBackwardArgs& a) {
    if (a.input_grad) detail::copy_device(a.ctx.compute(), a.input_grad, a.output_grad, size * a.batch);
  }
};

/// The branches on one input, joined: summed (Add, Residual) or side by side along channels
/// (Concat). The identity branch is the input itself, never run.
template <class L>
struct DeviceBranches {
  static constexpr std::size_t count = L::count;
  static constexpr std::size_t in_size = L::input_shape::size, out_size = L::output_shape::size;

  void forward(const DeviceForwardArgs& a) {
    batch_ = a.batch;
    outputs_.reserve(L::kept_total * a.batch);
    const cudaStream_t s = a.ctx.compute();
    flotilla::detail::for_each_index<count>([&]<std::size_t I>() {
      if constexpr (!L::template identity<I>) {
        DeviceForwardArgs f{a.ctx, a.input, output_of(I), a.batch, a.params + L::parameter_offsets[I], a.mode,
                            a.sample_ids, flotilla::detail::mix(a.noise_key, I + 1), a.statistics, a.sample_weight};
        std::get<I>(layers_).forward(f);
      }
    });
    if constexpr (L::concat) {
      const std::size_t all = out_size / L::join_pixels;
      flotilla::detail::for_each_index<count>([&]<std::size_t I>() {
        detail::concat_scatter(s, branch_output<I>(a.input), a.output, L::branch_widths[I], L::branch_firsts[I], all,
                               L::join_pixels * a.batch);
      });
    } else {
      detail::copy_device(s, a.output, branch_output<0>(a.input), out_size * a.batch);
      flotilla::detail::for_each_index<count>([&]<std::size_t I>() {
        if constexpr (I > 0) detail::add(s, branch_output<I>(a.input), a.output, out_size * a.batch);
      });
    }
  }

  void backward(const DeviceBackwardArgs& a) {
    const cudaStream_t s = a.ctx.compute();
    if constexpr (L::concat) output_grads_.reserve(out_size * a.batch);
    if (a.input_grad && count > 1) scratch_.reserve(in_size * a.batch);
    bool first = true;
    flotilla::detail::for_each_index<count>([&]<std::size_t I>() {
      const float* dy = a.output_grad;
      if constexpr (L::concat) {
        float* mine = output_grads_.data() + L::branch_firsts[I] * L::join_pixels * a.batch;
        detail::concat_gather(s, a.output_grad, mine, L::branch_widths[I], L::branch_firsts[I], out_size / L::join_pixels,
                              L::join_pixels * a.batch);
        dy = mine;
      }
      if constexpr (L::template identity<I>) {
        if (!a.input_grad) return;
        if (first) {
          detail::copy_device(s, a.input_grad, dy, in_size * a.batch);
        } else {
          detail::add(s, dy, a.input_grad, in_size * a.batch);
        }
      } else {
        float* din = !a.input_grad ? nullptr : first ? a.input_grad : scratch_.data();
        DeviceBackwardArgs b{a.ctx, a.input, output_of(I), dy, din, a.params + L::parameter_offsets[I],
                             a.param_grads + L::parameter_offsets[I], a.batch, a.ones, a.statistics, a.sample_weight};
        std::get<I>(layers_).backward(b);
        if (!a.input_grad) return;
        if (!first) detail::add(s, scratch_.data(), a.input_grad, in_size * a.batch);
      }
      first = false;
    });
  }

 private:
  float* output_of(std::size_t i) { return outputs_.data() + L::kept_offsets[i] * batch_; }
  template <std::size_t I>
  const float* branch_output(const float* input) {
    if constexpr (L::template identity<I>) {
      return input;
    } else {
      return output_of(I);
    }
  }

  typename detail::device_layers_of<typename L::layers>::type layers_;
  DeviceBuffer<float> outputs_, output_grads_, scratch_;
  std::size_t batch_ = 0;
};

template <class L, class... Branches>
struct DeviceLayer<L, Add<Branches...>> : DeviceBranches<L> {};
template <class L, class... Branches>
struct DeviceLayer<L, Concat<Branches...>> : DeviceBranches<L> {};
template <class L, class Body, class Shortcut>
struct DeviceLayer<L, Residual<Body, Shortcut>> : DeviceBranches<L> {};

// ---- BatchNorm2D, BatchNorm1D -----------------------------------------------------------------

/// nn/batch_norm.hpp on the GPU. The statistics stay on the device, unless the layer's parts must
/// meet (DeviceForwardArgs::statistics: statistics over several workers): then the few sums go to
/// the host and back.
template <class L>
struct DeviceBatchNorm {
  static constexpr index_t C = static_cast<index_t>(L::input_shape::size / L::pixels);
  static constexpr std::size_t size = L::input_shape::size;

  void forward(const DeviceForwardArgs& a) {
    const cudaStream_t s = a.ctx.compute();
    const index_t vectors = static_cast<index_t>(a.batch * L::pixels);
    const float* gamma = a.params;
    trained_ = a.mode == Mode::train;
    count_ = static_cast<double>(vectors);
    for (auto* b : {&sums_, &grad_sums_, &mean_, &var_, &inv_std_}) b->reserve(2 * C);
    scale_.reserve(C);
    shift_.reserve(C);
    if (trained_) {
      const float* x = a.input;
      partial_.reserve(static_cast<std::size_t>(2 * C * std::max<index_t>(detail::channel_sum_chunks(vectors), 1)));
      detail::channel_sums(s, vectors, C, [=] __device__(index_t v, index_t c) {
        const double value = static_cast<double>(x[v * C + c]);
        return double2{value, value * value};
      }, partial_.data(), sums_.data());
      if (a.statistics) {
        host_.assign(2 * C + 1, 0.0);
        FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(host_.data(), sums_.data(), 2 * C * sizeof(double), cudaMemcpyDeviceToHost, s));
        FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(s));
        host_[2 * C] = count_;
        (*a.statistics)(std::span<double>(host_), L::scope);
        count_ = host_[2 * C];
        FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(sums_.data(), host_.data(), 2 * C * sizeof(double), cudaMemcpyHostToDevice, s));
        FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(s));  // host_ is pageable and is written again
      }
      if (count_ < 2)
        throw ShapeError(std::string(L::name) + ": training needs more than one value per channel to normalise over, got " +
                         std::to_string(static_cast<std::size_t>(count_)));
    }
    detail::norm_statistics(s, C, sums_.data(), count_, gamma, gamma + C, gamma + 2 * C, gamma + 3 * C, trained_, L::epsilon,
                            statistics(), scale_.data(), shift_.data());
    detail::norm_apply(s, a.input, a.output, C, size * a.batch, scale_.data(), shift_.data());
  }

  void backward(const DeviceBackwardArgs& a) {
    const cudaStream_t s = a.ctx.compute();
    const index_t vectors = static_cast<index_t>(a.batch * L::pixels);
    const float* x = a.input;
    const float* dy = a.output_grad;
    const detail::NormStatistics st = statistics();
    partial_.reserve(static_cast<std::size_t>(2 * C * std::max<index_t>(detail::channel_sum_chunks(vectors), 1)));
    detail::channel_sums(s, vectors, C, [=] __device__(index_t v, index_t c) {
      const float g = dy[v * C + c];
      const float xhat = (x[v * C + c] - static_cast<float>(st.mean[c])) * static_cast<float>(st.inv_std[c]);
      return double2{static_cast<double>(g), static_cast<double>(g * xhat)};
    }, partial_.data(), grad_sums_.data());
    const double weight = static_cast<double>(a.batch) * a.sample_weight * L::momentum;
    detail::norm_parameter_grads(s, C, grad_sums_.data(), st, a.params + 2 * C, a.param_grads, trained_, weight, count_);
    if (!a.input_grad) return;
    if (trained_ && a.statistics) {
      host_.assign(2 * C, 0.0);
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(host_.data(), grad_sums_.data(), 2 * C * sizeof(double), cudaMemcpyDeviceToHost, s));
      FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(s));
      (*a.statistics)(std::span<double>(host_), L::scope);
      FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(grad_sums_.data(), host_.data(), 2 * C * sizeof(double), cudaMemcpyHostToDevice, s));
      FLOTILLA_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    detail::norm_input_grad(s, x, dy, a.input_grad, C, size * a.batch, scale_.data(), st, grad_sums_.data(), count_, trained_);
  }

 private:
  detail::NormStatistics statistics() { return {mean_.data(), var_.data(), inv_std_.data()}; }

  DeviceBuffer<double> sums_, grad_sums_, mean_, var_, inv_std_, partial_;
  DeviceBuffer<float> scale_, shift_;
  std::vector<double> host_;
  double count_ = 0;
  bool trained_ = false;
};

template <class L, StatisticsScope Scope, class Momentum, class Epsilon>
struct DeviceLayer<L, BatchNorm2D<Scope, Momentum, Epsilon>> : DeviceBatchNorm<L> {};
template <class L, StatisticsScope Scope, class Momentum, class Epsilon>
struct DeviceLayer<L, BatchNorm1D<Scope, Momentum, Epsilon>> : DeviceBatchNorm<L> {};

// ---- LayerNorm --------------------------------------------------------------------------------

/// nn/layer_norm.hpp on the GPU: each sample's mean and 1 / std in double from per-sample sums
/// (a block a sample); gamma's and beta's gradients from per-value sums over the batch.
template <class L, class Epsilon>
struct DeviceLayer<L, LayerNorm<Epsilon>> {
  static constexpr index_t D = static_cast<index_t>(L::D);

  void forward(const DeviceForwardArgs& a) {
    const cudaStream_t s = a.ctx.compute();
    const auto samples = static_cast<index_t>(a.batch);
    const float* x = a.input;
    sums_.reserve(2 * a.batch);
    mean_.reserve(a.batch);
    inv_std_.reserve(a.batch);
    double* sums = sums_.data();
    detail::sample_sums(s, samples, D, [=] __device__(index_t v, index_t i) {
      const double value = static_cast<double>(x[v * D + i]);
      return double2{value, value * value};
    }, sums);
    float* mean = mean_.data();
    float* inv_std = inv_std_.data();
    constexpr double epsilon = LayerNorm<Epsilon>::epsilon;
    detail::for_each_index(s, a.batch, "layer_norm_statistics", [=] __device__(index_t v) {
      const double m = sums[v] / static_cast<double>(D);
      const double var = sums[samples + v] / static_cast<double>(D) - m * m;
      mean[v] = static_cast<float>(m);
      inv_std[v] = static_cast<float>(1.0 / sqrt((var > 0 ? var : 0) + epsilon));
    });
    const float* gamma = a.params;
    const float* beta = a.params + D;
    float* y = a.output;
    detail::for_each_index(s, L::D * a.batch, "layer_norm_apply", [=] __device__(index_t k) {
      const index_t v = k / D, i = k % D;
      y[k] = gamma[i] * ((x[k] - mean[v]) * inv_std[v]) + beta[i];
    });
  }

  void backward(const DeviceBackwardArgs& a) {
    const cudaStream_t s = a.ctx.compute();
    const auto samples = static_cast<index_t>(a.batch);
    const float* x = a.input;
    const float* dy = a.output_grad;
    const float* gamma = a.params;
    const float* mean = mean_.data();
    const float* inv_std = inv_std_.data();
    // dgamma += sum over samples of dy * xhat, dbeta += sum of dy: per-value sums, as BatchNorm's
    // per-channel ones with a sample for a pixel and a value for a channel.
    value_sums_.reserve(2 * L::D);
    partial_.reserve(static_cast<std::size_t>(2 * D * std::max<index_t>(detail::channel_sum_chunks(samples), 1)));
    detail::channel_sums(s, samples, D, [=] __device__(index_t v, index_t i) {
      const float g = dy[v * D + i];
      return double2{static_cast<double>(g * ((x[v * D + i] - mean[v]) * inv_std[v])), static_cast<double>(g)};
    }, partial_.data(), value_sums_.data());
    const double* value_sums = value_sums_.data();
    float* grads = a.param_grads;
    detail::for_each_index(s, L::D, "layer_norm_parameter_grads", [=] __device__(index_t i) {
      grads[i] += static_cast<float>(value_sums[i]);
      grads[D + i] += static_cast<float>(value_sums[D + i]);
    });
    if (!a.input_grad) return;
    // dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, means over the sample.
    double* sums = sums_.data();
    detail::sample_sums(s, samples, D, [=] __device__(index_t v, index_t i) {
      const float g = dy[v * D + i] * gamma[i];
      return double2{static_cast<double>(g), static_cast<double>(g * ((x[v * D + i] - mean[v]) * inv_std[v]))};
    }, sums);
    float* dx = a.input_grad;
    detail::for_each_index(s, L::D * a.batch, "layer_norm_input_grad", [=] __device__(index_t k) {
      const index_t v = k / D, i = k % D;
      const float xhat = (x[k] - mean[v]) * inv_std[v];
      const float mean_g = static_cast<float>(sums[v] / static_cast<double>(D));
      const float mean_gx = static_cast<float>(sums[samples + v] / static_cast<double>(D));
      dx[k] = inv_std[v] * (dy[k] * gamma[i] - mean_g - xhat * mean_gx);
    });
  }

 private:
  DeviceBuffer<double> sums_, value_sums_, partial_;
  DeviceBuffer<float> mean_, inv_std_;
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_COMPOSITE_HPP_INCLUDED
