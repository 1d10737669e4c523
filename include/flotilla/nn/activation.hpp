// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_ACTIVATION_HPP_INCLUDED
#define FLOTILLA_NN_ACTIVATION_HPP_INCLUDED
// Element-wise activations: ReLU, LeakyReLU, Tanh, Sigmoid, GELU. The output keeps the input's shape.
// Backward uses the saved output where the derivative is a function of y, so nothing extra is
// stored; GELU's is not (it is not monotonic, so y does not determine x), and takes the input,
// which the network keeps anyway.
// Each function type supplies forward(x) and backward(y, dy) (or backward(x, dy), declaring
// `backward_from_input`) as FLOTILLA_HOST_DEVICE functions of either one element or an Eigen array
// (core/element_math.hpp): the CPU layer applies them to whole arrays, the CUDA engine to one
// element per thread (cuda/layers.hpp).
#include <cstddef>
#include <ratio>
#include <span>
#include <string_view>

#include "flotilla/core/element_math.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {
namespace detail {

/// Whether F's backward takes the layer's input x rather than its output y.
template <class F>
inline constexpr bool backward_from_input = requires { requires F::backward_from_input; };

/// Shared shape of the element-wise layers; `F` supplies forward(x) and backward(y, dy), or
/// backward(x, dy) when it declares `static constexpr bool backward_from_input = true`.
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
    if (!a.wants_input_grad()) return;
    if constexpr (backward_from_input<F>) {
      a.input_grad.array() = F::backward(a.input.array(), a.output_grad.array());
    } else {
      a.input_grad.array() = F::backward(a.output.array(), a.output_grad.array());
    }
  }
};

struct ReluFn {
  static constexpr std::string_view name = "ReLU";
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    return element::max(x, element::scalar_t<X>(0));
  }
  // A select, not a multiply by a 0/1 mask: one vector blend per packet instead of a compare,
  // a conversion and a multiply.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class Y, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const Y& y, const DY& dy) {
    return element::where_positive(y, dy);
  }
};

/// `Slope` is a std::ratio (a floating-point template argument would shut out compilers without
/// them: clang before 18).
template <class Slope>
struct LeakyReluFn {
  static constexpr std::string_view name = "LeakyReLU";
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class S>
  FLOTILLA_HOST_DEVICE static constexpr S slope() {
    return S(Slope::num) / S(Slope::den);
  }
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    return element::select_positive(x, x, x * slope<element::scalar_t<X>>());
  }
  // The output is positive exactly where the input is (the slope is), so it tells the branch.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class Y, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const Y& y, const DY& dy) {
    return element::select_positive(y, dy, dy * slope<element::scalar_t<Y>>());
  }
};

struct TanhFn {
  static constexpr std::string_view name = "Tanh";
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    return element::tanh(x);
  }
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class Y, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const Y& y, const DY& dy) {
    return dy * (element::scalar_t<Y>(1) - element::square(y));
  }
};

struct SigmoidFn {
  static constexpr std::string_view name = "Sigmoid";
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    using S = element::scalar_t<X>;
    return S(1) / (S(1) + element::exp(-x));
  }
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class Y, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const Y& y, const DY& dy) {
    return dy * y * (element::scalar_t<Y>(1) - y);
  }
};

/// x * Phi(x), Phi the standard normal CDF, 0.5 (1 + erf(x / sqrt 2)): PyTorch's nn.GELU() (its
/// default, not the tanh approximation).
struct GeluFn {
  static constexpr std::string_view name = "GELU";
  static constexpr bool backward_from_input = true;
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    using S = element::scalar_t<X>;
    return S(0.5) * x * (S(1) + element::erf(x * S(0.70710678118654752440)));
  }
  // d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const X& x, const DY& dy) {
    using S = element::scalar_t<X>;
    return dy * (S(0.5) * (S(1) + element::erf(x * S(0.70710678118654752440))) +
                 x * element::exp(S(-0.5) * element::square(x)) * S(0.39894228040143267794));
  }
};

}  // namespace detail

/// max(0, x).
struct ReLU {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::ReluFn, In, T>;
};

/// x where x > 0, else Slope * x (PyTorch's nn.LeakyReLU; its default slope, 0.01). The slope is a
/// std::ratio: LeakyReLU<std::ratio<1, 5>> for 0.2.
template <class Slope = std::ratio<1, 100>>
struct LeakyReLU {
  static_assert(Slope::num > 0,
                "LeakyReLU<Slope>: the slope must be > 0 (backward tells the input's sign from the output's; for a "
                "slope of 0, use ReLU)");
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::LeakyReluFn<Slope>, In, T>;
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

/// x * Phi(x), with Phi the standard normal CDF (the exact form, as PyTorch's nn.GELU()).
struct GELU {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::GeluFn, In, T>;
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_ACTIVATION_HPP_INCLUDED
