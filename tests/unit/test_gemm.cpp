// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla's single-precision GEMM (core/detail/sgemm.hpp) against a naive product accumulated in
// double, and the layers' float fast paths (Conv2D's implicit im2col, the bias folded into the
// product) against the same layers in double.
//
// This file is built twice: into flotilla_unit_tests with the default target flags, where sgemm()
// is usually Eigen's product (no AVX2 by default), and into flotilla_gemm_native_tests with
// -march=native, which runs the AVX-512 or AVX2 kernel of the build machine.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// GCC 12 reports Eigen's own AVX-512 code (the _mm512_undefined_* operands of its 8 x 8
// transposes in the double-precision product) as using uninitialised values once it is inlined
// here, where the double reference layers use it. Not flotilla's code, and not a real read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/core/gemm.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/detail/sgemm.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"

namespace unit_gemm {

namespace {

using flotilla::Generator;
using flotilla::detail::sgemm_index;

struct Problem {
  sgemm_index m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, accumulate = false, bias = false;
  sgemm_index pad = 0;  ///< added to every leading dimension
};

std::string describe(const Problem& p) {
  return "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
         (p.trans_a ? " A^T" : " A") + (p.trans_b ? " B^T" : " B") + (p.accumulate ? " C+=" : " C=") +
         (p.bias ? " +bias" : "") + " pad=" + std::to_string(p.pad);
}

/// Runs sgemm() on random operands and returns the largest error of an entry of C relative to the
/// error bound's scale for that entry: sum_p |a_ip b_pj| + |c_ij| + |bias_i| (so that the bound is
/// meaningful where cancellation makes C small). Also returns +inf when sgemm() wrote outside C's
/// m x n entries (into the padding between columns).
double sgemm_error(const Problem& p, Generator& g) {
  const sgemm_index a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const sgemm_index b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  const sgemm_index lda = std::max<sgemm_index>(a_rows, 1) + p.pad, ldb = std::max<sgemm_index>(b_rows, 1) + p.pad;
  const sgemm_index ldc = std::max<sgemm_index>(p.m, 1) + p.pad;
  std::vector<float> a(static_cast<std::size_t>(lda * std::max<sgemm_index>(a_cols, 1)));
  std::vector<float> b(static_cast<std::size_t>(ldb * std::max<sgemm_index>(b_cols, 1)));
  std::vector<float> c(static_cast<std::size_t>(ldc * std::max<sgemm_index>(p.n, 1)));
  std::vector<float> bias(static_cast<std::size_t>(std::max<sgemm_index>(p.m, 1)));
  for (auto& v : a) v = g.uniform(-1.0f, 1.0f);
  for (auto& v : b) v = g.uniform(-1.0f, 1.0f);
  for (auto& v : c) v = g.uniform(-1.0f, 1.0f);
  for (auto& v : bias) v = g.uniform(-1.0f, 1.0f);
  const std::vector<float> c0 = c;

  flotilla::detail::sgemm(p.trans_a, p.trans_b, p.m, p.n, p.k, a.data(), lda, b.data(), ldb, c.data(), ldc, p.accumulate,
                          p.bias ? bias.data() : nullptr);

  double worst = 0;
  for (sgemm_index j = 0; j < p.n; ++j) {
    for (sgemm_index i = 0; i < ldc; ++i) {
      const auto at = static_cast<std::size_t>(i + j * ldc);
      if (i >= p.m) {  // padding: must be untouched
        if (c[at] != c0[at]) return INFINITY;
        continue;
      }
      double ref = 0, scale = 0;
      for (sgemm_index q = 0; q < p.k; ++q) {
        const double x = a[static_cast<std::size_t>(p.trans_a ? q + i * lda : i + q * lda)];
        const double y = b[static_cast<std::size_t>(p.trans_b ? j + q * ldb : q + j * ldb)];
        ref += x * y;
        scale += std::abs(x * y);
      }
      if (p.accumulate) ref += c0[at], scale += std::abs(c0[at]);
      if (p.bias) ref += bias[static_cast<std::size_t>(i)], scale += std::abs(bias[static_cast<std::size_t>(i)]);
      worst = std::max(worst, std::abs(c[at] - ref) / std::max(scale, 1e-30));
    }
  }
  return worst;
}

/// A float result accumulated over k products may be off by about k rounding errors of the
/// summands' magnitude; twice that leaves room for blocked and fused orders of summation.
double tolerance(sgemm_index k) { return static_cast<double>(k + 3) * FLT_EPSILON; }

void check_problem(const Problem& p, Generator& g) {
  INFO(describe(p));
  CHECK(sgemm_error(p, g) <= tolerance(p.k));
}

constexpr std::array<sgemm_index, 17> sizes{0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 256, 300};

}  // namespace

TEST_CASE("sgemm: which kernel runs") {
  const std::string kernel = "sgemm kernel: " + std::string(flotilla::detail::sgemm_kernel_name) + ", MR = " +
                             std::to_string(flotilla::detail::sgemm_mr) + ", NR = " + std::to_string(flotilla::detail::sgemm_nr);
  MESSAGE(kernel);
  CHECK(flotilla::detail::sgemm_nr > 0);
}

TEST_CASE("sgemm matches a double-precision product: every small shape and flag") {
  Generator g(11);
  const std::array<sgemm_index, 8> small{0, 1, 2, 3, 7, 16, 17, 33};
  for (const sgemm_index m : small)
    for (const sgemm_index n : small)
      for (const sgemm_index k : small)
        for (int flags = 0; flags < 8; ++flags)
          check_problem({m, n, k, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0, ((flags + m + n) & 1) != 0,
                         static_cast<sgemm_index>(flags % 3)},
                        g);
}

TEST_CASE("sgemm matches a double-precision product: sampled shapes up to 300") {
  Generator g(12);
  for (int t = 0; t < 250; ++t) {
    const Problem p{sizes[g.below(sizes.size())], sizes[g.below(sizes.size())], sizes[g.below(sizes.size())],
                    g.below(2) == 1, g.below(2) == 1, g.below(2) == 1, g.below(3) == 0,
                    static_cast<sgemm_index>(g.below(2) == 0 ? 0 : 1 + g.below(9))};
    check_problem(p, g);
  }
}

TEST_CASE("sgemm matches a double-precision product: shapes that span several cache blocks") {
  Generator g(13);
  // The MLP and CNN products, and shapes past every block size (kc, mc, nc) so that each
  // blocking loop runs more than once, with ragged last blocks.
  const std::array<Problem, 10> problems{{
      {256, 64, 784, false, false, false, true, 0},   // Dense forward, bias in the kernel
      {256, 784, 64, false, true, true, false, 0},    // Dense dW += dY X^T
      {128, 64, 256, true, false, false, false, 0},   // Dense dX = W^T dY
      {10, 64, 128, false, false, true, true, 3},     // a thin layer
      {64, 300, 800, false, false, false, true, 0},   // Conv2D forward
      {800, 70, 64, true, false, false, false, 1},    // Conv2D dcols = W^T dY (m past mc)
      {33, 3100, 17, false, false, true, false, 0},   // n past nc
      {65, 3100, 9, true, true, false, true, 2},      // n past nc, both transposed
      {31, 19, 1000, false, true, true, false, 0},    // k past kc (three blocks)
      {401, 13, 801, true, true, true, true, 5},      // everything ragged
  }};
  for (const auto& p : problems) check_problem(p, g);
}

TEST_CASE("sgemm is safe to call from several threads at once") {
  // Each thread has its own packing buffers; growing them in one thread (the shapes differ, so
  // the buffers are resized mid-run) must not disturb another.
  std::vector<double> worst(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < worst.size(); ++t) {
    threads.emplace_back([t, &worst] {
      Generator g(100 + t);
      for (int r = 0; r < 12; ++r) {
        const auto s = static_cast<sgemm_index>(17 + 40 * ((r + static_cast<int>(t)) % 5));
        const Problem p{s, s + 3, 2 * s, r % 2 == 0, r % 3 == 0, r % 4 == 0, false, 1};
        worst[t] = std::max(worst[t], sgemm_error(p, g) / tolerance(p.k));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const double w : worst) CHECK(w <= 1.0);
}

TEST_CASE("gemm() takes Eigen views, transposed or not, in float and in double") {
  Generator g(14);
  flotilla::Matrix<float> af(23, 41), bf(41, 19), cf = flotilla::Matrix<float>::Zero(23, 19);
  for (Eigen::Index i = 0; i < af.size(); ++i) af.data()[i] = g.uniform(-1.0f, 1.0f);
  for (Eigen::Index i = 0; i < bf.size(); ++i) bf.data()[i] = g.uniform(-1.0f, 1.0f);
  const flotilla::Matrix<double> ad = af.cast<double>(), bd = bf.cast<double>();
  const flotilla::Matrix<double> ref = ad * bd;
  const flotilla::Matrix<float> at = af.transpose(), bt = bf.transpose();
  const auto a = flotilla::ConstMatrixView<float>(af.data(), 23, 41);
  const auto b = flotilla::ConstMatrixView<float>(bf.data(), 41, 19);
  const auto a_t = flotilla::ConstMatrixView<float>(at.data(), 41, 23);
  const auto b_t = flotilla::ConstMatrixView<float>(bt.data(), 19, 41);
  auto c = flotilla::MatrixView<float>(cf.data(), 23, 19);
  const double tol = tolerance(41) * 41;  // relative to the Frobenius norm: loose, but catches a wrong entry

  flotilla::detail::gemm(c, a, b, false);
  CHECK((c.cast<double>() - ref).norm() <= tol * ref.norm());
  flotilla::detail::gemm(c, a_t.transpose(), b_t.transpose(), false);
  CHECK((c.cast<double>() - ref).norm() <= tol * ref.norm());
  flotilla::detail::gemm(c, a, b_t.transpose(), true);  // accumulate: 2 * ref
  CHECK((c.cast<double>() - 2 * ref).norm() <= tol * ref.norm());

  // A block of a larger matrix: leading dimension > rows.
  flotilla::Matrix<float> big = flotilla::Matrix<float>::Zero(30, 19);
  flotilla::detail::gemm(big.topRows(23), a, b, false);
  CHECK((big.topRows(23).cast<double>() - ref).norm() <= tol * ref.norm());
  CHECK(big.bottomRows(7).isZero(0));

  // Bias folded into the product.
  const flotilla::Vector<float> bias = flotilla::Vector<float>::LinSpaced(23, -1.0f, 1.0f);
  flotilla::detail::gemm_bias(c, a, b, flotilla::ConstVectorView<float>(bias.data(), 23));
  const flotilla::Matrix<double> ref_bias = ref.colwise() + bias.cast<double>();
  CHECK((c.cast<double>() - ref_bias).norm() <= tol * ref_bias.norm());

  // Double always goes to Eigen.
  flotilla::Matrix<double> cd(23, 19);
  flotilla::detail::gemm(cd, flotilla::ConstMatrixView<double>(ad.data(), 23, 41), flotilla::ConstMatrixView<double>(bd.data(), 41, 19),
                         false);
  CHECK((cd - ref).norm() <= 1e-12 * ref.norm());
}

namespace {

/// `n`, hidden from the optimiser. Given buffers whose (tiny) size it can see, such as a batch
/// of three outputs of a Dense<1>, GCC 12 warns (-Warray-bounds) about the vector code paths
/// that only longer buffers can take.
std::size_t opaque(std::size_t n) {
  volatile std::size_t v = n;
  return v;
}

double relative_error(const std::vector<double>& ref, const std::vector<float>& got) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff += (ref[i] - got[i]) * (ref[i] - got[i]);
    norm += ref[i] * ref[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

/// Runs forward and backward of the layer Spec binds to for input shape In in float (its fast
/// path) and in double (its plain path) on the same random data, and checks that the outputs,
/// the parameter gradients (accumulated onto non-zero values, twice) and the input gradients agree
/// to float precision.
template <class Spec, class In>
void check_float_against_double(std::size_t batch, bool input_grad = true) {
  using LF = typename Spec::template layer<In, float>;
  using LD = typename Spec::template layer<In, double>;
  constexpr auto in = static_cast<Eigen::Index>(In::size);
  constexpr auto out = static_cast<Eigen::Index>(LF::output_shape::size);
  const auto b = static_cast<Eigen::Index>(batch);
  Generator g(batch * 7919 + In::size);
  std::vector<double> pd(opaque(LF::parameter_count)), xd(opaque(In::size * batch));
  std::vector<double> dyd(opaque(LF::output_shape::size * batch)), gd(opaque(LF::parameter_count));
  for (auto& v : pd) v = g.normal();
  for (auto& v : xd) v = g.normal();
  for (auto& v : dyd) v = g.normal();
  for (auto& v : gd) v = g.normal();
  const std::vector<float> pf(pd.begin(), pd.end()), xf(xd.begin(), xd.end()), dyf(dyd.begin(), dyd.end());
  std::vector<float> gf(gd.begin(), gd.end());
  std::vector<double> yd(opaque(LF::output_shape::size * batch)), dxd(opaque(In::size * batch));
  std::vector<float> yf(yd.size()), dxf(dxd.size());

  LF lf;
  LD ld;
  ld.forward(flotilla::ForwardArgs<double>{flotilla::ConstMatrixView<double>(xd.data(), in, b),
                                           flotilla::MatrixView<double>(yd.data(), out, b), pd, flotilla::Mode::train, {}, 0});
  lf.forward(flotilla::ForwardArgs<float>{flotilla::ConstMatrixView<float>(xf.data(), in, b),
                                          flotilla::MatrixView<float>(yf.data(), out, b), pf, flotilla::Mode::train, {}, 0});
  for (int pass = 0; pass < 2; ++pass) {
    ld.backward(flotilla::BackwardArgs<double>{
        flotilla::ConstMatrixView<double>(xd.data(), in, b), flotilla::ConstMatrixView<double>(yd.data(), out, b),
        flotilla::ConstMatrixView<double>(dyd.data(), out, b),
        input_grad ? flotilla::MatrixView<double>(dxd.data(), in, b) : flotilla::empty_view<double>(), pd, gd});
    lf.backward(flotilla::BackwardArgs<float>{
        flotilla::ConstMatrixView<float>(xf.data(), in, b), flotilla::ConstMatrixView<float>(yf.data(), out, b),
        flotilla::ConstMatrixView<float>(dyf.data(), out, b),
        input_grad ? flotilla::MatrixView<float>(dxf.data(), in, b) : flotilla::empty_view<float>(), pf, gf});
  }
  if (batch == 0) return;
  const double tol = 2e-5;
  CHECK(relative_error(yd, yf) < tol);
  CHECK(relative_error(gd, gf) < tol);
  if (input_grad) CHECK(relative_error(dxd, dxf) < tol);
}

}  // namespace

TEST_CASE("Conv2D in float (implicit im2col) agrees with Conv2D in double") {
  using flotilla::Conv2D;
  using flotilla::Shape;
  // One channel, stride 1: packed along output rows (the MNIST first layer).
  check_float_against_double<Conv2D<32, 5>, Shape<1, 28, 28>>(5, false);
  check_float_against_double<Conv2D<32, 5>, Shape<1, 28, 28>>(3);
  check_float_against_double<Conv2D<8, 3, 1, 1>, Shape<1, 9, 9>>(4);  // ... with padding
  // Several channels: packed along kernel rows.
  check_float_against_double<Conv2D<64, 5>, Shape<32, 12, 12>>(3);
  check_float_against_double<Conv2D<3, 3, 2, 1>, Shape<2, 7, 6>>(3);  // stride 2, padding 1
  check_float_against_double<Conv2D<2, 5, 1, 2>, Shape<1, 6, 6>>(3);  // "same" padding
  check_float_against_double<Conv2D<5, 1>, Shape<3, 4, 4>>(3);        // 1x1
  check_float_against_double<Conv2D<4, 2, 2>, Shape<1, 8, 8>>(2);     // one channel, stride 2
  check_float_against_double<Conv2D<37, 3, 2, 1>, Shape<19, 17, 13>>(9);
  check_float_against_double<Conv2D<16, 3, 1, 1>, Shape<8, 10, 10>>(1);
  check_float_against_double<Conv2D<16, 3, 1, 1>, Shape<8, 10, 10>>(0);  // an empty batch does nothing
}

TEST_CASE("Conv2D in float, image read in place (strided products), agrees with Conv2D in double") {
  using flotilla::Conv2D;
  using flotilla::Shape;
  // Filters in whole vectors and channels a multiple of 4: the products read the padded image in
  // place. Each case varies what the tiling depends on: how many vectors of filters (one, two,
  // several blocks), how an output row splits into tiles (one, equal, unequal), the stride, and
  // how wide a weight-gradient tile is (a divisor of K*C).
  check_float_against_double<Conv2D<16, 3, 1, 1>, Shape<16, 28, 28>>(2);  // the ResNet's first stage
  check_float_against_double<Conv2D<16, 3, 1, 1>, Shape<4, 5, 25>>(3);    // a row in unequal tiles
  check_float_against_double<Conv2D<32, 3, 2, 1>, Shape<16, 13, 11>>(3);  // stride 2, odd sizes
  check_float_against_double<Conv2D<64, 3, 1, 1>, Shape<32, 7, 7>>(2);    // two blocks of filters
  check_float_against_double<Conv2D<48, 1, 2>, Shape<8, 9, 9>>(3);        // 1 x 1, stride 2, K*C = 8
  check_float_against_double<Conv2D<16, 5, 1, 2>, Shape<4, 30, 30>>(2);   // K*C = 20
  check_float_against_double<Conv2D<32, 5>, Shape<12, 31, 9>>(2);         // no padding, tall image
  check_float_against_double<Conv2D<32, 3, 1, 1>, Shape<32, 14, 14>>(2, false);  // no input gradient
  // The input gradient as a correlation (stride 1, channels in whole vectors, padding that keeps
  // the image about its size), with dY padded by K - 1 - P: 2 (no padding), 1, 0 (P = K - 1);
  // channels in one, two or three vectors.
  check_float_against_double<Conv2D<16, 3>, Shape<16, 30, 30>>(1);
  check_float_against_double<Conv2D<16, 3, 1, 2>, Shape<16, 6, 7>>(3);
  check_float_against_double<Conv2D<16, 3, 1, 1>, Shape<48, 5, 5>>(2);
}

TEST_CASE("Dense in float agrees with Dense in double") {
  using flotilla::Dense;
  using flotilla::Shape;
  check_float_against_double<Dense<256>, Shape<784>>(64);
  check_float_against_double<Dense<10>, Shape<128>>(7);
  check_float_against_double<Dense<1>, Shape<1>>(1);
  check_float_against_double<Dense<33>, Shape<65>>(0);
}

}  // namespace unit_gemm
