#pragma once
// Element-wise activations: ReLU, Tanh, Sigmoid. The output keeps the input's shape. Backward uses
// the saved output (each derivative is a function of y), so nothing extra is stored.
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/layer_args.hpp"

namespace flotilla {
namespace detail {

/// Shared shape of the element-wise layers; `F` supplies forward(x) and derivative(y).
template <class F, class In, class T>
struct ElementwiseLayer {
  static_assert(AnyShape<In>, "activation: input_shape must be a flotilla::Shape");
  using scalar_type = T;
  using input_shape = In;
  using output_shape = In;
  static constexpr std::string_view name = F::name;
  static constexpr std::size_t parameter_count = 0;

  void forward(const ForwardArgs<T>& a) { a.output = F::forward(a.input.array()).matrix(); }
  void backward(const BackwardArgs<T>& a) {
    if (a.wants_input_grad())
      a.input_grad = (a.output_grad.array() * F::derivative(a.output.array())).matrix();
  }
};

struct ReluFn {
  static constexpr std::string_view name = "ReLU";
  template <class X>
  static auto forward(const X& x) {
    return x.cwiseMax(typename X::Scalar(0));
  }
  template <class Y>
  static auto derivative(const Y& y) {
    using S = typename Y::Scalar;
    return (y > S(0)).template cast<S>();
  }
};

struct TanhFn {
  static constexpr std::string_view name = "Tanh";
  template <class X>
  static auto forward(const X& x) {
    return x.tanh();
  }
  template <class Y>
  static auto derivative(const Y& y) {
    using S = typename Y::Scalar;
    return S(1) - y.square();
  }
};

struct SigmoidFn {
  static constexpr std::string_view name = "Sigmoid";
  template <class X>
  static auto forward(const X& x) {
    using S = typename X::Scalar;
    return S(1) / (S(1) + (-x).exp());
  }
  template <class Y>
  static auto derivative(const Y& y) {
    using S = typename Y::Scalar;
    return y * (S(1) - y);
  }
};

}  // namespace detail

/// max(0, x).
struct ReLU {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::ReluFn, In, T>;
};

/// tanh(x).
struct Tanh {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::TanhFn, In, T>;
};

/// 1 / (1 + exp(-x)).
struct Sigmoid {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::SigmoidFn, In, T>;
};

}  // namespace flotilla
