// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Each optimizer's update, step by step, against its reference formula written out in double
// (PyTorch's conventions), and each schedule's factors.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/optim/sgd.hpp"

namespace unit_optimizers {

using namespace flotilla;

namespace {
// A weight tensor of 3 and a bias of 2, as a network would describe them.
const std::vector<TensorInfo> tensors = {{0, "Dense", "weight", 0, 3, TensorRole::weight},
                                         {0, "Dense", "bias", 3, 2, TensorRole::bias}};
const std::vector<double> p0 = {0.5, -1.0, 2.0, 0.1, -0.3};
// Gradients of three successive steps.
const std::vector<std::vector<double>> grads = {
    {0.2, -0.1, 0.05, 1.0, -2.0}, {0.1, 0.3, -0.2, 0.5, 0.0}, {-0.4, 0.2, 0.1, -1.0, 1.5}};

template <class O>
std::vector<double> run(const O& opt, double lr = 0.1) {
  std::vector<double> p = p0;
  typename O::template state<double> s(p.size());
  for (std::size_t t = 0; t < grads.size(); ++t)
    opt.update(std::span<double>(p), std::span<const double>(grads[t]), s, tensors, StepInfo{t + 1, lr});
  return p;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
}
}  // namespace

TEST_CASE("SGD with weight decay, biases excluded or not") {
  for (bool decay_biases : {true, false}) {
    CAPTURE(decay_biases);
    optim::SGD o;
    o.weight_decay = 0.01;
    o.decay_biases = decay_biases;
    std::vector<double> want = p0;
    for (const auto& g : grads)
      for (std::size_t i = 0; i < want.size(); ++i)
        want[i] -= 0.1 * (g[i] + ((i < 3 || decay_biases) ? 0.01 * want[i] : 0.0));
    check_close(run(o), want);
  }
}

TEST_CASE("momentum, heavy-ball and Nesterov") {
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    optim::Momentum o;
    o.momentum = 0.9;
    o.nesterov = nesterov;
    o.weight_decay = 0.001;
    std::vector<double> want = p0, v(p0.size(), 0.0);
    for (const auto& g : grads) {
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double d = g[i] + 0.001 * want[i];
        v[i] = 0.9 * v[i] + d;
        want[i] -= 0.1 * (nesterov ? d + 0.9 * v[i] : v[i]);
      }
    }
    check_close(run(o), want);
  }
}

TEST_CASE("Adam (L2 decay) and AdamW (decoupled decay)") {
  for (bool decoupled : {false, true}) {
    CAPTURE(decoupled);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.05, lr = 0.1;
    std::vector<double> want = p0, m(p0.size(), 0.0), v(p0.size(), 0.0);
    for (std::size_t t = 1; t <= grads.size(); ++t) {
      for (std::size_t i = 0; i < want.size(); ++i) {
        double g = grads[t - 1][i];
        if (decoupled) {
          want[i] *= 1 - lr * wd;
        } else {
          g += wd * want[i];
        }
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        const double mhat = m[i] / (1 - std::pow(b1, double(t))), vhat = v[i] / (1 - std::pow(b2, double(t)));
        want[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    }
    if (decoupled) {
      optim::AdamW o;
      o.weight_decay = wd;
      check_close(run(o, lr), want);
    } else {
      optim::Adam o;
      o.weight_decay = wd;
      check_close(run(o, lr), want);
    }
  }
  CHECK(optim::AdamW{}.weight_decay == 0.01);  // PyTorch's default
}

TEST_CASE("optimizer state is exposed for checkpoints") {
  optim::Adam::state<float> s(7);
  const auto b = s.buffers();
  CHECK(b.size() == 2);
  CHECK(b[0].size() == 7);
  optim::Momentum::state<float> m(4);
  CHECK(m.buffers()[0].size() == 4);
  CHECK(optim::SGD::state<float>(4).buffers().empty());
}

namespace {
/// Three steps of o in float through update() (Eigen arrays, per tensor) and through its element
/// rule called once per element with scalars, as the CUDA engine's kernel calls it.
template <class O>
void check_rule_matches_update(const O& o) {
  static_assert(ElementRuleOptimizer<O, float>);
  constexpr std::size_t K = state_buffer_count<O, float>;
  std::vector<float> p_arrays(p0.begin(), p0.end()), p_elements = p_arrays;
  typename O::template state<float> s_arrays(p0.size()), s_elements(p0.size());
  for (std::size_t t = 0; t < grads.size(); ++t) {
    const std::vector<float> g(grads[t].begin(), grads[t].end());
    const StepInfo info{t + 1, 0.1};
    o.update(std::span<float>(p_arrays), std::span<const float>(g), s_arrays, tensors, info);
    const auto rule = o.template element_rule<float>(info);
    auto state = s_elements.buffers();
    for (const auto& tensor : tensors)
      for (std::size_t i = tensor.offset; i < tensor.offset + tensor.size; ++i)
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          rule(rule.decays(tensor), p_elements[i], g[i], state[I][i]...);
        }(std::make_index_sequence<K>{});
  }
  for (std::size_t i = 0; i < p0.size(); ++i) {
    CAPTURE(i);
    CHECK(p_elements[i] != doctest::Approx(p0[i]).epsilon(1e-9));  // the steps moved every parameter
    CHECK(p_elements[i] == doctest::Approx(p_arrays[i]).epsilon(1e-6));
  }
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t i = 0; i < p0.size(); ++i) CHECK(s_elements.buffers()[k][i] == doctest::Approx(s_arrays.buffers()[k][i]).epsilon(1e-6));
}

struct NoRule {
  static constexpr std::string_view name = "NoRule";
  static constexpr bool elementwise = true;
  double learning_rate = 0.1;
  template <class T>
  struct state {
    explicit state(std::size_t) {}
    std::array<std::span<T>, 0> buffers() { return {}; }
  };
  template <class T>
  void update(std::span<T>, std::span<const T>, state<T>&, std::span<const TensorInfo>, const StepInfo&) const {}
};
}  // namespace

TEST_CASE("each optimizer's element rule, one element at a time, gives its update on arrays") {
  for (bool decay_biases : {true, false}) {
    CAPTURE(decay_biases);
    for (double wd : {0.0, 0.05}) {
      CAPTURE(wd);
      optim::SGD sgd;
      sgd.weight_decay = wd;
      sgd.decay_biases = decay_biases;
      check_rule_matches_update(sgd);
      for (bool nesterov : {false, true}) {
        optim::Momentum momentum;
        momentum.weight_decay = wd;
        momentum.decay_biases = decay_biases;
        momentum.nesterov = nesterov;
        check_rule_matches_update(momentum);
      }
      optim::Adam adam;
      adam.weight_decay = wd;
      adam.decay_biases = decay_biases;
      check_rule_matches_update(adam);
      optim::AdamW adamw;
      adamw.weight_decay = wd;
      adamw.decay_biases = decay_biases;
      check_rule_matches_update(adamw);
    }
  }
  // An optimizer without an element rule is still an Optimizer; the CUDA engine runs it on the host.
  static_assert(Optimizer<NoRule, float> && !ElementRuleOptimizer<NoRule, float>);
}

TEST_CASE("learning-rate schedules") {
  CHECK(schedule::Constant{}(12345) == 1.0);
  const schedule::Step step{100, 0.5};
  CHECK(step(0) == 1.0);
  CHECK(step(99) == 1.0);
  CHECK(step(100) == 0.5);
  CHECK(step(250) == 0.25);
  const schedule::Cosine cos{1000, 0.1, 100};
  CHECK(cos(0) == doctest::Approx(0.01));    // warm-up starts small
  CHECK(cos(99) == doctest::Approx(1.0));    // and reaches the base rate
  CHECK(cos(100) == doctest::Approx(1.0));
  CHECK(cos(550) == doctest::Approx(0.55));  // half way down: min + (1 - min) / 2
  CHECK(cos(1000) == doctest::Approx(0.1));
  CHECK(cos(5000) == doctest::Approx(0.1));  // constant after the end
  static_assert(Schedule<schedule::Cosine> && Schedule<schedule::Step>);
}

}  // namespace unit_optimizers
