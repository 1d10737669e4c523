// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The translation unit bench/build_time.py compiles: the single header and a trainer of the CNN of
// the README's first network, as a user's training program would be. Compiled, never run.
// Compiled header-only, it carries flotilla's model-independent code as well; with
// FLOTILLA_SEPARATE_COMPILATION, only declarations of it (include/flotilla/core/linkage.hpp).
#include <flotilla.hpp>

#include <cstdio>

namespace fl = flotilla;

using Net = fl::Sequential<fl::Input<1, 28, 28>,                         //
                           fl::Conv2D<32, 5>, fl::ReLU, fl::MaxPool2D<2>,  //
                           fl::Conv2D<64, 5>, fl::ReLU, fl::MaxPool2D<2>,  //
                           fl::Flatten, fl::Dense<10>>;
using CnnModel = fl::Model<Net, fl::SoftmaxCrossEntropy, fl::optim::Momentum>;

int main() {
  namespace fm = fl::data::fashion_mnist;
  const auto train = fm::load<float>(fm::Split::train);
  const auto test = fm::load<float>(fm::Split::test);
  fl::TrainerOptions<CnnModel> options;
  options.optimizer.learning_rate = 0.05;
  options.batch_size = 64;
  options.workers = 2;
  fl::Trainer<CnnModel> trainer(options);
  fl::FitOptions fit;
  fit.epochs = 1;
  fit.metrics_file = "metrics.jsonl";
  fit.plot_file = "curves.svg";
  fit.trace_file = "trace.json";
  trainer.fit(train, &test, fit);
  std::printf("%s", trainer.evaluate(test).confusion->report(fm::class_names).c_str());
  trainer.save("cnn.ckpt");
}
