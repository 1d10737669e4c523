// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// The run that policy::Reproducible's tests repeat on different numbers of workers, cores and
// transports, expecting the same bits: 50 updates with a global batch of 48 in virtual shards of 2.
#include <cstddef>
#include <utility>
#include <vector>

#include "blobs.hpp"
#include "quiet_fit.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/policy/reproducible.hpp"

namespace flotilla_test::reproducible {

// Convolution, per-shard batch normalisation, dropout keyed by sample: every kind of arithmetic
// whose order could depend on who computes it.
using Net = flotilla::Sequential<flotilla::Input<1, 6, 6>, flotilla::Conv2D<4, 3>, flotilla::BatchNorm2D<>, flotilla::ReLU,
                                 flotilla::MaxPool2D<2>, flotilla::Flatten, flotilla::Dense<12>, flotilla::Tanh,
                                 flotilla::Dropout<12>, flotilla::Dense<3>>;
using M = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum, float>;

inline constexpr std::size_t global_batch = 48;

inline flotilla::policy::Reproducible shards_of_two() {
  flotilla::policy::Reproducible p;
  p.shard_samples = 2;
  return p;
}

/// Parameters after 50 updates of Trainer<M, P, Transport> on `workers` workers (0: as launched,
/// `world` of them) of `threads` cores each. 490 samples: every tenth update or so is a partial
/// batch of 10, split unevenly among the workers.
template <class P, class Transport = flotilla::transport::InProcess>
std::vector<float> fifty_steps(std::size_t workers, std::size_t world, std::size_t threads, P policy = {},
                               typename Transport::options transport = {}) {
  static const auto data = blobs<float>(490, 5);
  flotilla::TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.05;
  o.batch_size = global_batch / world;
  o.workers = workers;
  o.threads = threads;
  o.seed = 23;
  flotilla::Trainer<M, P, Transport> t(o, std::move(policy), std::move(transport));
  auto f = quiet(10);
  f.max_steps = 50;
  t.fit(data, nullptr, f);
  const auto p = std::as_const(t).parameters();
  return {p.begin(), p.end()};
}

}  // namespace flotilla_test::reproducible
