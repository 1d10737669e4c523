// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// What flotilla's training benchmarks share: the three Fashion-MNIST models the PyTorch comparisons
// use, the data (Fashion-MNIST, or random data of the same shape for smoke tests), clocks, and the
// line protocol the Python drivers speak with a benchmark kept running between timed runs.
#pragma once

#include <flotilla/flotilla.hpp>

#include "../../examples/fashion_mnist_resnet.hpp"
#include "../../examples/flag_help.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

namespace bench {

// The MLP and CNN of docs/benchmarks.md, with PyTorch's default weight initialisation family
// (init::LeCunUniform: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases 0, which the PyTorch side matches).
// Initialisation does not change the cost of a step, only the curves.
using Init = flotilla::init::LeCunUniform;
using MlpNet = flotilla::Sequential<flotilla::Input<784>,                              //
                                    flotilla::Dense<256, Init>, flotilla::ReLU,        //
                                    flotilla::Dense<128, Init>, flotilla::ReLU,        //
                                    flotilla::Dense<10, Init>>;
using CnnNet = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                                 //
                                    flotilla::Conv2D<32, 5, 1, 0, Init>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                    flotilla::Conv2D<64, 5, 1, 0, Init>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                    flotilla::Flatten, flotilla::Dense<10, Init>>;
using Mlp = flotilla::Model<MlpNet, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum>;
using Cnn = flotilla::Model<CnnNet, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum>;
// The residual network of examples/fashion_mnist_resnet.cpp (one worker: its batch statistics).
using Resnet = flotilla::Model<example::resnet::Net<flotilla::BatchNorm2D<>>, flotilla::SoftmaxCrossEntropy,
                               flotilla::optim::Momentum>;

/// Fashion-MNIST's `split` from `dir`, or, when `synthetic` > 0, that many random images with
/// random labels (for smoke tests that must not depend on the data set being installed).
inline flotilla::data::Dataset<float> load(flotilla::data::Split split, const std::filesystem::path& dir,
                                           std::size_t synthetic, std::uint64_t seed = 7) {
  if (synthetic == 0) return flotilla::data::fashion_mnist::load<float>(split, dir);
  flotilla::data::Dataset<float> d;
  d.inputs.resize(784, static_cast<Eigen::Index>(synthetic));
  flotilla::Generator g(seed + (split == flotilla::data::Split::train ? 0 : 1));
  for (Eigen::Index j = 0; j < d.inputs.cols(); ++j)
    for (Eigen::Index i = 0; i < d.inputs.rows(); ++i) d.inputs(i, j) = g.uniform<float>(0.0f, 1.0f);
  d.labels.resize(synthetic);
  for (auto& l : d.labels) l = static_cast<std::int32_t>(g.uniform<double>(0.0, 10.0)) % 10;
  d.classes = 10;
  d.name = split == flotilla::data::Split::train ? "synthetic/train" : "synthetic/test";
  return d;
}

/// The first `batches * batch` samples: every step of a throughput run then has a full batch, as on
/// the PyTorch side (which draws full batches from a permutation of the same samples).
inline flotilla::data::Dataset<float> whole_batches(const flotilla::data::Dataset<float>& d, std::size_t batch) {
  const std::size_t n = d.size() / batch * batch;
  if (n == 0) throw flotilla::ConfigError("fewer samples than one batch");
  return n == d.size() ? d : flotilla::data::subset(d, 0, n);
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// CPU time of the whole process (all threads), seconds.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace bench
