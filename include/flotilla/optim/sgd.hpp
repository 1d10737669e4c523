// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_SGD_HPP_INCLUDED
#define FLOTILLA_OPTIM_SGD_HPP_INCLUDED
// Stochastic gradient descent, plain and with momentum (heavy-ball or Nesterov), with PyTorch's
// conventions: the velocity starts at zero and accumulates v = mu * v + g, and weight decay adds
// wd * p to the gradient. Each update is written once, as an element rule that the CPU engine
// applies to Eigen arrays and the CUDA engine to one element per thread.
#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/optim/detail/element_rule.hpp"

namespace flotilla::optim {

/// p -= lr * (g + wd * p).
struct SGD {
  static constexpr std::string_view name = "SGD";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  double learning_rate = 0.01;
  double weight_decay = 0;
  bool decay_biases = true;
  /// Whether weight decay applies to normalisation layers' scale and shift (PyTorch decays every
  /// parameter it is given; ResNet recipes usually exempt these and the biases).
  bool decay_normalization = true;

  template <class T>
  struct state {
    explicit state(std::size_t) {}
    std::array<std::span<T>, 0> buffers() { return {}; }
  };

  template <class T>
  struct rule : detail::DecayChoice {
    T lr, wd;
    FLOTILLA_HOST_DEVICE_TEMPLATE
    template <class P, class G>
    FLOTILLA_HOST_DEVICE void operator()(bool decay, P&& p, const G& g) const {
      if (decay) {
        p -= lr * (g + wd * p);
      } else {
        p -= lr * g;
      }
    }
  };

  template <class T>
  rule<T> element_rule(const StepInfo& info) const {
    return {{weight_decay != 0, decay_biases, decay_normalization}, static_cast<T>(info.learning_rate), static_cast<T>(weight_decay)};
  }

  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::apply_rule(element_rule<T>(info), params, grads, s.buffers(), tensors);
  }
};

/// v = mu * v + (g + wd * p); p -= lr * v, or with Nesterov p -= lr * (g + wd * p + mu * v).
struct Momentum {
  static constexpr std::string_view name = "Momentum";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  double learning_rate = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0;
  bool decay_biases = true;
  /// Whether weight decay applies to normalisation layers' scale and shift (PyTorch decays every
  /// parameter it is given; ResNet recipes usually exempt these and the biases).
  bool decay_normalization = true;

  template <class T>
  struct state {
    explicit state(std::size_t n) : velocity(n, T(0)) {}
    Buffer<T> velocity;
    std::array<std::span<T>, 1> buffers() { return {std::span<T>(velocity)}; }
  };

  template <class T>
  struct rule : detail::DecayChoice {
    T lr, mu, wd;
    bool nesterov;
    FLOTILLA_HOST_DEVICE_TEMPLATE
    template <class P, class G, class V>
    FLOTILLA_HOST_DEVICE void operator()(bool decay, P&& p, const G& g, V&& v) const {
      if (decay) {
        v = mu * v + g + wd * p;
        if (nesterov) {
          p -= lr * (g + wd * p + mu * v);
        } else {
          p -= lr * v;
        }
      } else {
        v = mu * v + g;
        if (nesterov) {
          p -= lr * (g + mu * v);
        } else {
          p -= lr * v;
        }
      }
    }
  };

  template <class T>
  rule<T> element_rule(const StepInfo& info) const {
    return {{weight_decay != 0, decay_biases, decay_normalization},
            static_cast<T>(info.learning_rate),
            static_cast<T>(momentum),
            static_cast<T>(weight_decay),
            nesterov};
  }

  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::apply_rule(element_rule<T>(info), params, grads, s.buffers(), tensors);
  }
};

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_SGD_HPP_INCLUDED
