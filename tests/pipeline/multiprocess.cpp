// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A pipelined step over processes computes one worker's gradients: every rank of a job started by
// flotilla-launch (TCP) or mpirun (MPI) runs this program, builds its stage of a D x P layout, and
// compares its gradient slice with the whole network's, which it computes itself on the whole batch.
// With a fifth argument, `trainer`, it runs pipeline::Trainer::fit instead (this process's rank)
// and compares the gathered parameters and the History with flotilla::Trainer's on D workers,
// which it runs in-process itself.
//
//   flotilla-launch -n <D*P> -- flotilla_distributed_tcp pipeline <P> <D> <1f1b|gpipe> <M> [trainer]
//   mpirun -n <D*P> flotilla_distributed_mpi pipeline <P> <D> <1f1b|gpipe> <M> [trainer]
//
// `pipeline stall <P> <D> <K>` (for bench/reliability/stall_detection.py): every rank computes
// gradients step after step, and rank K stops itself (SIGSTOP) in its fourth step, printing
// "stopping at <ms>"; every other rank must fail, and prints "caught at <ms>: <error>" (ms of the
// steady clock, which the processes of one host share).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"
#include "../common/process_backend.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::pipeline_processes {

using flotilla_test::Backend;
using flotilla_test::backend_options;

using namespace flotilla;
namespace pl = flotilla::pipeline;
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, double>;

/// Whether this process wrote its rank's timeline and step log, under its rank's names, with
/// `steps` steps of its stage; removes them.
static bool check_rank_files(const FitOptions& f, std::size_t P, std::size_t D, std::uint64_t steps) {
  std::vector<std::size_t> found;
  for (std::size_t k = 0; k < P * D; ++k)
    if (std::filesystem::exists(flotilla::detail::per_rank_file(f.trace_file, k))) found.push_back(k);
  if (found.size() != 1) {
    std::fprintf(stderr, "error: %zu timelines at %s[.rank<k>], not one\n", found.size(), f.trace_file.c_str());
    return false;
  }
  const std::size_t rank = found[0];
  const auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::filesystem::remove(path);
    return lines;
  };
  const std::string pid = "\"pid\":" + std::to_string(rank) + ",";
  std::size_t forwards = 0, backwards = 0, others = 0;
  for (const auto& line : read(flotilla::detail::per_rank_file(f.trace_file, rank))) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    if (line.find(pid) == std::string::npos) ++others;
    forwards += line.find("\"name\":\"forward ") != std::string::npos ? 1 : 0;
    backwards += line.find("\"name\":\"backward ") != std::string::npos ? 1 : 0;
  }
  const auto steps_logged = read(flotilla::detail::per_rank_file(f.step_log_file, rank));
  std::size_t wrong_lines = 0;
  const std::string who = "{\"rank\":" + std::to_string(rank) + ",\"stage\":" + std::to_string(rank % P) +
                          ",\"replica\":" + std::to_string(rank / P) + ",";
  for (const auto& line : steps_logged) wrong_lines += line.rfind(who, 0) == 0 ? 0 : 1;
  const bool ok = forwards > 0 && forwards == backwards && others == 0 && steps_logged.size() == steps && wrong_lines == 0;
  std::printf("rank %zu: timeline of %zu forwards and %zu backwards (%zu of other ranks), step log of %zu lines for %llu "
              "steps (%zu not this rank's): %s\n",
              rank, forwards, backwards, others, steps_logged.size(), static_cast<unsigned long long>(steps), wrong_lines,
              ok ? "as expected" : "wrong");
  return ok;
}

/// Two epochs of 30 samples in batches of 4 per replica, through pipeline::Trainer over the
/// backend, against flotilla::Trainer on D in-process workers: 0 when they agree.
static int train_and_compare(std::size_t P, std::size_t D, pl::Schedule schedule, std::size_t micro) {
  const auto train = flotilla_test::blobs<double>(30, 12), validation = flotilla_test::blobs<double>(20, 13);
  FitOptions quiet;
  quiet.epochs = 2;
  quiet.log = nullptr;
  TrainerOptions<M> ro;
  ro.optimizer.learning_rate = 0.1;
  ro.batch_size = 4;
  ro.seed = 5;
  ro.workers = D;
  Trainer<M> reference(ro, {}, transport::InProcessOptions{.beside_launched_job = true});
  const History want = reference.fit(train, &validation, quiet);

  pl::TrainerOptions<M> po;
  po.optimizer.learning_rate = 0.1;
  po.batch_size = 4;
  po.seed = 5;
  po.micro_batches = micro;
  po.pipeline_schedule = schedule;
  po.replicas = D;
  pl::Trainer<M, Backend> piped(pl::Plan::automatic<Net, double>(P), po, backend_options());
  // With a timeline and a step log, which each process writes for its rank: rank k's at the path +
  // ".rank<k>". The paths carry this process's id, so the processes' files do not meet.
  FitOptions traced = quiet;
  const std::string base = (std::filesystem::temp_directory_path() / ("flotilla_pipeline_" + std::to_string(::getpid()))).string();
  traced.trace_file = base + ".trace.json";
  traced.step_log_file = base + ".steps.jsonl";
  const History got = piped.fit(train, &validation, traced);
  const bool files_ok = check_rank_files(traced, P, D, got.back().step);
  double diff = 0;
  for (std::size_t i = 0; i < reference.parameters().size(); ++i)
    diff = std::max(diff, std::abs(piped.parameters()[i] - reference.parameters()[i]));
  bool same = got.size() == want.size();
  for (std::size_t i = 0; same && i < got.size(); ++i)
    same = got[i].step == want[i].step && std::abs(got[i].train_loss - want[i].train_loss) <= 1e-10 &&
           got[i].train_accuracy == want[i].train_accuracy && got[i].val_accuracy == want[i].val_accuracy &&
           std::abs(*got[i].val_loss - *want[i].val_loss) <= 1e-10;
  std::printf("pipeline::Trainer, %zu stages x %zu replicas, %s, M=%zu: max |parameter difference| %.3g, history %s\n", P, D,
              std::string(pl::name(schedule)).c_str(), micro, diff, same ? "the same" : "differs");
  return diff <= 1e-10 && same && files_ok ? 0 : 1;
}

/// The `stall` mode (see the file comment): exits 1 unless this rank's steps failed.
static int stall(std::size_t P, std::size_t D, std::size_t victim) {
  const std::size_t n = 16;
  const auto d = flotilla_test::blobs<double>(n, 11);
  std::vector<std::uint64_t> ids(n);
  std::iota(ids.begin(), ids.end(), std::uint64_t{0});
  const auto ms = [] {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  };
  Backend::run(backend_options(), P * D, [&](Backend::endpoint& e) {
    pl::Runner<M, Backend::endpoint> r(e, pl::Plan::automatic<Net, double>(P),
                                       {.schedule = pl::Schedule::one_forward_one_backward, .micro_batches = 2,
                                        .max_batch = n, .replicas = D, .seed = 23});
    const auto [first, end] = flotilla::detail::split_range(n, D, r.replica());
    const data::Batch<double> b{ConstMatrixView<double>(d.inputs.data() + 36 * first, 36, static_cast<Eigen::Index>(end - first)),
                                Targets<double>{std::span<const std::int32_t>(d.labels).subspan(first, end - first)},
                                std::span<const std::uint64_t>(ids).subspan(first, end - first), 0, 0, n};
    try {
      for (std::size_t step = 0;; ++step) {
        if (e.rank() == victim && step == 3) {
          std::printf("stopping at %lld\n", ms());
          std::fflush(stdout);
          ::raise(SIGSTOP);  // the launcher stops it with the others once one has failed
        }
        r.compute_gradients(b);
      }
    } catch (const TransportError& err) {
      std::printf("caught at %lld: %s\n", ms(), err.what());
      std::fflush(stdout);
      throw;
    }
  });
  return 1;
}

int run(const Program& self, int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "stall") return stall(std::stoul(argv[2]), std::stoul(argv[3]), std::stoul(argv[4]));
    if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "trainer"))
      throw ConfigError("usage: " + self.name() + " <stages> <replicas> <1f1b|gpipe> <micro-batches> [trainer]");
    const std::size_t P = std::stoul(argv[1]), D = std::stoul(argv[2]), micro = std::stoul(argv[4]);
    const auto schedule = std::string(argv[3]) == "gpipe" ? pl::Schedule::fill_drain : pl::Schedule::one_forward_one_backward;
    if (argc == 6) return train_and_compare(P, D, schedule, micro);
    const std::size_t n = 13;  // uneven over replicas and micro-batches
    const std::uint64_t seed = 23;
    const auto d = flotilla_test::blobs<double>(n, 11);
    std::vector<std::uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});

    // The whole network, the whole batch.
    Network<Net, double> net;
    std::vector<double> p(Network<Net, double>::parameter_count), g(p.size(), 0.0);
    net.initialize(p, seed);
    const auto out = net.forward(ConstMatrixView<double>(d.inputs.data(), 36, static_cast<Eigen::Index>(n)), p,
                                 RunInfo{Mode::train, ids, seed, 0});
    Matrix<double> dout(out.rows(), out.cols());
    MatrixView<double> gv(dout.data(), dout.rows(), dout.cols());
    SoftmaxCrossEntropy::value_and_gradient(out, Targets<double>{d.labels}, gv, 1.0 / static_cast<double>(n));
    net.backward(ConstMatrixView<double>(dout.data(), dout.rows(), dout.cols()), p, g);

    int status = 0;
    Backend::run(backend_options(), P * D, [&](Backend::endpoint& e) {
      pl::Runner<M, Backend::endpoint> r(e, pl::Plan::automatic<Net, double>(P),
                                              {.schedule = schedule, .micro_batches = micro, .max_batch = n, .replicas = D, .seed = seed});
      const auto [first, end] = flotilla::detail::split_range(n, D, r.replica());
      const data::Batch<double> b{ConstMatrixView<double>(d.inputs.data() + 36 * first, 36, static_cast<Eigen::Index>(end - first)),
                                  Targets<double>{std::span<const std::int32_t>(d.labels).subspan(first, end - first)},
                                  std::span<const std::uint64_t>(ids).subspan(first, end - first), 0, 0, n};
      r.compute_gradients(b);
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < r.gradients().size(); ++i) {
        diff = std::max(diff, std::abs(r.gradients()[i] - g[r.parameter_offset() + i]));
        norm = std::max(norm, std::abs(g[r.parameter_offset() + i]));
      }
      std::printf("rank %zu (replica %zu, stage %zu of %zu, %s, M=%zu): max |difference| / max |gradient| = %.3g\n", e.rank(),
                  r.replica(), r.stage(), P, std::string(pl::name(schedule)).c_str(), micro, norm > 0 ? diff / norm : diff);
      status = diff <= 1e-12 * norm ? 0 : 1;  // a stage without parameters has none to differ
    });
    return status;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return 1;
  }
}

}  // namespace flotilla_test::pipeline_processes
