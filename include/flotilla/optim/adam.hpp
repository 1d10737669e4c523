// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_ADAM_HPP_INCLUDED
#define FLOTILLA_OPTIM_ADAM_HPP_INCLUDED
// Adam (Kingma & Ba, 2015) and AdamW (Loshchilov & Hutter, 2019). Adam's weight decay is an L2
// term added to the gradient; AdamW's is decoupled: p -= lr * wd * p before the Adam step. As in
// optim/sgd.hpp, the update is one element rule for both engines.
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/element_math.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/optim/detail/element_rule.hpp"

namespace flotilla::optim {

namespace detail {
struct AdamConfig {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0;
  bool decay_biases = true;
  /// Whether weight decay applies to normalisation layers' scale and shift (PyTorch decays every
  /// parameter it is given; ResNet recipes usually exempt these and the biases).
  bool decay_normalization = true;
};

template <class T>
struct AdamState {
  explicit AdamState(std::size_t n) : m(n, T(0)), v(n, T(0)) {}
  Buffer<T> m;  ///< first moment
  Buffer<T> v;  ///< second moment
  std::array<std::span<T>, 2> buffers() { return {std::span<T>(m), std::span<T>(v)}; }
};

/// One Adam (or, Decoupled, AdamW) step of an element or an array, with the step's constants.
template <bool Decoupled, class T>
struct AdamRule : DecayChoice {
  T lr, b1, b2, step_size, root_correction, eps, wd;

  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class P, class G, class M, class V>
  FLOTILLA_HOST_DEVICE void operator()(bool decay, P&& p, const G& g, M&& m, V&& v) const {
    if constexpr (Decoupled) {
      if (decay) p *= T(1) - lr * wd;
      m = b1 * m + (T(1) - b1) * g;
      v = b2 * v + (T(1) - b2) * element::square(g);
    } else {
      if (decay) {
        m = b1 * m + (T(1) - b1) * (g + wd * p);
        v = b2 * v + (T(1) - b2) * element::square(g + wd * p);
      } else {
        m = b1 * m + (T(1) - b1) * g;
        v = b2 * v + (T(1) - b2) * element::square(g);
      }
    }
    // PyTorch's form: p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    p -= step_size * m / (element::sqrt(v) / root_correction + eps);
  }
};

/// The rule's constants for step `info`, computed in double as PyTorch does, then rounded to T.
template <bool Decoupled, class T>
AdamRule<Decoupled, T> adam_rule(const AdamConfig& c, const StepInfo& info) {
  const double t = static_cast<double>(info.step);
  return {{c.weight_decay != 0, c.decay_biases, c.decay_normalization},
          static_cast<T>(info.learning_rate),
          static_cast<T>(c.beta1),
          static_cast<T>(c.beta2),
          static_cast<T>(info.learning_rate / (1 - std::pow(c.beta1, t))),
          static_cast<T>(std::sqrt(1 - std::pow(c.beta2, t))),
          static_cast<T>(c.epsilon),
          static_cast<T>(c.weight_decay)};
}
}  // namespace detail

struct Adam : detail::AdamConfig {
  static constexpr std::string_view name = "Adam";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  template <class T>
  using state = detail::AdamState<T>;
  template <class T>
  detail::AdamRule<false, T> element_rule(const StepInfo& info) const {
    return detail::adam_rule<false, T>(*this, info);
  }
  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::apply_rule(element_rule<T>(info), params, grads, s.buffers(), tensors);
  }
};

struct AdamW : detail::AdamConfig {
  static constexpr std::string_view name = "AdamW";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  AdamW() { weight_decay = 1e-2; }
  template <class T>
  using state = detail::AdamState<T>;
  template <class T>
  detail::AdamRule<true, T> element_rule(const StepInfo& info) const {
    return detail::adam_rule<true, T>(*this, info);
  }
  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::apply_rule(element_rule<T>(info), params, grads, s.buffers(), tensors);
  }
};

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_ADAM_HPP_INCLUDED
