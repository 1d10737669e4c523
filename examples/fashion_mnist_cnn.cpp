// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A convolutional network on Fashion-MNIST, trained with Adam on one process:
//   conv 5x5, 32 filters -> ReLU -> max-pool 2x2 -> conv 5x5, 64 filters -> ReLU -> max-pool 2x2
//   -> flatten -> dense 10.
// Input<1, 28, 28> is one grey channel of 28x28; the compiler works out every shape after it
// (24x24x32, 12x12x32, 8x8x64, 4x4x64, 1024, 10). Run with --help for the flags.
#include "fashion_mnist_common.hpp"

using Net = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                 //
                                 flotilla::Conv2D<32, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Conv2D<64, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Flatten, flotilla::Dense<10>>;
using Model = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam>;

int main(int argc, char** argv) {
  return example::guarded([&] {
    example::Settings s{.data_dir = {}, .epochs = 5, .batch = 64, .learning_rate = 1e-3, .momentum = 0.9,
                        .threads = 2, .seed = 1, .metrics = "cnn_metrics.jsonl", .plot = "cnn_curves.svg",
                        .checkpoint = {}, .resume = {}};
    if (!example::parse_flags(argc, argv, "fashion_mnist_cnn", "train a CNN on Fashion-MNIST", s)) return 0;
    return example::train_and_report<Model>(s);
  });
}
