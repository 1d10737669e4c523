// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The Fashion-MNIST CNN trained as a 2-stage pipeline by pipeline::Trainer (1F1B, 4 micro-batches)
// reaches the unsplit CNN's one-epoch bar (tests/accuracy: 84%). The full 5-epoch figures for 2 and 3 stages are in
// docs/benchmarks.md (examples/fashion_mnist_pipeline).
#include <doctest/doctest.h>

#include <cmath>

#include "flotilla/flotilla.hpp"

using namespace flotilla;
namespace fm = data::fashion_mnist;
namespace pl = flotilla::pipeline;

TEST_CASE("the CNN split over 2 pipeline stages learns Fashion-MNIST: 84% after 1 epoch") {
  using CNN = Sequential<Input<1, 28, 28>, Conv2D<32, 5>, ReLU, MaxPool2D<2>, Conv2D<64, 5>, ReLU, MaxPool2D<2>, Flatten,
                         Dense<10>>;
  using M = Model<CNN, SoftmaxCrossEntropy, optim::Adam>;
  auto train = fm::load<float>(fm::Split::train);
  auto test = fm::load<float>(fm::Split::test);
  const float mean = train.inputs.mean();
  const float stddev = std::sqrt((train.inputs.array() - mean).square().mean());
  for (auto* d : {&train, &test}) d->inputs = (d->inputs.array() - mean) / stddev;

  const std::size_t batch = 64;
  pl::TrainerOptions<M> o;
  o.optimizer.learning_rate = 1e-3;
  o.schedule = schedule::Cosine{.total = (train.size() + batch - 1) / batch, .min_factor = 0.0, .warmup = 0};
  o.batch_size = batch;
  o.seed = 1;
  o.micro_batches = 4;
  pl::Trainer<M> trainer(pl::Plan::automatic<CNN>(2), o);
  FitOptions fit;
  fit.log = nullptr;
  const History h = trainer.fit(train, &test, fit);
  REQUIRE(h.size() == 1);
  const double acc = *h[0].val_accuracy;
  MESSAGE("CNN on 2 stages, 1F1B, 4 micro-batches, Adam 1e-3 cosine, batch 64, 1 epoch: " << 100 * acc << "%");
  CHECK(h[0].step == (train.size() + batch - 1) / batch);
  CHECK(acc >= 0.84);
}
