// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The layers residual networks are made of (GELU, AvgPool2D, GlobalAvgPool, Conv2D with `same`
// padding): their gradients against finite differences in double, their values against the
// definitions and against arithmetic done by hand, their output shapes, and their costs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "../common/check_gradients.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/global_avg_pool.hpp"
#include "flotilla/nn/layer_cost.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"
#include "flotilla/testing/gradient_check.hpp"

namespace graph_layers {

using namespace flotilla;
using flotilla::testing::check_layer;

namespace {

/// Runs layer Spec forward (and backward with `dy`, when given) on one batch in scalar T.
template <class Spec, class In, class T>
struct Run {
  using L = typename Spec::template layer<In, T>;
  static constexpr auto in = static_cast<Eigen::Index>(In::size), out = static_cast<Eigen::Index>(L::output_shape::size);

  L layer{};
  std::vector<T> params = std::vector<T>(L::parameter_count), grads = std::vector<T>(L::parameter_count, T(0));
  Matrix<T> x, y, dx;
  std::vector<std::uint64_t> ids;

  explicit Run(const Matrix<T>& input) : x(input), y(out, input.cols()), dx(in, input.cols()) {
    ids.resize(static_cast<std::size_t>(input.cols()));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  }
  Run& forward() {
    layer.forward(ForwardArgs<T>{ConstMatrixView<T>(x.data(), in, x.cols()), MatrixView<T>(y.data(), out, x.cols()),
                                 std::span<const T>(params), Mode::train, ids, 0});
    return *this;
  }
  Run& backward(const Matrix<T>& dy) {
    layer.backward(BackwardArgs<T>{ConstMatrixView<T>(x.data(), in, x.cols()), ConstMatrixView<T>(y.data(), out, x.cols()),
                                   ConstMatrixView<T>(dy.data(), out, x.cols()), MatrixView<T>(dx.data(), in, x.cols()),
                                   std::span<const T>(params), std::span<T>(grads)});
    return *this;
  }
};

template <class T>
Matrix<T> random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  Generator g(seed);
  Matrix<T> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = g.normal<T>();
  return m;
}

/// A one-sample batch of image Shape<C, H, W> whose value at (c, y, x) is value(c, y, x), stored
/// channels-last.
template <std::size_t C, std::size_t H, std::size_t W, class F>
Matrix<double> image(F value) {
  Matrix<double> m(static_cast<Eigen::Index>(C * H * W), 1);
  for (std::size_t y = 0; y < H; ++y)
    for (std::size_t x = 0; x < W; ++x)
      for (std::size_t c = 0; c < C; ++c) m(static_cast<Eigen::Index>((y * W + x) * C + c), 0) = value(c, y, x);
  return m;
}

double gelu_reference(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_derivative_reference(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.14159265358979323846);
}

}  // namespace

// ---- GELU ---------------------------------------------------------------------------------------

TEST_CASE("GELU: x Phi(x), the erf form, on one element and through the layer") {
  using F = flotilla::detail::GeluFn;
  static_assert(flotilla::detail::backward_from_input<F>);
  static_assert(!flotilla::detail::backward_from_input<flotilla::detail::ReluFn>);
  static_assert(!flotilla::detail::backward_from_input<flotilla::detail::SigmoidFn>);
  static_assert(GELU::layer<Shape<4>, float>::name == "GELU");

  for (const double x : {-6.0, -3.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.5, 6.0}) {
    CAPTURE(x);
    CHECK(F::forward(x) == doctest::Approx(gelu_reference(x)).epsilon(1e-15));
    CHECK(F::backward(x, 1.0) == doctest::Approx(gelu_derivative_reference(x)).epsilon(1e-15));
    CHECK(F::backward(x, -2.5) == doctest::Approx(-2.5 * gelu_derivative_reference(x)).epsilon(1e-15));
  }
  // Known values: GELU(1) = Phi(1), GELU(-1) = -Phi(-1); the slope is 1/2 at 0.
  CHECK(F::forward(1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(F::forward(-1.0) == doctest::Approx(-0.15865525393145707).epsilon(1e-15));
  CHECK(F::forward(0.0) == 0.0);
  CHECK(F::backward(0.0, 1.0) == 0.5);

  // The layer (arrays, float): the definition to float rounding; backward reads the input, which
  // the output does not determine (GELU is not monotonic: GELU(-0.3) and GELU(-2.2) are close).
  Matrix<float> x(4, 2);
  x << -3.0f, -0.3f, -2.2f, 0.0f, 0.5f, 1.0f, 2.0f, 6.0f;
  Matrix<float> dy = Matrix<float>::Constant(4, 2, 1.0f);
  Run<GELU, Shape<4>, float> run(x);
  run.forward().backward(dy);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    CAPTURE(x.data()[i]);
    CHECK(run.y.data()[i] == doctest::Approx(gelu_reference(x.data()[i])).epsilon(2e-6));
    CHECK(run.dx.data()[i] == doctest::Approx(gelu_derivative_reference(x.data()[i])).epsilon(2e-6));
  }
}

TEST_CASE("GELU's element functions give the same values on one element as on arrays") {
  using F = flotilla::detail::GeluFn;
  Eigen::ArrayXf x(13), dy(13);
  x << -8.0f, -4.0f, -3.0f, -1.0f, -0.25f, -1e-3f, 0.0f, 1e-3f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f;
  dy << 0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, -2.0f, 0.1f, 1.0f, 3.0f, -0.5f, 1.0f, 2.0f;
  const Eigen::ArrayXf y = F::forward(x);
  const Eigen::ArrayXf dx = F::backward(x, dy);
  // Eigen's float erf is a rational approximation of its own, a couple of ulps from the C
  // library's; near 1 + erf = 0 (large negative x) that is all the output's digits, so the
  // tolerance is absolute there (Approx's scale of 1).
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    CAPTURE(x(i));
    CHECK(F::forward(x(i)) == doctest::Approx(y(i)).epsilon(2e-6));
    CHECK(F::backward(x(i), dy(i)) == doctest::Approx(dx(i)).epsilon(2e-6));
  }
  // In double both are the C library's erf.
  const Eigen::ArrayXd xd = x.cast<double>(), dyd = dy.cast<double>();
  const Eigen::ArrayXd yd = F::forward(xd), dxd = F::backward(xd, dyd);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    CAPTURE(xd(i));
    CHECK(F::forward(xd(i)) == doctest::Approx(yd(i)).epsilon(1e-15));
    CHECK(F::backward(xd(i), dyd(i)) == doctest::Approx(dxd(i)).epsilon(1e-15));
  }
}

TEST_CASE("GELU gradients") {
  CHECK_GRADIENTS((check_layer<GELU, Shape<11>>()));
  CHECK_GRADIENTS((check_layer<GELU, Shape<2, 3, 3>>()));
  flotilla::testing::GradientCheckOptions wide;
  wide.batch = 5;
  wide.seed = 7;
  CHECK_GRADIENTS((check_layer<GELU, Shape<3, 4, 2>>(wide)));
}

// ---- AvgPool2D ----------------------------------------------------------------------------------

TEST_CASE("AvgPool2D: output shapes, floor of the (padded) size") {
  static_assert(std::is_same_v<AvgPool2D<2>::layer<Shape<3, 8, 6>, float>::output_shape, Shape<3, 4, 3>>);
  static_assert(std::is_same_v<AvgPool2D<2>::layer<Shape<1, 5, 7>, float>::output_shape, Shape<1, 2, 3>>);
  static_assert(std::is_same_v<AvgPool2D<3, 2>::layer<Shape<2, 7, 7>, float>::output_shape, Shape<2, 3, 3>>);
  static_assert(std::is_same_v<AvgPool2D<3, 1, 1>::layer<Shape<4, 5, 6>, float>::output_shape, Shape<4, 5, 6>>);
  static_assert(std::is_same_v<AvgPool2D<2, 2, 1>::layer<Shape<1, 3, 3>, float>::output_shape, Shape<1, 2, 2>>);
  static_assert(std::is_same_v<AvgPool2D<2, 3>::layer<Shape<1, 8, 7>, float>::output_shape, Shape<1, 3, 2>>);
  // The window may equal the image (PyTorch's global pooling by AvgPool2d(H)).
  static_assert(std::is_same_v<AvgPool2D<4>::layer<Shape<5, 4, 4>, float>::output_shape, Shape<5, 1, 1>>);
  static_assert(AvgPool2D<2>::layer<Shape<1, 4, 4>, float>::name == "AvgPool2D");
  CHECK(AvgPool2D<3, 2, 1>::layer<Shape<1, 4, 4>, double>::padding == 1);
}

TEST_CASE("AvgPool2D: window means by hand, the padding counted as zeros") {
  // Channel 0 holds 1..9 row by row, channel 1 ten times that: the channels must not mix.
  const auto x = image<2, 3, 3>([](std::size_t c, std::size_t y, std::size_t xx) {
    return static_cast<double>(y * 3 + xx + 1) * (c == 0 ? 1.0 : 10.0);
  });
  // 2 x 2 windows at stride 1: (1+2+4+5)/4, (2+3+5+6)/4, (4+5+7+8)/4, (5+6+8+9)/4.
  {
    Run<AvgPool2D<2, 1>, Shape<2, 3, 3>, double> run(x);
    run.forward();
    const double want[] = {3, 4, 6, 7};
    for (Eigen::Index o = 0; o < 4; ++o) {
      CAPTURE(o);
      CHECK(run.y(2 * o, 0) == doctest::Approx(want[o]));
      CHECK(run.y(2 * o + 1, 0) == doctest::Approx(10 * want[o]));
    }
    // Every output gradient 1: each input gets 1/4 per window that holds it (corners 1, edges 2,
    // the centre 4 windows).
    run.backward(Matrix<double>::Ones(8, 1));
    const double share[] = {0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25};
    for (Eigen::Index i = 0; i < 9; ++i) {
      CAPTURE(i);
      CHECK(run.dx(2 * i, 0) == doctest::Approx(share[i]));
      CHECK(run.dx(2 * i + 1, 0) == doctest::Approx(share[i]));
    }
  }
  // 2 x 2 windows at stride 2 with padding 1 (PyTorch's AvgPool2d(2, 2, 1), count_include_pad):
  // each window divides by 4, padding or not: 1/4, (2+3)/4, (4+7)/4, (5+6+8+9)/4.
  {
    Run<AvgPool2D<2, 2, 1>, Shape<2, 3, 3>, double> run(x);
    run.forward();
    const double want[] = {0.25, 1.25, 2.75, 7.0};
    for (Eigen::Index o = 0; o < 4; ++o) {
      CAPTURE(o);
      CHECK(run.y(2 * o, 0) == doctest::Approx(want[o]));
      CHECK(run.y(2 * o + 1, 0) == doctest::Approx(10 * want[o]));
    }
    // The windows tile the padded image: each input value gets a quarter of its window's gradient.
    Matrix<double> dy(8, 1);
    dy << 4, 40, 8, 80, 12, 120, 16, 160;
    run.backward(dy);
    const double from_window[] = {4, 8, 8, 12, 16, 16, 12, 16, 16};
    for (Eigen::Index i = 0; i < 9; ++i) {
      CAPTURE(i);
      CHECK(run.dx(2 * i, 0) == doctest::Approx(from_window[i] / 4));
      CHECK(run.dx(2 * i + 1, 0) == doctest::Approx(from_window[i] * 10 / 4));
    }
  }
  // A stride above the window skips inputs: their gradient is zero, not left as it was.
  {
    Run<AvgPool2D<1, 2>, Shape<2, 3, 3>, double> run(x);
    run.dx.setConstant(99.0);
    run.forward().backward(Matrix<double>::Ones(8, 1));
    CHECK(run.y(0, 0) == 1.0);
    CHECK(run.y(6, 0) == 9.0);
    CHECK(run.dx(2 * 1, 0) == 0.0);  // (0, 1): between windows
    CHECK(run.dx(2 * 4, 0) == 0.0);  // the centre
    CHECK(run.dx(2 * 8, 0) == 1.0);  // (2, 2): a window of its own
  }
}

TEST_CASE("AvgPool2D gradients") {
  CHECK_GRADIENTS((check_layer<AvgPool2D<2>, Shape<3, 6, 6>>()));        // windows tile the image
  CHECK_GRADIENTS((check_layer<AvgPool2D<3, 2>, Shape<2, 7, 7>>()));     // overlapping windows
  CHECK_GRADIENTS((check_layer<AvgPool2D<3, 1>, Shape<1, 5, 4>>()));     // overlapping, stride 1
  CHECK_GRADIENTS((check_layer<AvgPool2D<2>, Shape<1, 5, 7>>()));        // ragged edge: last row, column unused
  CHECK_GRADIENTS((check_layer<AvgPool2D<2, 3>, Shape<2, 8, 7>>()));     // stride above the window
  CHECK_GRADIENTS((check_layer<AvgPool2D<3, 1, 1>, Shape<2, 5, 6>>()));  // padding, output as large as the input
  CHECK_GRADIENTS((check_layer<AvgPool2D<3, 2, 1>, Shape<3, 6, 7>>()));  // padding, stride 2, ragged
  CHECK_GRADIENTS((check_layer<AvgPool2D<4, 2, 2>, Shape<1, 5, 5>>()));  // padding of half the window
  CHECK_GRADIENTS((check_layer<AvgPool2D<4>, Shape<2, 4, 4>>()));        // one window: the whole image
}

// ---- GlobalAvgPool ------------------------------------------------------------------------------

TEST_CASE("GlobalAvgPool: each channel's mean over the pixels, and its gradient shared evenly") {
  static_assert(std::is_same_v<GlobalAvgPool::layer<Shape<3, 4, 5>, float>::output_shape, Shape<3>>);
  static_assert(std::is_same_v<GlobalAvgPool::layer<Shape<7, 1, 1>, float>::output_shape, Shape<7>>);
  static_assert(GlobalAvgPool::layer<Shape<3, 4, 5>, float>::name == "GlobalAvgPool");
  // Two samples of 2 channels on 2 x 2 pixels.
  Matrix<double> x(8, 2);
  const auto first = image<2, 2, 2>([](std::size_t c, std::size_t y, std::size_t xx) {
    const double ch0[] = {1, 2, 3, 4}, ch1[] = {10, 20, 30, 50};
    return c == 0 ? ch0[y * 2 + xx] : ch1[y * 2 + xx];
  });
  x.col(0) = first.col(0);
  x.col(1) = -2.0 * first.col(0);
  Run<GlobalAvgPool, Shape<2, 2, 2>, double> run(x);
  run.forward();
  CHECK(run.y(0, 0) == doctest::Approx(2.5));
  CHECK(run.y(1, 0) == doctest::Approx(27.5));
  CHECK(run.y(0, 1) == doctest::Approx(-5.0));
  CHECK(run.y(1, 1) == doctest::Approx(-55.0));
  Matrix<double> dy(2, 2);
  dy << 4, -1, 8, 2;
  run.backward(dy);
  for (Eigen::Index p = 0; p < 4; ++p) {
    CAPTURE(p);
    CHECK(run.dx(2 * p, 0) == doctest::Approx(1.0));
    CHECK(run.dx(2 * p + 1, 0) == doctest::Approx(2.0));
    CHECK(run.dx(2 * p, 1) == doctest::Approx(-0.25));
    CHECK(run.dx(2 * p + 1, 1) == doctest::Approx(0.5));
  }
}

TEST_CASE("GlobalAvgPool gradients") {
  CHECK_GRADIENTS((check_layer<GlobalAvgPool, Shape<3, 4, 5>>()));
  CHECK_GRADIENTS((check_layer<GlobalAvgPool, Shape<1, 3, 3>>()));
  CHECK_GRADIENTS((check_layer<GlobalAvgPool, Shape<5, 1, 1>>()));
}

// ---- Conv2D with `same` padding -----------------------------------------------------------------

TEST_CASE("Conv2D<F, K, Stride, same>: (K - 1) / 2 on each side, ceil(H / Stride) x ceil(W / Stride)") {
  using L3 = Conv2D<16, 3, 1, same>::layer<Shape<3, 32, 32>, float>;
  static_assert(L3::padding == 1);
  static_assert(std::is_same_v<L3::output_shape, Shape<16, 32, 32>>);
  using L5 = Conv2D<4, 5, 1, same>::layer<Shape<2, 7, 6>, float>;
  static_assert(L5::padding == 2);
  static_assert(std::is_same_v<L5::output_shape, Shape<4, 7, 6>>);
  static_assert(std::is_same_v<Conv2D<8, 3, 2, same>::layer<Shape<3, 32, 32>, float>::output_shape, Shape<8, 16, 16>>);
  static_assert(std::is_same_v<Conv2D<8, 3, 2, same>::layer<Shape<3, 7, 6>, float>::output_shape, Shape<8, 4, 3>>);
  static_assert(std::is_same_v<Conv2D<8, 1, 1, same>::layer<Shape<3, 5, 5>, float>::output_shape, Shape<8, 5, 5>>);
  static_assert(Conv2D<8, 1, 1, same>::layer<Shape<3, 5, 5>, float>::padding == 0);
  // A numeric padding is unchanged.
  static_assert(Conv2D<8, 3, 1, 2>::layer<Shape<3, 5, 5>, float>::padding == 2);
  // Parameters and costs are those of the numeric padding it stands for.
  static_assert(L3::parameter_count == Conv2D<16, 3, 1, 1>::layer<Shape<3, 32, 32>, float>::parameter_count);
  static_assert(estimate_layer_cost<L3>().forward_flops ==
                estimate_layer_cost<Conv2D<16, 3, 1, 1>::layer<Shape<3, 32, 32>, float>>().forward_flops);
}

namespace {
/// Conv2D<F, K, S, same> against Conv2D<F, K, S, (K - 1) / 2> in float (the implicit-im2col path
/// where the machine has flotilla's GEMM kernel): the same outputs and gradients, value for value.
template <std::size_t F, std::size_t K, std::size_t S, class In>
void check_same_is_numeric_padding() {
  const auto x = random_matrix<float>(static_cast<Eigen::Index>(In::size), 3, 21);
  Run<Conv2D<F, K, S, same>, In, float> a(x);
  Run<Conv2D<F, K, S, (K - 1) / 2>, In, float> b(x);
  Generator g(22);
  for (auto& p : a.params) p = g.normal<float>();
  b.params = a.params;
  a.forward();
  b.forward();
  CHECK(a.y.cwiseEqual(b.y).all());
  const auto dy = random_matrix<float>(a.y.rows(), 3, 23);
  a.backward(dy);
  b.backward(dy);
  CHECK(a.dx.cwiseEqual(b.dx).all());
  CHECK(a.grads == b.grads);
}
}  // namespace

TEST_CASE("Conv2D with same padding computes what the numeric padding does") {
  check_same_is_numeric_padding<4, 3, 1, Shape<2, 6, 5>>();
  check_same_is_numeric_padding<3, 5, 1, Shape<1, 9, 9>>();
  check_same_is_numeric_padding<5, 3, 2, Shape<3, 7, 8>>();
}

TEST_CASE("Conv2D with same padding: gradients") {
  CHECK_GRADIENTS((check_layer<Conv2D<3, 3, 1, same>, Shape<2, 5, 6>>()));
  CHECK_GRADIENTS((check_layer<Conv2D<2, 5, 1, same>, Shape<1, 6, 6>>()));
  CHECK_GRADIENTS((check_layer<Conv2D<3, 3, 2, same>, Shape<2, 7, 6>>()));  // stride 2
  CHECK_GRADIENTS((check_layer<Conv2D<2, 3, 2, same>, Shape<1, 6, 6>>()));  // stride 2, even size
}

// ---- together -----------------------------------------------------------------------------------

TEST_CASE("a ResNet-style head: same convolutions, GELU, AvgPool2D, GlobalAvgPool, then Dense") {
  using Net = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, same>, GELU, AvgPool2D<2>, Conv2D<6, 3, 1, same>, GELU,
                         GlobalAvgPool, Dense<5>>;
  using N = Network<Net, float>;
  static_assert(std::is_same_v<N::output_shape, Shape<5>>);

  // The default cost estimate (one operation per input value) holds for GlobalAvgPool; AvgPool2D
  // declares its own, K * K additions per output value.
  using Pool = AvgPool2D<3, 1>::layer<Shape<4, 8, 8>, float>;
  static_assert(estimate_layer_cost<Pool>().forward_flops == 4ull * 6 * 6 * 9);
  static_assert(estimate_layer_cost<AvgPool2D<2>::layer<Shape<4, 8, 8>, float>>().forward_flops == 4ull * 8 * 8);
  static_assert(estimate_layer_cost<GlobalAvgPool::layer<Shape<6, 4, 4>, float>>().forward_flops == 6ull * 4 * 4);
  static_assert(estimate_layer_cost<GELU::layer<Shape<6, 4, 4>, float>>().forward_flops == 6ull * 4 * 4);

  N net;
  std::vector<float> params(N::parameter_count), grads(N::parameter_count, 0.0f);
  net.initialize(params, 3);
  const auto x = random_matrix<float>(3 * 8 * 8, 4, 31);
  const auto y = net.forward(ConstMatrixView<float>(x.data(), x.rows(), x.cols()), params);
  CHECK(y.rows() == 5);
  CHECK(y.allFinite());
  const auto dy = random_matrix<float>(5, 4, 32);
  Matrix<float> dx(x.rows(), x.cols());
  MatrixView<float> dx_view(dx.data(), dx.rows(), dx.cols());
  net.backward(ConstMatrixView<float>(dy.data(), 5, 4), params, grads, NoHook{}, &dx_view);
  CHECK(dx.allFinite());
  double norm = 0;
  for (const float v : grads) norm += static_cast<double>(v) * v;
  CHECK(norm > 0);
}

}  // namespace graph_layers
