// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The CUDA kernels' index arithmetic (cuda/index_math.hpp), run on the CPU against the CPU layers
// it must agree with: im2col and col2im against Conv2D, window maxima and their gradient against
// MaxPool2D, window and channel means and their gradients against AvgPool2D and GlobalAvgPool,
// dropout masks against Dropout, for several geometries (stride, padding, overlapping and ragged
// windows). No GPU needed: the GPU runs these same functions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "flotilla/cuda/index_math.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/global_avg_pool.hpp"

namespace {

using namespace flotilla;
using cuda::index_t;

template <class T>
Matrix<T> random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  Generator g(seed);
  Matrix<T> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(g.normal<double>());
  return m;
}

/// Conv2D through the GPU's formulation (im2col by index_math, product, col2im by gather), in
/// double, against the CPU layer's forward and backward.
template <class Spec, class In>
void check_conv() {
  using L = typename Spec::template layer<In, double>;
  constexpr cuda::ConvGeometry g = cuda::conv_geometry<L>();
  static_assert(g.OH() == static_cast<index_t>(L::OH) && g.OW() == static_cast<index_t>(L::OW));
  static_assert(g.patch() == static_cast<index_t>(L::patch) && g.out_size() == static_cast<index_t>(L::output_shape::size));
  const Eigen::Index batch = 3, in = g.in_size(), out = g.out_size(), patch = g.patch(), pixels = g.pixels();
  L layer;
  std::vector<double> params(L::parameter_count);
  Generator gen(5);
  for (auto& p : params) p = gen.normal<double>();
  const Matrix<double> x = random_matrix<double>(in, batch, 7);
  Matrix<double> y(out, batch);
  const std::vector<std::uint64_t> ids = {0, 1, 2};
  layer.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), in, batch), MatrixView<double>(y.data(), out, batch),
                                    params, Mode::train, ids, 0});

  const auto w = ConstMatrixView<double>(params.data(), g.F, patch);
  const auto b = ConstVectorView<double>(params.data() + g.F * patch, g.F);
  Matrix<double> cols(patch, pixels * batch);
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t q = 0; q < pixels; ++q)
      for (index_t p = 0; p < patch; ++p) {
        const index_t from = g.im2col_source(p, q);
        cols(p, s * pixels + q) = from < 0 ? 0.0 : x(from, s);
      }
  Matrix<double> y_gpu_form = w * cols;
  y_gpu_form.colwise() += b;
  const auto y_flat = ConstMatrixView<double>(y.data(), g.F, pixels * batch);
  CHECK((y_gpu_form - y_flat).cwiseAbs().maxCoeff() < 1e-12);

  const Matrix<double> dy = random_matrix<double>(out, batch, 9);
  Matrix<double> dx(in, batch);
  std::vector<double> grads(L::parameter_count, 0.0);
  layer.backward(BackwardArgs<double>{ConstMatrixView<double>(x.data(), in, batch), ConstMatrixView<double>(y.data(), out, batch),
                                      ConstMatrixView<double>(dy.data(), out, batch), MatrixView<double>(dx.data(), in, batch),
                                      params, grads});
  const Matrix<double> dcols = w.transpose() * ConstMatrixView<double>(dy.data(), g.F, pixels * batch);
  double worst = 0;
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t i = 0; i < in; ++i)
      worst = std::max(worst, std::abs(g.col2im_gather(i, dcols.data() + s * patch * pixels) - dx(i, s)));
  CHECK(worst < 1e-12);
  // dW = dY cols^T, db = dY 1 (the GPU's cuBLAS products) against the layer's gradients.
  const Matrix<double> dw = ConstMatrixView<double>(dy.data(), g.F, pixels * batch) * cols.transpose();
  CHECK((dw - ConstMatrixView<double>(grads.data(), g.F, patch)).cwiseAbs().maxCoeff() < 1e-10);
}

template <class Spec, class In>
void check_pool() {
  using L = typename Spec::template layer<In, double>;
  constexpr cuda::PoolGeometry g = cuda::pool_geometry<L>();
  static_assert(g.out_size() == static_cast<index_t>(L::output_shape::size));
  const Eigen::Index batch = 2, in = g.in_size(), out = g.out_size();
  L layer;
  Matrix<double> x = random_matrix<double>(in, batch, 11);
  x(3, 0) = x(4, 0);  // a tie: the first maximum wins on both devices
  Matrix<double> y(out, batch);
  const std::vector<std::uint64_t> ids = {0, 1};
  layer.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), in, batch), MatrixView<double>(y.data(), out, batch),
                                    {}, Mode::train, ids, 0});
  std::vector<std::uint32_t> arg(static_cast<std::size_t>(out * batch));
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t o = 0; o < out; ++o) {
      const double m = g.window_max(o, x.data() + s * in, arg[static_cast<std::size_t>(s * out + o)]);
      CHECK(m == y(o, s));
    }
  const Matrix<double> dy = random_matrix<double>(out, batch, 13);
  Matrix<double> dx(in, batch);
  layer.backward(BackwardArgs<double>{ConstMatrixView<double>(x.data(), in, batch), ConstMatrixView<double>(y.data(), out, batch),
                                      ConstMatrixView<double>(dy.data(), out, batch), MatrixView<double>(dx.data(), in, batch),
                                      {}, {}});
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t i = 0; i < in; ++i)
      CHECK(g.backward_gather(i, dy.data() + s * out, arg.data() + s * out) == doctest::Approx(dx(i, s)).epsilon(1e-12));
}

/// A pooling layer without parameters through the GPU's formulation, one output value and one
/// input gradient at a time (`mean(o, sample)`, `gather(i, dy of the sample)`), in float as the GPU
/// computes: the same sums in the same order as the CPU layer's, so the same values.
template <class L, class Mean, class Gather>
void check_means(Mean mean, Gather gather) {
  constexpr auto in = static_cast<index_t>(L::input_shape::size), out = static_cast<index_t>(L::output_shape::size);
  const Eigen::Index batch = 2;
  L layer;
  const Matrix<float> x = random_matrix<float>(in, batch, 19);
  Matrix<float> y(out, batch);
  const std::vector<std::uint64_t> ids = {0, 1};
  layer.forward(ForwardArgs<float>{ConstMatrixView<float>(x.data(), in, batch), MatrixView<float>(y.data(), out, batch),
                                   {}, Mode::train, ids, 0});
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t o = 0; o < out; ++o) CHECK(mean(o, x.data() + s * in) == doctest::Approx(y(o, s)).epsilon(1e-6));
  const Matrix<float> dy = random_matrix<float>(out, batch, 23);
  Matrix<float> dx(in, batch);
  layer.backward(BackwardArgs<float>{ConstMatrixView<float>(x.data(), in, batch), ConstMatrixView<float>(y.data(), out, batch),
                                     ConstMatrixView<float>(dy.data(), out, batch), MatrixView<float>(dx.data(), in, batch),
                                     {}, {}});
  for (Eigen::Index s = 0; s < batch; ++s)
    for (index_t i = 0; i < in; ++i) CHECK(gather(i, dy.data() + s * out) == doctest::Approx(dx(i, s)).epsilon(1e-6));
}

template <class Spec, class In>
void check_avg_pool() {
  using L = typename Spec::template layer<In, float>;
  constexpr cuda::AvgPoolGeometry g = cuda::avg_pool_geometry<L>();
  static_assert(g.OH() == static_cast<index_t>(L::OH) && g.OW() == static_cast<index_t>(L::OW));
  static_assert(g.out_size() == static_cast<index_t>(L::output_shape::size) && g.in_size() == static_cast<index_t>(In::size));
  check_means<L>([&](index_t o, const float* x) { return g.window_mean(o, x); },
                 [&](index_t i, const float* dy) { return g.backward_gather(i, dy); });
}

template <class In>
void check_global_avg_pool() {
  using L = GlobalAvgPool::layer<In, float>;
  constexpr cuda::GlobalPoolGeometry g = cuda::global_pool_geometry<L>();
  static_assert(g.in_size() == static_cast<index_t>(In::size) && g.C == static_cast<index_t>(L::output_shape::size));
  check_means<L>([&](index_t c, const float* x) { return g.channel_mean(c, x); },
                 [&](index_t i, const float* dy) { return g.backward_value(i, dy); });
}

}  // namespace

TEST_CASE("cuda index math: im2col and col2im reproduce Conv2D") {
  check_conv<Conv2D<4, 3>, Shape<2, 7, 6>>();
  check_conv<Conv2D<3, 3, 2, 1>, Shape<2, 9, 8>>();  // stride and padding
  check_conv<Conv2D<5, 5, 1, 2>, Shape<1, 6, 6>>();  // padding 2, one channel
  check_conv<Conv2D<2, 2, 3>, Shape<3, 8, 7>>();     // stride above the kernel: skipped inputs
  check_conv<Conv2D<3, 3, 1, same>, Shape<2, 6, 5>>();  // `same`: the layer's resolved padding
  check_conv<Conv2D<3, 5, 2, same>, Shape<1, 7, 8>>();
}

TEST_CASE("cuda index math: window maxima and their gradient reproduce MaxPool2D") {
  check_pool<MaxPool2D<2>, Shape<3, 6, 8>>();     // windows tile the image
  check_pool<MaxPool2D<3, 2>, Shape<2, 7, 7>>();  // overlapping windows
  check_pool<MaxPool2D<2>, Shape<1, 5, 7>>();     // ragged edge: the last row and column unused
}

TEST_CASE("cuda index math: window means and their gradient reproduce AvgPool2D") {
  check_avg_pool<AvgPool2D<2>, Shape<3, 6, 8>>();        // windows tile the image
  check_avg_pool<AvgPool2D<3, 2>, Shape<2, 7, 7>>();     // overlapping windows
  check_avg_pool<AvgPool2D<2>, Shape<1, 5, 7>>();        // ragged edge
  check_avg_pool<AvgPool2D<2, 3>, Shape<2, 8, 7>>();     // stride above the window: skipped inputs
  check_avg_pool<AvgPool2D<3, 1, 1>, Shape<2, 5, 6>>();  // padding
  check_avg_pool<AvgPool2D<3, 2, 1>, Shape<3, 6, 7>>();  // padding, stride 2, ragged
  check_avg_pool<AvgPool2D<4, 2, 2>, Shape<1, 5, 5>>();  // padding of half the window
}

TEST_CASE("cuda index math: channel means and their gradient reproduce GlobalAvgPool") {
  check_global_avg_pool<Shape<3, 4, 5>>();
  check_global_avg_pool<Shape<1, 1, 1>>();
  check_global_avg_pool<Shape<16, 3, 3>>();
}

TEST_CASE("cuda index math: dropout masks are the CPU layer's, bit for bit") {
  using L = Dropout<30>::layer<Shape<37>, float>;
  const Eigen::Index batch = 4;
  const Matrix<float> x = random_matrix<float>(37, batch, 17);
  Matrix<float> y(37, batch);
  const std::vector<std::uint64_t> ids = {5, 900, 3, 77};
  const std::uint64_t key = cuda::layer_noise_key(42, 3, 2);
  CHECK(key == detail::mix(detail::mix(42, 3), 3));
  L layer;
  layer.forward(ForwardArgs<float>{ConstMatrixView<float>(x.data(), 37, batch), MatrixView<float>(y.data(), 37, batch), {},
                                   Mode::train, ids, key});
  std::size_t dropped = 0;
  for (Eigen::Index s = 0; s < batch; ++s)
    for (Eigen::Index j = 0; j < 37; ++j) {
      const float scale = cuda::dropout_scale(key, ids[static_cast<std::size_t>(s)], static_cast<std::uint64_t>(j), L::rate,
                                              static_cast<float>(1.0 / (1.0 - L::rate)));
      CHECK(y(j, s) == x(j, s) * scale);
      dropped += scale == 0.0f ? 1 : 0;
    }
  CHECK(dropped > 20);  // about 30% of 148
  CHECK(dropped < 70);
}

TEST_CASE("cuda launch_blocks covers every element and stays a legal grid") {
  CHECK(cuda::launch_blocks(0) == 1);
  CHECK(cuda::launch_blocks(1) == 1);
  CHECK(cuda::launch_blocks(256) == 1);
  CHECK(cuda::launch_blocks(257) == 2);
  CHECK(cuda::launch_blocks(std::size_t{1} << 40) == 1u << 20);  // a grid-stride loop takes the rest
}
