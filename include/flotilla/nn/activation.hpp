#pragma once
// Element-wise activations: ReLU, Tanh, Sigmoid. The output keeps the input's shape. Backward uses
// the saved output (each derivative is a function of y), so nothing extra is stored.
// Each function type supplies forward(x) and backward(y, dy, dx).
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {
namespace detail {

/// Shared shape of the element-wise layers; `F` supplies forward(x) and backward(y, dy, dx).
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
    if (a.wants_input_grad()) F::backward(a.output.array(), a.output_grad.array(), a.input_grad.array());
  }
};

struct ReluFn {
  static constexpr std::string_view name = "ReLU";
  template <class X>
  static auto forward(const X& x) {
    return x.cwiseMax(typename X::Scalar(0));
  }
  // A select, not a multiply by a 0/1 mask: one vector blend per packet instead of a compare,
  // a conversion and a multiply.
  template <class Y, class DY, class DX>
  static void backward(const Y& y, const DY& dy, DX&& dx) {
    using S = typename Y::Scalar;
    dx = (y > S(0)).select(dy, S(0));
  }
};

struct TanhFn {
  static constexpr std::string_view name = "Tanh";
  template <class X>
  static auto forward(const X& x) {
    return x.tanh();
  }
  template <class Y, class DY, class DX>
  static void backward(const Y& y, const DY& dy, DX&& dx) {
    using S = typename Y::Scalar;
    dx = dy * (S(1) - y.square());
  }
};

struct SigmoidFn {
  static constexpr std::string_view name = "Sigmoid";
  template <class X>
  static auto forward(const X& x) {
    using S = typename X::Scalar;
    return S(1) / (S(1) + (-x).exp());
  }
  template <class Y, class DY, class DX>
  static void backward(const Y& y, const DY& dy, DX&& dx) {
    using S = typename Y::Scalar;
    dx = dy * y * (S(1) - y);
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
