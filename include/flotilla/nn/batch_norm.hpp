// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_BATCHNORM_HPP_INCLUDED
#define FLOTILLA_NN_BATCHNORM_HPP_INCLUDED
// Batch normalisation (Ioffe & Szegedy, 2015), with PyTorch's conventions:
//
//   BatchNorm2D<>   images Shape<C, H, W>: one mean and variance per channel, over the batch and
//                   every pixel (nn.BatchNorm2d);
//   BatchNorm1D<>   vectors Shape<N>: one per feature, over the batch (nn.BatchNorm1d);
//   SyncBatchNorm2D, SyncBatchNorm1D: the same with statistics over the global batch of every
//                   worker (nn.SyncBatchNorm), so that sync training on N workers equals one
//                   worker with an N-times batch.
//
// y = gamma (x - mean) / sqrt(var + eps) + beta. In training, mean and var are the batch's, the
// variance biased (divided by n); the running estimates move by momentum 0.1 towards the batch's
// mean and unbiased variance (divided by n - 1); evaluation normalises with the running estimates.
// eps = 1e-5. Both can be changed, as ratios: BatchNorm2D<Scope, std::ratio<1, 100>> for a
// momentum of 0.01.
//
// Parameters: weight (gamma) and bias (beta), of role `normalization` (optimizers can leave them
// out of weight decay); running_mean and running_var, of role `state`: not trained. They live in
// the flat parameter buffer, so checkpoints, broadcasts and server shards carry them; in training,
// backward writes each step's increment momentum * (batch statistic - running) into their
// gradient slots, weighted by the share of the update's samples this call had, and the update
// adds the workers' summed increments (optim/state_tensors.hpp): every worker ends with the same
// running statistics whatever the policy.
//
// "The batch" is every sample of the step that the statistics scope covers: a worker's threads
// meet through ForwardArgs::statistics to sum their parts' sums, so a worker's batch is normalised
// as one whatever its thread count; the global scope adds the other workers' (one small allreduce
// per layer in forward, another in backward for the gradient's two sums). Without that meeting
// point (a layer run on its own, a pipeline's micro-batch) the statistics are this call's batch.
// Sums are taken in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ratio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla {
namespace detail {

/// Batch normalisation over C channels of `In` (C = the channels of an image, the size of a
/// vector); a sample is `pixels` groups of C values, channels-last.
template <class Spec, class In, class T, std::size_t C, StatisticsScope Scope, class Momentum, class Epsilon>
struct BatchNormLayer {
  static constexpr std::size_t pixels = In::size / C;

  using spec = Spec;
  using scalar_type = T;
  using input_shape = In;
  using output_shape = In;
  static constexpr std::string_view name = Spec::name;
  static constexpr StatisticsScope scope = Scope;
  static constexpr double momentum = static_cast<double>(Momentum::num) / static_cast<double>(Momentum::den);
  static constexpr double epsilon = static_cast<double>(Epsilon::num) / static_cast<double>(Epsilon::den);
  static constexpr std::array<TensorSpec, 4> tensors{{
      {"weight", C, TensorRole::normalization},
      {"bias", C, TensorRole::normalization},
      {"running_mean", C, TensorRole::state},
      {"running_var", C, TensorRole::state},
  }};
  static constexpr std::size_t parameter_count = 4 * C;
  // Statistics, normalisation and the affine map: a few operations per value.
  static constexpr std::uint64_t forward_flops = 5 * In::size;
  static constexpr std::uint64_t backward_flops = 8 * In::size;

  void initialize(std::span<T> params, Generator& /*g*/) const {
    std::fill_n(params.begin(), C, T(1));                    // gamma
    std::fill_n(params.begin() + C, C, T(0));                // beta
    std::fill_n(params.begin() + 2 * C, C, T(0));            // running mean
    std::fill_n(params.begin() + 3 * C, C, T(1));            // running variance
  }

  void forward(const ForwardArgs<T>& a) {
    const auto batch = static_cast<std::size_t>(a.input.cols());
    const T* x = a.input.data();
    T* y = a.output.data();
    const T* gamma = a.params.data();
    const T* beta = gamma + C;
    trained_ = a.mode == Mode::train;
    if (trained_) {
      // Sums of x and x^2 per channel, and the count, over this call's samples, then over every
      // part the scope covers.
      // (Accumulators in locals: the compiler keeps them in registers, which it could not do for
      // members that the stores might alias.)
      std::array<double, C> sum{}, squares{};
      for (std::size_t v = 0; v < batch * pixels; ++v) {
        const T* row = x + v * C;
        for (std::size_t c = 0; c < C; ++c) {
          const double value = static_cast<double>(row[c]);
          sum[c] += value;
          squares[c] += value * value;
        }
      }
      sums_.resize(2 * C + 1);
      std::copy(sum.begin(), sum.end(), sums_.begin());
      std::copy(squares.begin(), squares.end(), sums_.begin() + C);
      sums_[2 * C] = static_cast<double>(batch * pixels);
      if (a.statistics) (*a.statistics)(std::span<double>(sums_), Scope);
      count_ = sums_[2 * C];
      if (count_ < 2)
        throw ShapeError(std::string(name) + ": training needs more than one value per channel to normalise over, got " +
                         std::to_string(static_cast<std::size_t>(count_)) +
                         " (a batch of one sample through a layer over vectors)");
      for (std::size_t c = 0; c < C; ++c) {
        const double mean = sums_[c] / count_;
        const double var = std::max(sums_[C + c] / count_ - mean * mean, 0.0);
        mean_[c] = mean;
        var_[c] = var;
        inv_std_[c] = 1.0 / std::sqrt(var + epsilon);
      }
    } else {
      const T* running_mean = gamma + 2 * C;
      const T* running_var = gamma + 3 * C;
      for (std::size_t c = 0; c < C; ++c) {
        mean_[c] = static_cast<double>(running_mean[c]);
        inv_std_[c] = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + epsilon);
      }
    }
    // y = x * scale + shift per channel (locals: y's stores cannot alias them).
    std::array<T, C> scale, shift;
    for (std::size_t c = 0; c < C; ++c) {
      scale[c] = static_cast<T>(static_cast<double>(gamma[c]) * inv_std_[c]);
      shift[c] = static_cast<T>(static_cast<double>(beta[c]) - mean_[c] * static_cast<double>(gamma[c]) * inv_std_[c]);
    }
    scale_ = scale;
    for (std::size_t v = 0; v < batch * pixels; ++v) {
      const T* in = x + v * C;
      T* out = y + v * C;
      for (std::size_t c = 0; c < C; ++c) out[c] = in[c] * scale[c] + shift[c];
    }
  }

  void backward(const BackwardArgs<T>& a) {
    const auto batch = static_cast<std::size_t>(a.input.cols());
    const T* x = a.input.data();
    const T* dy = a.output_grad.data();
    const T* gamma = a.params.data();
    T* dgamma = a.param_grads.data();
    T* dbeta = dgamma + C;
    // Sums of dy and dy * xhat per channel: this call's are the gradients of beta and gamma (the
    // engine adds the parts' and workers' gradients); all the scope's are in the input gradient.
    std::array<T, C> centre, inv_std;
    for (std::size_t c = 0; c < C; ++c) centre[c] = static_cast<T>(mean_[c]), inv_std[c] = static_cast<T>(inv_std_[c]);
    std::array<double, C> sum_dy{}, sum_dy_xhat{};
    for (std::size_t v = 0; v < batch * pixels; ++v) {
      const T* in = x + v * C;
      const T* g = dy + v * C;
      for (std::size_t c = 0; c < C; ++c) {
        sum_dy[c] += static_cast<double>(g[c]);
        sum_dy_xhat[c] += static_cast<double>(g[c] * ((in[c] - centre[c]) * inv_std[c]));
      }
    }
    grad_sums_.resize(2 * C);
    std::copy(sum_dy.begin(), sum_dy.end(), grad_sums_.begin());
    std::copy(sum_dy_xhat.begin(), sum_dy_xhat.end(), grad_sums_.begin() + C);
    for (std::size_t c = 0; c < C; ++c) {
      dbeta[c] += static_cast<T>(grad_sums_[c]);
      dgamma[c] += static_cast<T>(grad_sums_[C + c]);
    }
    if (trained_ && a.sample_weight != 0) {
      // The running estimates' increments, weighted by this call's share of the update's samples.
      const double weight = static_cast<double>(batch) * a.sample_weight * momentum;
      const T* running_mean = gamma + 2 * C;
      const T* running_var = gamma + 3 * C;
      T* dmean = dgamma + 2 * C;
      T* dvar = dgamma + 3 * C;
      for (std::size_t c = 0; c < C; ++c) {
        const double unbiased = var_[c] * count_ / (count_ - 1);
        dmean[c] += static_cast<T>(weight * (mean_[c] - static_cast<double>(running_mean[c])));
        dvar[c] += static_cast<T>(weight * (unbiased - static_cast<double>(running_var[c])));
      }
    }
    if (!a.wants_input_grad()) return;
    T* dx = a.input_grad.data();
    const std::array<T, C> scale = scale_;
    if (!trained_) {
      // The running statistics are constants: dx = dy * gamma / sqrt(running var + eps).
      for (std::size_t v = 0; v < batch * pixels; ++v)
        for (std::size_t c = 0; c < C; ++c) dx[v * C + c] = dy[v * C + c] * scale[c];
      return;
    }
    // dx = gamma / std * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over the statistics'
    // samples: the same parts and workers as in forward.
    if (a.statistics) (*a.statistics)(std::span<double>(grad_sums_), Scope);
    std::array<T, C> mean_dy, mean_dy_xhat;
    for (std::size_t c = 0; c < C; ++c) {
      mean_dy[c] = static_cast<T>(grad_sums_[c] / count_);
      mean_dy_xhat[c] = static_cast<T>(grad_sums_[C + c] / count_);
    }
    for (std::size_t v = 0; v < batch * pixels; ++v) {
      const T* in = x + v * C;
      const T* g = dy + v * C;
      T* out = dx + v * C;
      for (std::size_t c = 0; c < C; ++c) {
        const T xhat = (in[c] - centre[c]) * inv_std[c];
        out[c] = scale[c] * (g[c] - mean_dy[c] - xhat * mean_dy_xhat[c]);
      }
    }
  }

 private:
  bool trained_ = false;
  double count_ = 0;
  std::vector<double> sums_, grad_sums_;
  std::array<double, C> mean_{}, var_{}, inv_std_{};
  std::array<T, C> scale_{};  // gamma / std, per channel: forward's, and backward's factor
};

}  // namespace detail

/// Batch normalisation of images, per channel (see batch_norm.hpp).
template <StatisticsScope Scope = StatisticsScope::worker, class Momentum = std::ratio<1, 10>,
          class Epsilon = std::ratio<1, 100000>>
struct BatchNorm2D {
  static_assert(Momentum::num > 0 && Momentum::num <= Momentum::den,
                "BatchNorm2D<Scope, Momentum>: the momentum (a std::ratio) must be in (0, 1]");
  static_assert(Epsilon::num > 0, "BatchNorm2D<Scope, Momentum, Epsilon>: epsilon (a std::ratio) must be > 0");
  static constexpr std::string_view name = Scope == StatisticsScope::global ? "SyncBatchNorm2D" : "BatchNorm2D";
  template <class In, class T>
  struct layer : detail::BatchNormLayer<BatchNorm2D, In, T, In::dims[0], Scope, Momentum, Epsilon> {
    static_assert(ImageShape<In>,
                  "BatchNorm2D: its input is a vector (Shape<N>); BatchNorm2D normalises each channel of an image "
                  "Shape<C, H, W> over the batch and the pixels: use BatchNorm1D for vectors");
  };
};

/// Batch normalisation of vectors, per feature (see batch_norm.hpp).
template <StatisticsScope Scope = StatisticsScope::worker, class Momentum = std::ratio<1, 10>,
          class Epsilon = std::ratio<1, 100000>>
struct BatchNorm1D {
  static_assert(Momentum::num > 0 && Momentum::num <= Momentum::den,
                "BatchNorm1D<Scope, Momentum>: the momentum (a std::ratio) must be in (0, 1]");
  static_assert(Epsilon::num > 0, "BatchNorm1D<Scope, Momentum, Epsilon>: epsilon (a std::ratio) must be > 0");
  static constexpr std::string_view name = Scope == StatisticsScope::global ? "SyncBatchNorm1D" : "BatchNorm1D";
  template <class In, class T>
  struct layer : detail::BatchNormLayer<BatchNorm1D, In, T, In::size, Scope, Momentum, Epsilon> {
    static_assert(!ImageShape<In>,
                  "BatchNorm1D: its input is an image (Shape<C, H, W>); BatchNorm1D normalises each feature of a "
                  "vector over the batch: use BatchNorm2D for images (per channel), or Flatten first");
  };
};

/// Statistics over the global batch of every worker (PyTorch's SyncBatchNorm).
using SyncBatchNorm2D = BatchNorm2D<StatisticsScope::global>;
using SyncBatchNorm1D = BatchNorm1D<StatisticsScope::global>;

}  // namespace flotilla
#endif  // FLOTILLA_NN_BATCHNORM_HPP_INCLUDED
