// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// GPU training throughput: Trainer::fit of a Model<..., device::Cuda> for a fixed number of steps,
// on synthetic Fashion-MNIST-shaped data (28x28 images, 10 classes; the values do not change the
// work). Prints one JSON line: {"model", "batch", "steps", "seconds", "samples_per_s", "device"}.
//
//   flotilla_gpu_train_bench --model mlp|cnn|resnet --batch 64 --steps 500 --warmup 50
//
// The ResNet is examples/fashion_mnist_resnet.hpp's with BatchNorm2D (one GPU: its batch's
// statistics).
//
// Driven by bench/gpu_train_vs_pytorch.py, which runs PyTorch on the same GPU in the same run.
// Figures: docs/benchmarks.md, "GPU" (an H100, against PyTorch).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "flotilla/cuda/engine.hpp"
#include "flotilla/flotilla.hpp"
#include "../../examples/fashion_mnist_resnet.hpp"

namespace {

using namespace flotilla;
using Mlp = Sequential<Input<784>, Dense<256>, ReLU, Dense<128>, ReLU, Dense<10>>;
using Cnn = Sequential<Input<1, 28, 28>, Conv2D<32, 5>, ReLU, MaxPool2D<2>, Conv2D<64, 5>, ReLU, MaxPool2D<2>, Flatten,
                       Dense<10>>;
using Resnet = example::resnet::Net<BatchNorm2D<>>;

data::Dataset<float> synthetic(std::size_t n) {
  Generator g(7);
  data::Dataset<float> d;
  d.name = "synthetic";
  d.classes = 10;
  d.inputs.resize(784, static_cast<Eigen::Index>(n));
  d.labels.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    d.labels[s] = static_cast<std::int32_t>(g.below(10));
    for (Eigen::Index i = 0; i < 784; ++i) d.inputs(i, static_cast<Eigen::Index>(s)) = static_cast<float>(g.uniform<double>());
  }
  return d;
}

template <class Net>
double run(std::size_t batch, std::size_t steps, std::size_t warmup) {
  using M = Model<Net, SoftmaxCrossEntropy, optim::Momentum, float, device::Cuda>;
  TrainerOptions<M> o;
  o.batch_size = batch;
  o.optimizer.learning_rate = 0.01;
  o.prefetch = 2;
  Trainer<M> t(o);
  const auto data = synthetic(batch * 64);
  FitOptions f;
  f.log = nullptr;
  f.epochs = 1000000;
  f.max_steps = warmup;
  t.fit(data, nullptr, f);
  (void)t.parameters();  // waits for the GPU
  f.max_steps = steps;
  const auto t0 = std::chrono::steady_clock::now();
  t.fit(data, nullptr, f);
  (void)t.parameters();  // the last update has landed
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "mlp";
  std::size_t batch = 64, steps = 500, warmup = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") {
      model = v;
    } else if (k == "--batch") {
      batch = std::stoul(v);
    } else if (k == "--steps") {
      steps = std::stoul(v);
    } else if (k == "--warmup") {
      warmup = std::stoul(v);
    } else {
      std::cerr << "flotilla_gpu_train_bench: unknown flag " << k << " (--model mlp|cnn|resnet, --batch, --steps, --warmup)\n";
      return 2;
    }
  }
  if (const auto reason = cuda::no_device_reason()) {
    std::cerr << "flotilla_gpu_train_bench: " << *reason << '\n';
    return 77;
  }
  try {
    double seconds = 0;
    if (model == "mlp") {
      seconds = run<Mlp>(batch, steps, warmup);
    } else if (model == "cnn") {
      seconds = run<Cnn>(batch, steps, warmup);
    } else if (model == "resnet") {
      seconds = run<Resnet>(batch, steps, warmup);
    } else {
      std::cerr << "flotilla_gpu_train_bench: --model must be mlp, cnn or resnet, not " << model << '\n';
      return 2;
    }
    std::printf("{\"model\": \"%s\", \"batch\": %zu, \"steps\": %zu, \"seconds\": %.6f, \"samples_per_s\": %.1f, \"device\": \"%s\"}\n",
                model.c_str(), batch, steps, seconds, static_cast<double>(batch * steps) / seconds,
                cuda::device_description().c_str());
  } catch (const std::exception& e) {
    std::cerr << "flotilla_gpu_train_bench: " << e.what() << '\n';
    return 1;
  }
}
