// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The Fashion-MNIST examples on a GPU: the MLP of fashion_mnist_mlp.cpp, the CNN of
// fashion_mnist_cnn.cpp or the ResNet of fashion_mnist_resnet.cpp, with the same settings, trained
// through the CUDA backend. The models differ from the CPU examples' in one template argument,
// device::Cuda. Run with --help for the flags.
//
//   fashion_mnist_gpu --model mlp        # SGD with momentum 0.9, lr 0.05 with cosine, batch 64, 10 epochs
//   fashion_mnist_gpu --model cnn        # Adam, lr 1e-3 with cosine, batch 64, 5 epochs
//   fashion_mnist_gpu --model resnet     # SGD with momentum 0.9, lr 0.1 with cosine, weight decay 5e-4,
//                                        # batch 128, 10 epochs
#include <flotilla/cuda/engine.hpp>  // first: the CUDA engine for device::Cuda models

#include <cstring>
#include <vector>

#include "fashion_mnist_common.hpp"
#include "fashion_mnist_resnet.hpp"

using Mlp = flotilla::Sequential<flotilla::Input<784>, flotilla::Dense<256>, flotilla::ReLU, flotilla::Dense<128>,
                                 flotilla::ReLU, flotilla::Dense<10>>;
using Cnn = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                 //
                                 flotilla::Conv2D<32, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Conv2D<64, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Flatten, flotilla::Dense<10>>;
using MlpOnGpu = flotilla::Model<Mlp, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum, float, flotilla::device::Cuda>;
using CnnOnGpu = flotilla::Model<Cnn, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam, float, flotilla::device::Cuda>;
using ResnetOnGpu = flotilla::Model<example::resnet::Net<flotilla::SyncBatchNorm2D>, flotilla::SoftmaxCrossEntropy,
                                    flotilla::optim::Momentum, float, flotilla::device::Cuda>;

int main(int argc, char** argv) {
  // --model comes first and picks the defaults; every other flag is the CPU examples'.
  const bool cnn = argc > 2 && std::strcmp(argv[1], "--model") == 0 && std::strcmp(argv[2], "cnn") == 0;
  const bool mlp = argc > 2 && std::strcmp(argv[1], "--model") == 0 && std::strcmp(argv[2], "mlp") == 0;
  const bool resnet = argc > 2 && std::strcmp(argv[1], "--model") == 0 && std::strcmp(argv[2], "resnet") == 0;
  if (!cnn && !mlp && !resnet) {
    std::fprintf(stderr, "usage: fashion_mnist_gpu --model mlp|cnn|resnet [flags; --help lists them]\n");
    return 2;
  }
  if (const auto reason = flotilla::cuda::no_device_reason()) {
    std::fprintf(stderr, "fashion_mnist_gpu: %s\n", reason->c_str());
    return 77;
  }
  return example::guarded([&] {
    example::Settings s;
    s.epochs = cnn ? 5 : 10;
    s.batch = 64;
    s.learning_rate = cnn ? 1e-3 : 0.05;
    s.momentum = 0.9;
    s.threads = 1;
    s.seed = 1;
    s.metrics = cnn ? "gpu_cnn_metrics.jsonl" : "gpu_mlp_metrics.jsonl";
    s.plot = cnn ? "gpu_cnn_curves.svg" : "gpu_mlp_curves.svg";
    if (resnet) {
      s.batch = 128;
      s.learning_rate = 0.1;
      s.weight_decay = 5e-4;
      s.metrics = "gpu_resnet_metrics.jsonl";
      s.plot = "gpu_resnet_curves.svg";
    }
    std::printf("%s on %s\n", cnn ? "CNN" : resnet ? "ResNet" : "MLP", flotilla::cuda::device_description().c_str());
    std::vector<char*> rest{argv[0]};  // the flags after --model M
    rest.insert(rest.end(), argv + 3, argv + argc);
    if (!example::parse_flags(static_cast<int>(rest.size()), rest.data(), "fashion_mnist_gpu",
                              "train the MLP, the CNN or the ResNet on Fashion-MNIST on a GPU", s))
      return 0;
    if (resnet) return example::train_and_report<ResnetOnGpu>(s);
    return cnn ? example::train_and_report<CnnOnGpu>(s) : example::train_and_report<MlpOnGpu>(s);
  });
}
