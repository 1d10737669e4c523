#pragma once
// Element-wise activations: ReLU, LeakyReLU, Tanh, Sigmoid. The output keeps the input's shape. Backward uses
// the saved output (each derivative is a function of y), so nothing extra is stored.
// Each function type supplies forward(x) and backward(y, dy) as FLOTILLA_HOST_DEVICE functions of
// either one element or an Eigen array (core/element_math.hpp): the CPU layer applies them to whole
// arrays, the CUDA engine to one element per thread (cuda/layers.hpp).
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/core/element_math.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"

namespace flotilla {
namespace detail {

/// Shared shape of the element-wise layers; `F` supplies forward(x) and backward(y, dy).
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
    if (a.wants_input_grad()) a.input_grad.array() = F::backward(a.output.array(), a.output_grad.array());
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

template <float Slope>
struct LeakyReluFn {
  static constexpr std::string_view name = "LeakyReLU";
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class X>
  FLOTILLA_HOST_DEVICE static auto forward(const X& x) {
    return element::select_positive(x, x, x * element::scalar_t<X>(Slope));
  }
  // The output is positive exactly where the input is (the slope is), so it tells the branch.
  FLOTILLA_HOST_DEVICE_TEMPLATE
  template <class Y, class DY>
  FLOTILLA_HOST_DEVICE static auto backward(const Y& y, const DY& dy) {
    return element::select_positive(y, dy, dy * element::scalar_t<Y>(Slope));
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

}  // namespace detail

/// max(0, x).
struct ReLU {
  template <class In, class T>
  using layer = detail::ElementwiseLayer<detail::ReluFn, In, T>;
};

/// x where x > 0, else Slope * x (PyTorch's nn.LeakyReLU; its default slope, 0.01).
template <float Slope = 0.01f>
struct LeakyReLU {
  static_assert(Slope > 0.0f,
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

}  // namespace flotilla
