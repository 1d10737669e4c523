// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The residual network of examples/fashion_mnist_resnet.cpp learns Fashion-MNIST: one epoch on two
// in-process workers whose SyncBatchNorm2D layers take their statistics over both workers' samples
// (the bar is below the example's full-length figure in docs/networks.md, so that CI stays short).
#include <doctest/doctest.h>

#include <cmath>

#include "../../examples/fashion_mnist_resnet.hpp"
#include "flotilla/flotilla.hpp"

namespace accuracy_resnet {

using namespace flotilla;
namespace fm = data::fashion_mnist;

TEST_CASE("the ResNet with synchronised BatchNorm learns Fashion-MNIST: 87% after 1 epoch on 2 workers") {
  auto train = fm::load<float>(fm::Split::train), test = fm::load<float>(fm::Split::test);
  const float mean = train.inputs.mean();
  const float stddev = std::sqrt((train.inputs.array() - mean).square().mean());
  for (auto* d : {&train, &test}) d->inputs = (d->inputs.array() - mean) / stddev;

  using M = Model<example::resnet::Net<SyncBatchNorm2D>, SoftmaxCrossEntropy, optim::Momentum>;
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.1;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 5e-4;
  o.optimizer.decay_biases = false;
  o.optimizer.decay_normalization = false;
  o.batch_size = 64;  // per worker: 128 a step
  o.workers = 2;
  o.seed = 1;
  o.schedule = schedule::Cosine{.total = (train.size() + 127) / 128, .min_factor = 0.0, .warmup = 0};
  Trainer<M> t(o);
  FitOptions f;
  f.epochs = 1;
  f.log = nullptr;
  t.fit(train, nullptr, f);
  const double acc = t.evaluate(test).accuracy;
  MESSAGE("ResNet (176k parameters), 2 workers x 64, SGD momentum 0.9, lr 0.1 cosine, weight decay 5e-4, 1 epoch: "
          << 100 * acc << "%");
  CHECK(acc >= 0.87);
}

}  // namespace accuracy_resnet
