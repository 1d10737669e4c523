// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Binary cross-entropy on logits: against the textbook formula where that is safe, against central
// differences, and at logits where the textbook formula overflows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "flotilla/concepts/loss.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/loss/binary_cross_entropy.hpp"

namespace {

using BCE = flotilla::BinaryCrossEntropyWithLogits;
static_assert(flotilla::Loss<BCE, float>);
static_assert(flotilla::Loss<BCE, double>);

template <class T>
flotilla::Targets<T> targets(const std::vector<T>& y, long rows = 1) {
  return flotilla::Targets<T>{{}, flotilla::ConstMatrixView<T>(y.data(), rows, static_cast<long>(y.size()) / rows)};
}

double naive(double x, double y) {
  const double s = 1 / (1 + std::exp(-x));
  return -y * std::log(s) - (1 - y) * std::log(1 - s);
}

}  // namespace

TEST_CASE("binary cross-entropy equals the textbook formula and its gradient is scale * (sigmoid - y)") {
  const std::vector<double> x{-8, -2.5, -0.3, 0, 0.7, 3, 8, -1, 2};
  const std::vector<double> y{0, 1, 1, 0, 0, 1, 1, 0.25, 0.9};  // soft targets too
  const auto t = targets(y);
  const flotilla::ConstMatrixView<double> out(x.data(), 1, static_cast<long>(x.size()));
  double expected = 0;
  for (std::size_t i = 0; i < x.size(); ++i) expected += naive(x[i], y[i]);
  CHECK(BCE::value<double>(out, t) == doctest::Approx(expected).epsilon(1e-13));

  std::vector<double> grad(x.size());
  const double scale = 1.0 / 9;
  CHECK(BCE::value_and_gradient<double>(out, t, flotilla::MatrixView<double>(grad.data(), 1, 9), scale) ==
        doctest::Approx(expected).epsilon(1e-13));
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(grad[i] == doctest::Approx(scale * (1 / (1 + std::exp(-x[i])) - y[i])).epsilon(1e-13));
}

TEST_CASE("binary cross-entropy's gradient equals central differences of its value, over two outputs") {
  // Two outputs per sample: a sample's loss is their mean, so each gradient carries a factor 1/2.
  std::vector<double> x{-3, 0.5, 1.25, -0.75, 4, 0.1};
  const std::vector<double> y{1, 0, 1, 1, 0, 0.5};
  const auto t = targets(y, 2);
  std::vector<double> grad(x.size());
  const double scale = 0.25;
  BCE::value_and_gradient<double>(flotilla::ConstMatrixView<double>(x.data(), 2, 3), t,
                                  flotilla::MatrixView<double>(grad.data(), 2, 3), scale);
  const double h = 1e-6;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double keep = x[k];
    x[k] = keep + h;
    const double up = BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 2, 3), t);
    x[k] = keep - h;
    const double down = BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 2, 3), t);
    x[k] = keep;
    CHECK(grad[k] == doctest::Approx(scale * (up - down) / (2 * h)).epsilon(1e-7));
  }
}

TEST_CASE("binary cross-entropy is finite and exact at logits of +-1000, in float and double") {
  // x = +-1000: loss = max(x, 0) - x y (the log1p term is exp(-1000) = 0), gradient = (s - y) scale
  // with s exactly 1 or 0.
  auto check_at = [](auto zero) {
    using T = decltype(zero);
    const std::vector<T> x{1000, 1000, -1000, -1000};
    const std::vector<T> y{1, 0, 1, 0};
    std::vector<T> grad(4);
    const T loss = BCE::value_and_gradient<T>(flotilla::ConstMatrixView<T>(x.data(), 1, 4), targets(y),
                                              flotilla::MatrixView<T>(grad.data(), 1, 4), T(0.5));
    CHECK(std::isfinite(loss));
    CHECK(loss == T(2000));  // 0 + 1000 + 1000 + 0
    CHECK(grad[0] == T(0));
    CHECK(grad[1] == T(0.5));
    CHECK(grad[2] == T(-0.5));
    CHECK(grad[3] == T(0));
    // The textbook formula gives infinity or NaN here, which is why it is not used.
    CHECK_FALSE(std::isfinite(naive(-1000, 1)));
  };
  check_at(0.0f);
  check_at(0.0);
  // Where log1p matters: at x = 30 in double, log(1 + e^-30) = e^-30 to full precision.
  const std::vector<double> x{30}, y{1};
  CHECK(BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 1, 1), targets(y)) ==
        doctest::Approx(std::exp(-30.0)).epsilon(1e-12));
}

TEST_CASE("binary cross-entropy rejects mismatched shapes and targets outside [0, 1], naming the sample") {
  const std::vector<double> x{0.5, -0.5, 1};
  const std::vector<double> two{1, 0};
  CHECK_THROWS_AS(BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 1, 3), targets(two)),
                  flotilla::ShapeError);
  const std::vector<double> bad{1, 2, 0};
  CHECK_THROWS_WITH_AS(BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 1, 3), targets(bad)),
                       doctest::Contains("sample 1"), flotilla::ShapeError);
  const std::vector<double> nan{1, 0, std::numeric_limits<double>::quiet_NaN()};
  CHECK_THROWS_WITH_AS(BCE::value<double>(flotilla::ConstMatrixView<double>(x.data(), 1, 3), targets(nan)),
                       doctest::Contains("sample 2"), flotilla::ShapeError);
}
