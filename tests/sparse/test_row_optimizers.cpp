// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The per-row optimizers, step by step against values worked out by hand (the arithmetic is written
// out beside each expected value), and lazy Adam against dense Adam on a row every step touches.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/optim/row_ftrl.hpp"
#include "flotilla/optim/row_lazy_adam.hpp"
#include "flotilla/optim/row_sgd.hpp"

namespace {

using doctest::Approx;

// One row and its state, created as a table would: values first, then init_state.
template <class O>
struct Row {
  std::vector<float> w, state;
  Row(const O& o, std::vector<float> values) : w(std::move(values)), state(o.state_size(w.size()), -1.0f) {
    o.init_state(std::span<const float>(w), state);
  }
  void step(const O& o, std::vector<float> g) { o.apply(w, state, std::span<const float>(g)); }
};

}  // namespace

static_assert(flotilla::RowOptimizer<flotilla::optim::RowAdagrad>);
static_assert(flotilla::RowOptimizer<flotilla::optim::RowFtrl>);
static_assert(flotilla::RowOptimizer<flotilla::optim::RowLazyAdam>);
static_assert(flotilla::row_optimizer_needs_zero_rows<flotilla::optim::RowFtrl>);
static_assert(!flotilla::row_optimizer_needs_zero_rows<flotilla::optim::RowAdagrad>);
static_assert(!flotilla::row_optimizer_needs_zero_rows<flotilla::optim::RowLazyAdam>);

TEST_CASE("row Adagrad accumulates squared gradients from its initial value and divides by their root") {
  flotilla::optim::RowAdagrad o;
  o.learning_rate = 0.1;
  o.initial_accumulator = 7;
  o.epsilon = 1;
  Row r(o, {1.0f, -2.0f});
  CHECK(r.state == std::vector<float>{7, 7});

  r.step(o, {3, 3});
  // acc = 7 + 9 = 16 for both; w -= 0.1 * 3 / (sqrt(16) + 1) = 0.06.
  CHECK(r.state == std::vector<float>{16, 16});
  CHECK(r.w[0] == Approx(1 - 0.06).epsilon(1e-6));
  CHECK(r.w[1] == Approx(-2 - 0.06).epsilon(1e-6));

  r.step(o, {-3, 0});
  // acc = 16 + 9 = 25 and 16 + 0; w[0] -= 0.1 * -3 / (5 + 1) = -0.05; w[1] does not move.
  CHECK(r.state == std::vector<float>{25, 16});
  CHECK(r.w[0] == Approx(0.94 + 0.05).epsilon(1e-6));
  CHECK(r.w[1] == Approx(-2.06).epsilon(1e-6));
}

TEST_CASE("row Adagrad's first step from a zero accumulator is the learning rate times the gradient's sign") {
  const flotilla::optim::RowAdagrad o;  // lr 0.01, accumulator 0, eps 1e-10
  Row r(o, {0.5f, 0.5f, 0.5f});
  r.step(o, {250, -0.004f, 0});
  // acc = g^2, so g / sqrt(acc) = sign(g) (the 1e-10 is far below float's precision here).
  CHECK(r.w[0] == Approx(0.49).epsilon(1e-6));
  CHECK(r.w[1] == Approx(0.51).epsilon(1e-6));
  CHECK(r.w[2] == 0.5f);
}

TEST_CASE("row FTRL follows Algorithm 1 of McMahan et al., with L1 holding values at exactly zero") {
  flotilla::optim::RowFtrl o;
  o.alpha = 0.5;
  o.beta = 1;
  o.l1 = 1;
  o.l2 = 2;
  Row r(o, {0, 0, 0});
  CHECK(r.state == std::vector<float>(6, 0.0f));

  // Step 1, g = (3, 0.5, -3); every w is 0, so z = g, n = g^2.
  //  value 0: n = 9, z = 3; |z| > l1: w = -(3 - 1) / ((1 + sqrt 9) / 0.5 + 2) = -2 / 10 = -0.2
  //  value 1: n = 0.25, z = 0.5 <= l1: w = 0 exactly
  //  value 2: n = 9, z = -3: w = -(-3 + 1) / 10 = 0.2
  r.step(o, {3, 0.5f, -3});
  CHECK(r.w[0] == Approx(-0.2).epsilon(1e-6));
  CHECK(r.w[1] == 0.0f);
  CHECK(r.w[2] == Approx(0.2).epsilon(1e-6));
  CHECK(r.state == std::vector<float>{3, 0.5f, -3, 9, 0.25f, 9});

  // Step 2, g = (4, 0.5, 0).
  //  value 0: n = 25, sigma = (5 - 3) / 0.5 = 4, z = 3 + 4 - 4 * -0.2 = 7.8,
  //           w = -(7.8 - 1) / ((1 + 5) / 0.5 + 2) = -6.8 / 14
  //  value 1: n = 0.5, sigma = (sqrt 0.5 - 0.5) / 0.5, z = 0.5 + 0.5 - sigma * 0 = 1 <= l1: w = 0
  //  value 2: g = 0 changes nothing: n = 9, z = -3, w = 0.2
  r.step(o, {4, 0.5f, 0});
  CHECK(r.w[0] == Approx(-6.8 / 14).epsilon(1e-6));
  CHECK(r.w[1] == 0.0f);
  CHECK(r.w[2] == Approx(0.2).epsilon(1e-6));
  CHECK(r.state[0] == Approx(7.8).epsilon(1e-6));
  CHECK(r.state[1] == 1.0f);
  CHECK(r.state[3] == 25.0f);

  // Step 3, g = (0, 0.5, 0): value 1 leaves zero, n = 0.75, z = 1.5,
  //  w = -(1.5 - 1) / ((1 + sqrt 0.75) / 0.5 + 2).
  r.step(o, {0, 0.5f, 0});
  CHECK(r.w[0] == Approx(-6.8 / 14).epsilon(1e-6));
  CHECK(r.w[1] == Approx(-0.5 / ((1 + std::sqrt(0.75)) / 0.5 + 2)).epsilon(1e-6));
  CHECK(r.w[2] == Approx(0.2).epsilon(1e-6));
}

TEST_CASE("row FTRL without L1 or L2 is -z / ((beta + sqrt n) / alpha), and L2 alone shrinks it") {
  flotilla::optim::RowFtrl o;
  o.alpha = 0.5;
  o.beta = 1;
  Row plain(o, {0});
  plain.step(o, {3});
  // -3 / ((1 + 3) / 0.5) = -3 / 8
  CHECK(plain.w[0] == Approx(-0.375).epsilon(1e-6));
  o.l2 = 2;
  Row ridge(o, {0});
  ridge.step(o, {3});
  // -3 / (8 + 2)
  CHECK(ridge.w[0] == Approx(-0.3).epsilon(1e-6));
  // Without L1 a tiny gradient still moves the value off zero.
  Row tiny(o, {0});
  tiny.step(o, {1e-3f});
  CHECK(tiny.w[0] != 0.0f);
}

TEST_CASE("row lazy Adam takes Adam's steps, bias-corrected by the row's own update count") {
  flotilla::optim::RowLazyAdam o;
  o.learning_rate = 0.1;
  o.beta1 = 0.5;
  o.beta2 = 0.75;
  o.epsilon = 0;
  Row r(o, {1});
  CHECK(r.state == std::vector<float>{0, 0, 0});  // m, v, t

  r.step(o, {2});
  // t = 1: m = 0.5 * 2 = 1, v = 0.25 * 4 = 1;
  // w -= 0.1 / (1 - 0.5) * 1 / (sqrt(1) / sqrt(1 - 0.75)) = 0.2 * 1 / 2 = 0.1
  CHECK(r.state[0] == 1.0f);
  CHECK(r.state[1] == 1.0f);
  CHECK(r.state[2] == 1.0f);
  CHECK(r.w[0] == Approx(0.9).epsilon(1e-6));

  r.step(o, {4});
  // t = 2: m = 0.5 * 1 + 0.5 * 4 = 2.5, v = 0.75 * 1 + 0.25 * 16 = 4.75;
  // w -= 0.1 / (1 - 0.25) * 2.5 / (sqrt(4.75) / sqrt(1 - 0.5625))
  CHECK(r.state[0] == 2.5f);
  CHECK(r.state[1] == 4.75f);
  CHECK(r.state[2] == 2.0f);
  const double step2 = 0.1 / 0.75 * 2.5 / (std::sqrt(4.75) / std::sqrt(0.4375));
  CHECK(r.w[0] == Approx(0.9 - step2).epsilon(1e-6));

  // A row first touched now takes a first step (t = 1: lr * sign(g)), whatever the other rows'
  // counts: the bias correction is the row's own.
  Row fresh(o, {0});
  fresh.step(o, {-7});
  CHECK(fresh.state[2] == 1.0f);
  CHECK(fresh.w[0] == Approx(0.1).epsilon(1e-6));
}

TEST_CASE("row lazy Adam equals dense Adam on a row that every step touches") {
  constexpr std::size_t dim = 5;
  flotilla::optim::RowLazyAdam lazy;
  lazy.learning_rate = 0.01;
  flotilla::optim::Adam dense;
  dense.learning_rate = 0.01;

  std::mt19937 g(3);
  std::normal_distribution<float> normal;
  std::vector<float> start(dim);
  for (auto& x : start) x = normal(g);
  Row r(lazy, start);
  std::vector<float> p = start;
  flotilla::optim::Adam::state<float> s(dim);
  const flotilla::TensorInfo tensor{0, "Embedding", "rows", 0, dim, flotilla::TensorRole::weight};

  for (std::uint64_t step = 1; step <= 30; ++step) {
    std::vector<float> grad(dim);
    for (auto& x : grad) x = normal(g) * (step % 3 == 0 ? 100.0f : 0.1f);
    r.step(lazy, grad);
    dense.update<float>(p, grad, s, std::span<const flotilla::TensorInfo>(&tensor, 1),
                        flotilla::StepInfo{step, dense.learning_rate});
    for (std::size_t i = 0; i < dim; ++i) {
      CAPTURE(step);
      CAPTURE(i);
      CHECK(r.w[i] == Approx(p[i]).epsilon(1e-6));
      CHECK(r.state[i] == Approx(s.m[i]).epsilon(1e-6));
      CHECK(r.state[dim + i] == Approx(s.v[i]).epsilon(1e-6));
    }
  }
  CHECK(r.state[2 * dim] == 30.0f);
}

TEST_CASE("row optimizers reject a state or gradient of the wrong size, naming the optimizer") {
  std::vector<float> row(3), state(2), grad(3);
  CHECK_THROWS_WITH_AS(flotilla::optim::RowAdagrad{}.apply(row, state, grad), doctest::Contains("row-Adagrad"),
                       flotilla::ShapeError);
  std::vector<float> ftrl_state(6), short_grad(2);
  CHECK_THROWS_WITH_AS(flotilla::optim::RowFtrl{}.apply(row, ftrl_state, short_grad), doctest::Contains("row-FTRL"),
                       flotilla::ShapeError);
  std::vector<float> adam_state(6);
  CHECK_THROWS_WITH_AS(flotilla::optim::RowLazyAdam{}.apply(row, adam_state, grad), doctest::Contains("row-lazy-Adam"),
                       flotilla::ShapeError);
}
