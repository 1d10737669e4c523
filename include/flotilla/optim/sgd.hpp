#pragma once
// Stochastic gradient descent, plain and with momentum (heavy-ball or Nesterov), with PyTorch's
// conventions: the velocity starts at zero and accumulates v = mu * v + g, and weight decay adds
// wd * p to the gradient.
#include <array>
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla::optim {

namespace detail {
/// Weight decay applies to a tensor unless it is a bias and biases are excluded.
inline bool decays(const TensorInfo& t, bool decay_biases) { return decay_biases || t.role != TensorRole::bias; }

/// A tensor's segment of a flat span, as an Eigen array (read-only when the span is).
template <class T>
auto segment(std::span<T> s, const TensorInfo& t) {
  using Array = Eigen::Array<std::remove_const_t<T>, Eigen::Dynamic, 1>;
  using Mapped = std::conditional_t<std::is_const_v<T>, const Array, Array>;
  return Eigen::Map<Mapped>(s.data() + t.offset, static_cast<Eigen::Index>(t.size));
}
}  // namespace detail

/// p -= lr * (g + wd * p).
struct SGD {
  static constexpr std::string_view name = "SGD";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  double learning_rate = 0.01;
  double weight_decay = 0;
  bool decay_biases = true;

  template <class T>
  struct state {
    explicit state(std::size_t) {}
    std::array<std::span<T>, 0> buffers() { return {}; }
  };

  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>&, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    const T lr = static_cast<T>(info.learning_rate);
    for (const auto& t : tensors) {
      auto p = detail::segment(params, t);
      const auto g = detail::segment(grads, t);
      if (weight_decay != 0 && detail::decays(t, decay_biases)) {
        p -= lr * (g + static_cast<T>(weight_decay) * p);
      } else {
        p -= lr * g;
      }
    }
  }
};

/// v = mu * v + (g + wd * p); p -= lr * v, or with Nesterov p -= lr * (g + mu * v).
struct Momentum {
  static constexpr std::string_view name = "Momentum";
  static constexpr bool elementwise = true;  // see concepts/optimizer.hpp
  double learning_rate = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0;
  bool decay_biases = true;

  template <class T>
  struct state {
    explicit state(std::size_t n) : velocity(n, T(0)) {}
    Buffer<T> velocity;
    std::array<std::span<T>, 1> buffers() { return {std::span<T>(velocity)}; }
  };

  template <class T>
  void update(std::span<T> params, std::span<const T> grads, state<T>& s, std::span<const TensorInfo> tensors,
              const StepInfo& info) const {
    const T lr = static_cast<T>(info.learning_rate), mu = static_cast<T>(momentum);
    for (const auto& t : tensors) {
      auto p = detail::segment(params, t);
      auto v = detail::segment(std::span<T>(s.velocity), t);
      const auto g = detail::segment(grads, t);
      if (weight_decay != 0 && detail::decays(t, decay_biases)) {
        v = mu * v + g + static_cast<T>(weight_decay) * p;
        if (nesterov) {
          p -= lr * (g + static_cast<T>(weight_decay) * p + mu * v);
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
  }
};

}  // namespace flotilla::optim
