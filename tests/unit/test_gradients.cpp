// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Every built-in layer's and loss's gradient against central finite differences, in double.
#include <doctest/doctest.h>

#include "../common/check_gradients.hpp"
#include "flotilla/loss/mse.hpp"
#include "flotilla/loss/softmax_cross_entropy.hpp"
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/dropout.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/maxpool2d.hpp"
#include "flotilla/testing/gradient_check.hpp"

namespace unit_gradients {

using namespace flotilla;
using flotilla::testing::check_layer;
using flotilla::testing::check_loss;

TEST_CASE("Dense gradients") {
  CHECK_GRADIENTS((check_layer<Dense<7>, Shape<5>>()));
  CHECK_GRADIENTS((check_layer<Dense<1>, Shape<1>>()));
}

namespace {
/// F's element functions called with one float at a time (as the CUDA engine's kernels call them)
/// against the same functions over an Eigen array (as the CPU layer calls them).
template <class F>
void check_elements_match_arrays() {
  Eigen::ArrayXf x(9), dy(9);
  x << -3.0f, -1.0f, -0.25f, -1e-3f, 0.0f, 1e-3f, 0.5f, 2.0f, 6.0f;
  dy << 0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, -2.0f, 0.1f, 1.0f;
  const Eigen::ArrayXf y = F::forward(x);
  const Eigen::ArrayXf dx = F::backward(y, dy);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    CAPTURE(x(i));
    CHECK(F::forward(x(i)) == doctest::Approx(y(i)).epsilon(1e-6));
    CHECK(F::backward(y(i), dy(i)) == doctest::Approx(dx(i)).epsilon(1e-6));
  }
}
}  // namespace

TEST_CASE("activation element functions give the same values on one element as on arrays") {
  check_elements_match_arrays<flotilla::detail::ReluFn>();
  check_elements_match_arrays<flotilla::detail::LeakyReluFn<std::ratio<1, 100>>>();
  check_elements_match_arrays<flotilla::detail::LeakyReluFn<std::ratio<1, 5>>>();
  check_elements_match_arrays<flotilla::detail::TanhFn>();
  check_elements_match_arrays<flotilla::detail::SigmoidFn>();
}

TEST_CASE("LeakyReLU: x above zero, slope times x below, and the slope's gradient below") {
  using F = flotilla::detail::LeakyReluFn<std::ratio<1, 5>>;
  CHECK(F::forward(3.0f) == 3.0f);
  CHECK(F::forward(-2.0f) == doctest::Approx(-0.4f));
  CHECK(F::forward(0.0f) == 0.0f);
  CHECK(F::backward(F::forward(3.0f), 1.5f) == 1.5f);
  CHECK(F::backward(F::forward(-2.0f), 1.5f) == doctest::Approx(0.3f));
}

TEST_CASE("activation gradients") {
  CHECK_GRADIENTS((check_layer<ReLU, Shape<11>>()));
  CHECK_GRADIENTS((check_layer<LeakyReLU<>, Shape<11>>()));
  CHECK_GRADIENTS((check_layer<LeakyReLU<std::ratio<3, 10>>, Shape<2, 3, 3>>()));
  CHECK_GRADIENTS((check_layer<Tanh, Shape<11>>()));
  CHECK_GRADIENTS((check_layer<Sigmoid, Shape<2, 3, 3>>()));
}

TEST_CASE("Conv2D gradients") {
  CHECK_GRADIENTS((check_layer<Conv2D<4, 3>, Shape<2, 6, 5>>()));
  CHECK_GRADIENTS((check_layer<Conv2D<3, 3, 2, 1>, Shape<2, 7, 6>>()));  // stride 2, padding 1
  CHECK_GRADIENTS((check_layer<Conv2D<2, 5, 1, 2>, Shape<1, 6, 6>>()));  // "same" padding
  CHECK_GRADIENTS((check_layer<Conv2D<5, 1>, Shape<3, 4, 4>>()));        // 1x1
}

TEST_CASE("MaxPool2D, Flatten, Dropout gradients") {
  CHECK_GRADIENTS((check_layer<MaxPool2D<2>, Shape<3, 6, 6>>()));
  CHECK_GRADIENTS((check_layer<MaxPool2D<3, 2>, Shape<2, 7, 7>>()));  // overlapping windows
  CHECK_GRADIENTS((check_layer<MaxPool2D<2>, Shape<1, 5, 5>>()));     // odd size: last row dropped
  CHECK_GRADIENTS((check_layer<Flatten, Shape<2, 3, 4>>()));
  CHECK_GRADIENTS((check_layer<Dropout<30>, Shape<40>>()));
}

TEST_CASE("loss gradients") {
  CHECK_GRADIENTS((check_loss<SoftmaxCrossEntropy>(10)));
  CHECK_GRADIENTS((check_loss<MSE>(4)));
}

namespace {
// A layer whose backward is off by a few percent: the checker must catch it.
struct WrongScale {
  template <class In, class T>
  struct layer {
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "WrongScale";
    static constexpr std::size_t parameter_count = 0;
    void forward(const ForwardArgs<T>& a) { a.output = a.input * T(3); }
    void backward(const BackwardArgs<T>& a) { a.input_grad = a.output_grad * T(2.9); }
  };
};
}  // namespace

TEST_CASE("the checker catches a wrong gradient") {
  const auto r = check_layer<WrongScale, Shape<4>>();
  CHECK_FALSE(r.passed());
  CHECK(r.max_relative_error() > 0.01);
}

}  // namespace unit_gradients
