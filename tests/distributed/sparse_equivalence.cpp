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
#include <cmath>
#include <cstdio>
#include <map>
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
using Model = fl::sparse::CtrModel<fl::sparse::Inputs<3, 2>, fl::Embedding<4>, Tower, fl::optim::RowAdagrad, fl::optim::Adam,
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
static fl::sparse::Trainer<Model, Sync, B> trainer(std::size_t workers, std::size_t servers, typename B::options o) {
  Model m;
  m.row_optimizer.learning_rate = 0.1;
  m.wide_optimizer.learning_rate = 0.1;
  m.tower_optimizer.learning_rate = 0.01;
  fl::sparse::TrainerOptions t;
  t.workers = workers;
  t.servers = servers;
  t.batch_size = global_batch / workers;
  t.seed = 5;
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
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SERVERS\n", self.name().c_str());
    return 2;
  }
  const std::size_t servers = std::stoul(argv[1]);
  const auto data = examples(480);
  const auto options = backend_options();
  std::size_t rank = 0, size = 0;
#if defined(FLOTILLA_TEST_TCP)
  rank = options.rank;
  size = options.world_size;
#else
  fl::transport::mpi::detail::mpi_ensure_initialized();
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rank = static_cast<std::size_t>(r);
  size = static_cast<std::size_t>(n);
#endif
  if (size <= servers) {
    std::fprintf(stderr, "sparse-equivalence: %zu ranks leave no workers beside %zu servers\n", size, servers);
    return 2;
  }
  const std::size_t workers = size - servers;
  auto job = trainer<Backend>(workers, servers, options);
  job.fit(data, {}, epochs);

  auto reference = trainer<fl::transport::InProcess>(1, 1, {});
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
