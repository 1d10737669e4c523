// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Linear regression with a known answer.
//
// We make up a linear map y = A x + b with A and b chosen here, sample noisy (x, y) pairs from it,
// and let flotilla fit a single Dense layer to them. If the machinery (forward, loss gradient,
// backward, optimizer, data loader) is right, the layer's weights come back as A and its bias as
// b, to within the noise. The program prints both and exits non-zero if they differ.
#include <flotilla/flotilla.hpp>

#include <cmath>
#include <cstdio>

int main() {
  // The model: 3 inputs -> 2 outputs, no hidden layer; squared error; plain SGD.
  using Net = flotilla::Sequential<flotilla::Input<3>, flotilla::Dense<2>>;
  using Model = flotilla::Model<Net, flotilla::MSE, flotilla::optim::SGD>;

  // The answer we hope to recover.
  const float A[2][3] = {{1.5f, -2.0f, 0.5f}, {0.0f, 3.0f, -1.0f}};
  const float b[2] = {0.25f, -0.75f};

  // 4096 samples, x uniform in [-1, 1]^3, y = A x + b + noise (standard deviation 0.01).
  flotilla::Generator rng(7);
  flotilla::data::Dataset<float> data;
  data.name = "synthetic linear map";
  data.inputs.resize(3, 4096);
  data.targets.resize(2, 4096);
  for (Eigen::Index s = 0; s < data.inputs.cols(); ++s) {
    for (int i = 0; i < 3; ++i) data.inputs(i, s) = rng.uniform(-1.0f, 1.0f);
    for (int o = 0; o < 2; ++o) {
      float y = b[o] + 0.01f * rng.normal<float>();
      for (int i = 0; i < 3; ++i) y += A[o][i] * data.inputs(i, s);
      data.targets(o, s) = y;
    }
  }

  // Train: batches of 32, learning rate 0.1, 20 passes over the data.
  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = 0.1;
  options.batch_size = 32;
  options.seed = 1;
  flotilla::Trainer<Model> trainer(options);
  flotilla::FitOptions fit;
  fit.epochs = 20;
  fit.log = nullptr;
  const auto history = trainer.fit(data, nullptr, fit);
  std::printf("final training loss (MSE): %.6f (noise floor %.6f)\n", history.back().train_loss, 0.01 * 0.01);

  // Dense stores W (outputs x inputs, column-major) then b in the flat parameter buffer.
  const auto p = trainer.parameters();
  double worst = 0;
  std::printf("%-8s %10s %10s\n", "", "true", "fitted");
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 3; ++i) {
      const float w = p[static_cast<std::size_t>(i * 2 + o)];
      std::printf("A[%d][%d] %10.4f %10.4f\n", o, i, A[o][i], w);
      worst = std::max(worst, std::abs(static_cast<double>(w - A[o][i])));
    }
  }
  for (int o = 0; o < 2; ++o) {
    const float fitted = p[static_cast<std::size_t>(6 + o)];
    std::printf("b[%d]    %10.4f %10.4f\n", o, b[o], fitted);
    worst = std::max(worst, std::abs(static_cast<double>(fitted - b[o])));
  }
  std::printf("largest error: %.4f -> %s\n", worst, worst < 0.01 ? "recovered" : "NOT recovered");
  return worst < 0.01 ? 0 : 1;
}
