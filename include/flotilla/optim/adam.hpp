#pragma once
// Adam (Kingma & Ba, 2015) and AdamW (Loshchilov & Hutter, 2019). Adam's weight decay is an L2
// term added to the gradient; AdamW's is decoupled: p -= lr * wd * p before the Adam step.
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/optim/sgd.hpp"

namespace flotilla::optim {

namespace detail {
struct AdamConfig {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0;
  bool decay_biases = true;
};

template <class T>
struct AdamState {
  explicit AdamState(std::size_t n) : m(n, T(0)), v(n, T(0)) {}
  Buffer<T> m;  ///< first moment
  Buffer<T> v;  ///< second moment
  std::array<std::span<T>, 2> buffers() { return {std::span<T>(m), std::span<T>(v)}; }
};

template <bool Decoupled, class T>
void adam_update(const AdamConfig& c, std::span<T> params, std::span<const T> grads, AdamState<T>& s,
                 std::span<const TensorInfo> tensors, const StepInfo& info) {
  const double t = static_cast<double>(info.step);
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2);
  const T step_size = static_cast<T>(info.learning_rate / (1 - std::pow(c.beta1, t)));
  const T root_correction = static_cast<T>(std::sqrt(1 - std::pow(c.beta2, t)));
  const T eps = static_cast<T>(c.epsilon), wd = static_cast<T>(c.weight_decay), lr = static_cast<T>(info.learning_rate);
  for (const auto& ti : tensors) {
    auto p = segment(params, ti);
    auto m = segment(std::span<T>(s.m), ti);
    auto v = segment(std::span<T>(s.v), ti);
    const auto g0 = segment(grads, ti);
    const bool decay = c.weight_decay != 0 && decays(ti, c.decay_biases);
    if constexpr (Decoupled) {
      if (decay) p *= T(1) - lr * wd;
      m = b1 * m + (T(1) - b1) * g0;
      v = b2 * v + (T(1) - b2) * g0.square();
    } else {
      if (decay) {
        m = b1 * m + (T(1) - b1) * (g0 + wd * p);
        v = b2 * v + (T(1) - b2) * (g0 + wd * p).square();
      } else {
        m = b1 * m + (T(1) - b1) * g0;
        v = b2 * v + (T(1) - b2) * g0.square();
      }
    }
    // PyTorch's form: p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    p -= step_size * m / (v.sqrt() / root_correction + eps);
  }
}
}  // namespace detail

struct Adam : detail::AdamConfig {
  static constexpr std::string_view name = "Adam";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  template <class T>
  using state = detail::AdamState<T>;
  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::adam_update<false>(*this, params, grads, s, tensors, info);
  }
};

struct AdamW : detail::AdamConfig {
  static constexpr std::string_view name = "AdamW";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  AdamW() { weight_decay = 1e-2; }
  template <class T>
  using state = detail::AdamState<T>;
  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    detail::adam_update<true>(*this, params, grads, s, tensors, info);
  }
};

}  // namespace flotilla::optim
