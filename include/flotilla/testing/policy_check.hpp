// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TESTING_POLICYCHECK_HPP_INCLUDED
#define FLOTILLA_TESTING_POLICYCHECK_HPP_INCLUDED
// Checks of an update policy (and the gradient exchange it names), for flotilla's tests and for
// users' own policies:
//
//   auto r = flotilla::testing::check_policy<MyPolicy>();
//   CHECK(r.passed());   // or print r.report()
//
// The UpdatePolicy and GradientExchange concepts check the signatures; this trains a small
// classifier with the policy on in-process workers and checks what a compiler cannot
// (docs/concepts/update_policy.md, docs/concepts/gradient_exchange.md): every worker makes the
// same collective calls (a mismatch ends in an error or a timeout, reported here), every worker
// ends with the same parameters, the loss falls, and a second run from the same seed ends on the
// same bits. Asynchronous policies with several workers are not repeatable by design (which
// push arrives first decides), and are not held to the last check.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/loss/softmax_cross_entropy.hpp"
#include "flotilla/model.hpp"
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/sequential.hpp"
#include "flotilla/optim/sgd.hpp"
#include "flotilla/train/trainer.hpp"

namespace flotilla::testing {

struct PolicyCheckResult {
  std::string policy;
  std::vector<std::string> failures;
  std::size_t checks = 0;
  bool passed() const noexcept { return failures.empty() && checks > 0; }
  std::string report() const {
    std::ostringstream out;
    out << "policy " << policy << ": " << checks << " checks, " << failures.size() << " failed";
    for (const auto& f : failures) out << "\n  " << f;
    return out.str();
  }
};

struct PolicyCheckOptions {
  std::uint64_t seed = 1;
  std::size_t epochs = 6;
  /// Worker counts to train with, each a job of its own.
  std::vector<std::size_t> workers = {2, 3};
  /// Parameter-server policies: servers per job.
  std::size_t servers = 2;
  /// How far the last epoch's training loss must fall below the first's (a fraction of it).
  double loss_drop = 0.2;
  /// Whether every worker must end with the same parameters (a policy that lets them differ on
  /// purpose, between its averaging steps, sets false). Not asked of asynchronous servers, whose
  /// workers each take the servers' parameters when they finish.
  bool workers_end_equal = true;
};

namespace detail {

/// Four classes in 8 inputs: the signs of the first two, under noise. Fixed by the seed.
inline data::Dataset<float> policy_check_data(std::uint64_t seed) {
  data::Dataset<float> d;
  d.name = "quadrants";
  d.classes = 4;
  d.inputs.resize(8, 480);
  d.labels.resize(480);
  Generator g(seed);
  for (Eigen::Index s = 0; s < 480; ++s) {
    for (Eigen::Index i = 0; i < 8; ++i) d.inputs(i, s) = g.normal<float>();
    d.labels[static_cast<std::size_t>(s)] = (d.inputs(0, s) > 0 ? 1 : 0) + (d.inputs(1, s) > 0 ? 2 : 0);
  }
  return d;
}

}  // namespace detail

template <class Policy>
PolicyCheckResult check_policy(const PolicyCheckOptions& o = {}, Policy policy = {}) {
  static_assert(UpdatePolicy<Policy>, "check_policy<P>: P is not an update policy (see docs/concepts/update_policy.md)");
  using Net = Sequential<Input<8>, Dense<16>, Tanh, Dense<4>>;
  using M = Model<Net, SoftmaxCrossEntropy, optim::Momentum>;
  constexpr bool repeatable = !ParameterServerPolicy<Policy> || [] {
    if constexpr (ParameterServerPolicy<Policy>) return Policy::aggregate; else return true;
  }();

  PolicyCheckResult r;
  r.policy = std::string(Policy::name);
  auto expect = [&](bool ok, const std::string& what) {
    ++r.checks;
    if (!ok) r.failures.push_back(what);
  };
  const auto data = detail::policy_check_data(o.seed);
  for (const std::size_t workers : o.workers) {
    const std::string job = std::to_string(workers) + " workers: ";
    TrainerOptions<M> options;
    options.optimizer.learning_rate = 0.05;
    options.batch_size = 8;
    options.seed = o.seed;
    options.workers = workers;
    options.servers = o.servers;
    FitOptions fit;
    fit.epochs = o.epochs;
    fit.log = nullptr;
    auto parameters_of = [](const Trainer<M, Policy>& t, std::size_t w) {
      const auto* e = t.engine(w);
      return e ? std::vector<float>(e->parameters().begin(), e->parameters().end()) : std::vector<float>{};
    };
    std::vector<float> first_run;
    for (int run = 0; run < (repeatable ? 2 : 1); ++run) {
      try {
        Trainer<M, Policy> t(options, policy);
        const History h = t.fit(data, nullptr, fit);
        if (run == 1) {
          expect(parameters_of(t, 0) == first_run, job + "a second run from the same seed ended on other parameters");
          continue;
        }
        expect(h.size() == o.epochs, job + "fit() returned " + std::to_string(h.size()) + " epoch records, not " +
                                         std::to_string(o.epochs));
        if (h.size() != o.epochs || h.empty()) continue;
        const double first = h.front().train_loss, last = h.back().train_loss;
        expect(std::isfinite(last) && last <= (1 - o.loss_drop) * first,
               job + "the training loss went from " + std::to_string(first) + " to " + std::to_string(last) +
                   "; it should fall by " + std::to_string(100 * o.loss_drop) + "%");
        first_run = parameters_of(t, 0);
        if (!o.workers_end_equal || !repeatable) continue;
        bool equal = true;
        for (std::size_t w = 1; w < workers; ++w) equal = equal && parameters_of(t, w) == first_run;
        expect(equal, job + "the workers ended with different parameters (every worker must apply the same update, "
                            "adding contributions in an order that does not depend on the worker)");
      } catch (const std::exception& e) {
        expect(false, job + "training failed: " + e.what());
      }
    }
  }
  return r;
}

}  // namespace flotilla::testing
#endif  // FLOTILLA_TESTING_POLICYCHECK_HPP_INCLUDED
