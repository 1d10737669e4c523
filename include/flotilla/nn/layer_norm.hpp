// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_LAYERNORM_HPP_INCLUDED
#define FLOTILLA_NN_LAYERNORM_HPP_INCLUDED
// LayerNorm (Ba, Kiros & Hinton, 2016): each sample normalised over all of its values, then scaled
// and shifted element by element, as PyTorch's nn.LayerNorm(normalized_shape = the sample's shape):
//
//   y = gamma * (x - mean) / sqrt(var + eps) + beta,   mean and (biased) var over one sample.
//
// Nothing is shared between samples, so it needs no batch statistics, no running estimates and no
// communication, and behaves the same in training and evaluation. eps = 1e-5 by default
// (LayerNorm<std::ratio<1, 1000000>> for 1e-6).
// Parameters: weight (gamma) and bias (beta), one per value of a sample, of role `normalization`.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ratio>
#include <span>
#include <string_view>
#include <vector>

#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"

namespace flotilla {

template <class Epsilon = std::ratio<1, 100000>>
struct LayerNorm {
  static_assert(Epsilon::num > 0, "LayerNorm<Epsilon>: epsilon (a std::ratio) must be > 0");
  static constexpr double epsilon = static_cast<double>(Epsilon::num) / static_cast<double>(Epsilon::den);

  template <class In, class T>
  struct layer {
    static_assert(AnyShape<In>, "LayerNorm: input_shape must be a flotilla::Shape");
    static_assert(In::size > 1, "LayerNorm: a sample of one value normalises to zero; it needs at least two");
    static constexpr std::size_t D = In::size;

    using spec = LayerNorm;
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "LayerNorm";
    static constexpr std::array<TensorSpec, 2> tensors{{
        {"weight", D, TensorRole::normalization},
        {"bias", D, TensorRole::normalization},
    }};
    static constexpr std::size_t parameter_count = 2 * D;
    static constexpr std::uint64_t forward_flops = 5 * D;
    static constexpr std::uint64_t backward_flops = 8 * D;

    void initialize(std::span<T> params, Generator& /*g*/) const {
      std::fill_n(params.begin(), D, T(1));
      std::fill_n(params.begin() + D, D, T(0));
    }

    void forward(const ForwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      const T* gamma = a.params.data();
      const T* beta = gamma + D;
      mean_.resize(batch);
      inv_std_.resize(batch);
      for (std::size_t s = 0; s < batch; ++s) {
        const T* x = a.input.data() + s * D;
        T* y = a.output.data() + s * D;
        double sum = 0, squares = 0;
        for (std::size_t i = 0; i < D; ++i) sum += static_cast<double>(x[i]);
        const double mean = sum / D;
        for (std::size_t i = 0; i < D; ++i) {
          const double d = static_cast<double>(x[i]) - mean;
          squares += d * d;
        }
        const double inv_std = 1.0 / std::sqrt(squares / D + epsilon);
        const T m = static_cast<T>(mean), r = static_cast<T>(inv_std);  // locals: y's stores cannot alias them
        mean_[s] = m;
        inv_std_[s] = r;
        for (std::size_t i = 0; i < D; ++i) y[i] = gamma[i] * ((x[i] - m) * r) + beta[i];
      }
    }

    void backward(const BackwardArgs<T>& a) {
      const auto batch = static_cast<std::size_t>(a.input.cols());
      const T* gamma = a.params.data();
      T* dgamma = a.param_grads.data();
      T* dbeta = dgamma + D;
      for (std::size_t s = 0; s < batch; ++s) {
        const T* x = a.input.data() + s * D;
        const T* dy = a.output_grad.data() + s * D;
        // dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, means over the sample.
        const T m = mean_[s], r = inv_std_[s];
        double sum_g = 0, sum_gx = 0;
        for (std::size_t i = 0; i < D; ++i) {
          const T xhat = (x[i] - m) * r;
          dgamma[i] += dy[i] * xhat;
          dbeta[i] += dy[i];
          const double g = static_cast<double>(dy[i] * gamma[i]);
          sum_g += g;
          sum_gx += g * static_cast<double>(xhat);
        }
        if (!a.wants_input_grad()) continue;
        const T mean_g = static_cast<T>(sum_g / D), mean_gx = static_cast<T>(sum_gx / D);
        T* dx = a.input_grad.data() + s * D;
        for (std::size_t i = 0; i < D; ++i) {
          const T xhat = (x[i] - m) * r;
          dx[i] = r * (dy[i] * gamma[i] - mean_g - xhat * mean_gx);
        }
      }
    }

   private:
    std::vector<T> mean_, inv_std_;
  };
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_LAYERNORM_HPP_INCLUDED
