// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Synchronous sparse training across processes gives the rows and the tower of one worker with an
// N-times batch.
//
// Every rank of a job started by flotilla-launch (TCP) or mpirun (MPI) runs this program:
//
//   flotilla_distributed_<backend> sparse-equivalence S      the last S ranks are row servers
//
// The workers train a small click-through model (embedding rows on the servers, a tower replicated
// on the workers) with batch B each. Afterwards every process trains the same model alone, in
// this process, with one worker of batch N*B and one server, and compares what it holds: worker 0
// the tower, each server its shard of the rows, which must be exactly the reference's rows that
// the server owns. The job exits non-zero when anything differs by more than float rounding.
//
//   flotilla-launch -n W+S --restarts 1 -- flotilla_distributed_tcp sparse-equivalence S DIR
//
// does the same with checkpoint sets in DIR every 5 steps, and the last server killing itself with
// SIGKILL in the first attempt, in the middle of its 300th row update: the launcher starts the
// job again, which resumes from the newest complete set and must end with the same rows and tower
// as the uninterrupted reference.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/sparse/trainer.hpp"
#include "../common/process_backend.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::sparse_equivalence {

namespace fl = flotilla;
using Tower = fl::Sequential<fl::Input<3 * 4 + 2>, fl::Dense<8>, fl::ReLU, fl::Dense<1>>;

static std::size_t env(const char* name) {
  const char* v = std::getenv(name);
  return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : 0;
}

/// Row Adagrad that, when armed, kills its process (SIGKILL: no handler, no cleanup, as kill -9
/// from outside) in the middle of its `kill_at`-th update.
struct KillableAdagrad : fl::optim::RowAdagrad {
  std::size_t kill_at = 0;
  std::shared_ptr<std::atomic<std::size_t>> applied = std::make_shared<std::atomic<std::size_t>>(0);
  void apply(std::span<float> row, std::span<float> state, std::span<const float> gradient) const {
    if (kill_at != 0 && ++*applied == kill_at) ::kill(::getpid(), SIGKILL);
    fl::optim::RowAdagrad::apply(row, state, gradient);
  }
};

using Model = fl::sparse::CtrModel<fl::sparse::Inputs<3, 2>, fl::Embedding<4>, Tower, KillableAdagrad, fl::optim::Adam,
                                   fl::sparse::Wide<fl::optim::RowAdagrad>>;
using Sync = fl::policy::Synchronous<fl::topology::ParameterServer>;

constexpr std::size_t global_batch = 24, epochs = 2;

static std::vector<fl::data::CtrExample> examples(std::size_t n) {
  fl::Generator g(11);
  std::vector<fl::data::CtrExample> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& x = out[i];
    const std::uint64_t a = g.below(30), b = g.below(200), c = g.below(5);
    x.offsets = {0, 1, 2, c == 0 ? 2u : 3u};
    x.ids = {a, b};
    if (c != 0) x.ids.push_back(c);
    x.dense = {static_cast<float>(g.uniform()), static_cast<float>(g.uniform())};
    const double logit = (a % 3 == 0 ? 1.0 : -0.5) + (b < 50 ? 1.0 : -1.0) + x.dense[1];
    x.label = g.uniform() < 1 / (1 + std::exp(-logit)) ? 1.0f : 0.0f;
    x.line = i + 1;
  }
  return out;
}

template <class B>
static fl::sparse::Trainer<Model, Sync, B> trainer(std::size_t workers, std::size_t servers, typename B::options o,
                                                   const std::filesystem::path& checkpoints = {}, std::size_t kill_at = 0) {
  Model m;
  m.row_optimizer.kill_at = kill_at;
  m.row_optimizer.learning_rate = 0.1;
  m.wide_optimizer.learning_rate = 0.1;
  m.tower_optimizer.learning_rate = 0.01;
  fl::sparse::TrainerOptions t;
  t.workers = workers;
  t.servers = servers;
  t.batch_size = global_batch / workers;
  t.seed = 5;
  if (!checkpoints.empty()) {
    t.checkpoints.directory = checkpoints;
    t.checkpoints.every_steps = 5;
    t.checkpoints.resume = true;
  }
  return fl::sparse::Trainer<Model, Sync, B>(m, t, std::move(o));
}

static int compare(const char* what, std::span<const float> got, std::span<const float> want, std::size_t& checked) {
  if (got.size() != want.size()) {
    std::fprintf(stderr, "%s: %zu values, the reference has %zu\n", what, got.size(), want.size());
    return 1;
  }
  for (std::size_t i = 0; i < got.size(); ++i, ++checked)
    if (std::abs(got[i] - want[i]) > 2e-5f * (1 + std::abs(want[i]))) {
      std::fprintf(stderr, "%s[%zu] = %.9g, the reference's is %.9g\n", what, i, static_cast<double>(got[i]),
                   static_cast<double>(want[i]));
      return 1;
    }
  return 0;
}

int run(const Program& self, int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s SERVERS [CHECKPOINT_DIRECTORY]\n", self.name().c_str());
    return 2;
  }
  const std::size_t servers = std::stoul(argv[1]);
  const std::filesystem::path checkpoints = argc == 3 ? argv[2] : "";
  const auto data = examples(480);
  const auto options = backend_options();
  const auto [rank, size] = rank_and_size();
  if (size <= servers) {
    std::fprintf(stderr, "sparse-equivalence: %zu ranks leave no workers beside %zu servers\n", size, servers);
    return 2;
  }
  const std::size_t workers = size - servers;
  const bool killer = !checkpoints.empty() && env("FLOTILLA_RESTART") == 0 && rank == size - 1;
  auto job = trainer<Backend>(workers, servers, options, checkpoints, killer ? 300 : 0);
  job.fit(data, {}, epochs);
  if (!checkpoints.empty() && env("FLOTILLA_RESTART") == 0 && rank == 0) {
    std::fprintf(stderr, "error: the first attempt finished: the server was never killed\n");
    return 3;
  }

  auto reference = trainer<fl::transport::InProcess>(1, 1, {.beside_launched_job = true});
  reference.fit(data, {}, epochs);

  std::size_t checked = 0;
  int failed = 0;
  if (rank == 0) failed |= compare("tower", job.tower_parameters(), reference.tower_parameters(), checked);
  if (rank >= workers) {
    const std::size_t shard = rank - workers;
    for (std::size_t table = 0; table < 2; ++table) {
      const auto mine = job.rows(table), all = reference.rows(table);
      std::size_t owned = 0;
      for (const auto& [key, row] : all) {
        if (fl::sparse::owner_of(key, servers) != shard) continue;
        ++owned;
        const auto it = mine.find(key);
        if (it == mine.end()) {
          std::fprintf(stderr, "server %zu lacks row %llu of table %zu\n", shard, static_cast<unsigned long long>(key), table);
          return 1;
        }
        failed |= compare("row", it->second, row, checked);
      }
      if (owned != mine.size()) {
        std::fprintf(stderr, "server %zu holds %zu rows of table %zu, the reference's rows it owns are %zu\n", shard,
                     mine.size(), table, owned);
        return 1;
      }
    }
  }
  if (failed) return 1;
  std::printf("rank %zu of %zu (%zu workers, %zu servers): %zu values equal one worker's with a %zux batch\n", rank, size,
              workers, servers, checked, workers);
  return checked > 0 || (rank > 0 && rank < workers) ? 0 : 1;
}

}  // namespace flotilla_test::sparse_equivalence
