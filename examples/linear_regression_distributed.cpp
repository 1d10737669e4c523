// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Linear regression with a known answer, on four workers.
//
// This is examples/linear_regression.cpp with one change: the Trainer's template arguments. The
// data, the model and the check are the same; four in-process workers each take a quarter of
// every batch, and the synchronous policy sums their gradients with a ring allreduce before each
// update, so the run is the single-process run (to float rounding) done by four.
#include <flotilla/flotilla.hpp>

#include <cmath>
#include <cstdio>

int main() {
  using Net = flotilla::Sequential<flotilla::Input<3>, flotilla::Dense<2>>;
  using Model = flotilla::Model<Net, flotilla::MSE, flotilla::optim::SGD>;

  const float A[2][3] = {{1.5f, -2.0f, 0.5f}, {0.0f, 3.0f, -1.0f}};
  const float b[2] = {0.25f, -0.75f};
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

  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = 0.1;
  options.batch_size = 8;  // per worker: 4 workers x 8 = the single-process example's 32
  options.workers = 4;
  options.seed = 1;
  // The one difference: synchronous updates over a ring of in-process workers.
  flotilla::Trainer<Model, flotilla::policy::Synchronous<flotilla::topology::Ring>, flotilla::transport::InProcess> trainer(
      options);
  flotilla::FitOptions fit;
  fit.epochs = 20;
  fit.log = nullptr;
  const auto history = trainer.fit(data, nullptr, fit);
  std::printf("4 workers, final training loss (MSE): %.6f (noise floor %.6f)\n", history.back().train_loss, 0.01 * 0.01);

  const auto p = trainer.parameters();
  double worst = 0;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) worst = std::max(worst, std::abs(static_cast<double>(p[static_cast<std::size_t>(i * 2 + o)] - A[o][i])));
  for (int o = 0; o < 2; ++o) worst = std::max(worst, std::abs(static_cast<double>(p[static_cast<std::size_t>(6 + o)] - b[o])));
  std::printf("largest error against the true map: %.4f -> %s\n", worst, worst < 0.01 ? "recovered" : "NOT recovered");
  return worst < 0.01 ? 0 : 1;
}
