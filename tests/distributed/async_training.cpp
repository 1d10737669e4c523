// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Asynchronous and bounded-staleness training across processes, on parameter servers: every worker
// finishes, the staleness stays within what the policy allows, and the model learns as a single
// worker does. Asynchronous updates have no single-worker equivalent to compare with bit for bit;
// what must hold is that the job completes and converges.
//
// Every rank of a job started by flotilla-launch (TCP) or mpirun (MPI) runs this program; the last
// S ranks are the servers. Run as `flotilla_distributed_<backend> async-training POLICY S`:
//
//   async      policy::Asynchronous
//   staleness  policy::BoundedStaleness<1>: no worker more than one step ahead of the slowest
//
// Each worker checks its history: 4 epochs, the training loss of the last under half that of the
// first, the validation accuracy (300 held-out samples) at least 90%, and for `staleness` no step
// taken more than 1 push ahead of the slowest worker (the servers' report). Rank 0 prints the
// figures, with the largest staleness (server updates between a worker's pull and its push).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"
#include "../common/process_backend.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::async_training {

using flotilla_test::Backend;
using flotilla_test::backend_options;
using flotilla_test::rank_and_size;

using namespace flotilla;
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Momentum>;

template <class Policy>
static int learns(std::size_t servers, const char* what, std::size_t max_ahead) {
  const auto all = flotilla_test::blobs<float>(1200, 17);
  const auto train = data::subset(all, 0, 900), validation = data::subset(all, 900, 300);
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;  // each worker's push is an update of its own
  o.batch_size = 16;
  o.servers = servers;
  o.seed = 29;
  o.workers = 0;  // as launched
  Trainer<M, Policy, Backend> trainer(o, Policy{}, backend_options());
  FitOptions f;
  f.epochs = 4;
  f.log = nullptr;
  const auto history = trainer.fit(train, &validation, f);
  const auto [rank, world] = rank_and_size();
  if (rank >= world - servers) return 0;  // a server: its workers judge the run
  if (history.size() != f.epochs) {
    std::printf("%s: rank %zu recorded %zu epochs, not %zu\n", what, rank, history.size(), f.epochs);
    return 1;
  }
  double staleness = 0, ahead = 0;
  for (const auto& record : history)
    for (const auto& [key, value] : record.extra) {
      if (key == "max_staleness") staleness = std::max(staleness, value);
      if (key == "max_steps_ahead") ahead = std::max(ahead, value);
    }
  const double first = history.front().train_loss, last = history.back().train_loss;
  const double accuracy = history.back().val_accuracy.value_or(0);
  if (rank == 0)
    std::printf("%s, %zu workers on %zu servers: training loss %.4f -> %.4f, validation accuracy %.1f%%, "
                "largest staleness %g, most steps ahead %g\n",
                what, world - servers, servers, first, last, 100 * accuracy, staleness, ahead);
  if (!(last < 0.5 * first) || accuracy < 0.9 || ahead > static_cast<double>(max_ahead)) {
    std::printf("%s: rank %zu did not learn as it should: loss %g -> %g, accuracy %g, steps ahead %g (at most %zu)\n",
                what, rank, first, last, accuracy, ahead, max_ahead);
    return 1;
  }
  return 0;
}

int run(const Program& self, int argc, char** argv) {
  try {
    const std::string policy = argc > 1 ? argv[1] : "";
    const std::size_t servers = argc > 2 ? static_cast<std::size_t>(std::stoul(argv[2])) : 1;
    if (policy == "async") return learns<policy::Asynchronous<>>(servers, "asynchronous", static_cast<std::size_t>(-1));
    if (policy == "staleness") return learns<policy::BoundedStaleness<1>>(servers, "bounded staleness 1", 1);
    std::fprintf(stderr, "usage: %s async | staleness SERVERS\n", self.name().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test::async_training
