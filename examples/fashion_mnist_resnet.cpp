// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A residual network with batch normalisation on Fashion-MNIST, in the shape of He et al.'s CIFAR
// ResNets (fashion_mnist_resnet.hpp), trained with SGD, momentum 0.9, weight decay on the weights
// alone and a cosine schedule.
//
//   fashion_mnist_resnet                 one worker on --threads cores
//   fashion_mnist_resnet --workers 2     two in-process workers; SyncBatchNorm2D takes its statistics
//                                        over both workers' samples, so this is the one-worker run
//                                        with a twice larger batch
//
// Run with --help for the flags.
#include "fashion_mnist_common.hpp"
#include "fashion_mnist_resnet.hpp"

namespace fl = flotilla;

// Statistics over the global batch: with one worker, its batch; with several, all of theirs.
using Net = example::resnet::Net<fl::SyncBatchNorm2D>;
using Model = fl::Model<Net, fl::SoftmaxCrossEntropy, fl::optim::Momentum>;

int main(int argc, char** argv) {
  return example::guarded([&] {
    example::Settings s{.data_dir = {}, .epochs = 10, .batch = 128, .learning_rate = 0.1, .momentum = 0.9,
                        .threads = 2, .seed = 1, .metrics = "resnet_metrics.jsonl", .plot = "resnet_curves.svg",
                        .checkpoint = {}, .resume = {}, .schedule = "cosine", .weight_decay = 5e-4, .workers = 1};
    if (!example::parse_flags(argc, argv, "fashion_mnist_resnet", "train a residual network with batch normalisation on Fashion-MNIST", s))
      return 0;
    return example::train_and_report<Model>(s);
  });
}
