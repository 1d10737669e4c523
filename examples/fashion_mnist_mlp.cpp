// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A multi-layer perceptron on Fashion-MNIST: 784 -> 256 -> 128 -> 10 with ReLU, trained with SGD
// and momentum on one process. Run it with --help for the flags; with none it finds the data where
// Debian's dataset-fashion-mnist package puts it and trains for 10 epochs.
//
// The whole model is one type. Shapes flow from Input<784> through each layer at compile time,
// so a mistake such as Dense<10> after an image-shaped layer is a compile error, not a crash.
#include "fashion_mnist_common.hpp"

using Net = flotilla::Sequential<flotilla::Input<784>,          // a 28x28 image, flattened
                                 flotilla::Dense<256>, flotilla::ReLU,  //
                                 flotilla::Dense<128>, flotilla::ReLU,  //
                                 flotilla::Dense<10>>;                  // one score per class
// Scored by softmax cross-entropy, updated by SGD with momentum, in float.
using Model = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum>;

int main(int argc, char** argv) {
  return example::guarded([&] {
    example::Settings s{.data_dir = {}, .epochs = 10, .batch = 64, .learning_rate = 0.05, .momentum = 0.9,
                        .threads = 1, .seed = 1, .metrics = "mlp_metrics.jsonl", .plot = "mlp_curves.svg",
                        .checkpoint = {}, .resume = {}};
    if (!example::parse_flags(argc, argv, "fashion_mnist_mlp", "train an MLP on Fashion-MNIST", s)) return 0;
    return example::train_and_report<Model>(s);
  });
}
