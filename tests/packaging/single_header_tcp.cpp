// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The single header, then the TCP transport's separate header, in one translation unit: the
// headers the two share are guarded, so the second include of each is empty. A model trained
// through the single header's Trainer, then a TCP job of one rank.
#include <flotilla.hpp>
#include <flotilla/transport/tcp.hpp>

#include <cstddef>
#include <cstdio>
#include <vector>

int main() {
  // A linear map, learnt through the single header's Trainer.
  using Model = flotilla::Model<flotilla::Sequential<flotilla::Input<2>, flotilla::Dense<1>>, flotilla::MSE, flotilla::optim::SGD>;
  flotilla::data::Dataset<float> data;
  data.inputs.resize(2, 256);
  data.targets.resize(1, 256);
  flotilla::Generator rng(3);
  for (Eigen::Index s = 0; s < data.inputs.cols(); ++s) {
    data.inputs(0, s) = rng.uniform(-1.0f, 1.0f);
    data.inputs(1, s) = rng.uniform(-1.0f, 1.0f);
    data.targets(0, s) = 2.0f * data.inputs(0, s) - data.inputs(1, s);
  }
  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = 0.1;
  options.batch_size = 16;
  flotilla::Trainer<Model> trainer(options);
  flotilla::FitOptions fit;
  fit.epochs = 20;
  fit.log = nullptr;
  const auto history = trainer.fit(data, nullptr, fit);
  if (!(history.back().train_loss < 1e-4)) {
    std::printf("the linear map was not learnt: loss %g\n", history.back().train_loss);
    return 1;
  }

  namespace tr = flotilla::transport;
  std::vector<std::byte> out(16, std::byte{42}), in(16);
  tr::Tcp::run(tr::TcpOptions{}, 1, [&](tr::TcpEndpoint& e) { e.sendrecv(0, 7, out, 0, in); });
  if (in != out) return 1;
  std::puts("the single header and the TCP transport's header in one program: trained, and ran a job");
  return 0;
}
