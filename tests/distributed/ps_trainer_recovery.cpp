// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Trainer::fit with parameter servers over TCP when a worker process is killed (SIGKILL, as
// kill -9) in the middle of training. One program: `drive <case>` starts the job (this same
// program, one process per rank, through transport::launch) and checks what every rank did; the
// `rank` mode is one rank.
//
// The job: 3 workers and 2 parameter servers train an MLP on 6000 Fashion-MNIST images for 3
// epochs (63 steps each), evaluating on 1000 after every epoch. Worker 2 kills itself once its
// step log shows step 80 (in the second epoch).
//
//   drive async           policy::Asynchronous: workers 0 and 1 finish all 3 epochs (exit 0), each
//                         logs once that worker 2 (its rank and host) was lost and training goes
//                         on; both report the same history, whose last epochs count 2 workers; the
//                         validation accuracy is sane (> 70%) and the training loss went down; both
//                         servers finish and say they dropped worker 2.
//   drive staleness       the same with policy::BoundedStaleness<1> (the dead worker's clock must
//                         not hold the others back).
//   drive sync-continue   policy::Synchronous with WorkerLoss::continue_with_survivors: the same,
//                         and the log says a step now averages 2 x 32 samples instead of 3 x 32.
//   drive sync-stop       policy::Synchronous with the default: every other rank exits non-zero
//                         within seconds with an error naming rank 2 and its host.
//   drive server-killed   policy::Asynchronous, but server 1 (rank 4) is killed once worker 0's
//                         step log shows step 80: going on without a worker must not mean hanging
//                         without a server; every other rank exits non-zero naming rank 4.
//
// `drive <case> nokill` runs the same job without the kill and prints the figures (for the docs).
// Exit status 0 when what happened is what should have; otherwise it prints why and exits 1.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "../common/history_lines.hpp"
#include "../common/kill_when_logged.hpp"
#include "../common/recovery_job.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::ps_trainer_recovery {

namespace {

using namespace flotilla;
namespace fm = data::fashion_mnist;
using Net = Sequential<Input<784>, Dense<64>, ReLU, Dense<10>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam>;
using flotilla_test::contains;
using flotilla_test::field;
using flotilla_test::occurrences;

constexpr std::size_t workers = 3, servers = 2, kill_at_step = 80, epochs = 3;
constexpr std::size_t train_samples = 6000, validation_samples = 1000, batch = 32;

/// The rank killed in case `what`.
std::size_t victim_of(const std::string& what) { return what == "server-killed" ? workers + 1 : 2; }

template <class Policy>
int train(const std::string& dir, std::size_t victim, bool kill, WorkerLoss on_loss) {
  const auto o = transport::TcpOptions::from_environment();
  const bool is_victim = kill && o.rank == victim;
  const auto step_log = std::filesystem::path(dir) / "steps.jsonl";
  if (is_victim) {
    // As kill -9 from outside, once a step log shows the step: a worker watches its own
    // (steps.jsonl.rank<w>), a server worker 0's (steps.jsonl).
    flotilla_test::kill_self_when_logged(
        victim < workers ? std::filesystem::path(step_log.string() + ".rank" + std::to_string(victim)) : step_log,
        kill_at_step);
  }
  const auto all_train = fm::load<float>(fm::Split::train);
  const auto train = data::subset(all_train, 0, train_samples);
  const auto validation = data::subset(all_train, train_samples, validation_samples);
  TrainerOptions<M> to;
  to.optimizer.learning_rate = 2e-3;
  to.batch_size = batch;
  to.seed = 11;
  to.servers = servers;
  to.workers = 0;  // as launched
  to.on_worker_loss = on_loss;
  Trainer<M, Policy, transport::Tcp> trainer(to, Policy{}, o);
  FitOptions f;
  f.epochs = epochs;
  f.log = &std::cout;
  f.progress = ProgressBar::Style::lines;
  if (kill) f.step_log_file = step_log;
  const auto history = trainer.fit(train, &validation, f);
  flotilla_test::print_history(history);
  if (!history.empty()) std::printf("steps=%llu\n", static_cast<unsigned long long>(trainer.step()));
  return 0;
}

int rank_main(const std::string& what, const std::string& dir, bool kill) {
  const std::size_t victim = victim_of(what);
  try {
    if (what == "async" || what == "server-killed")
      return train<policy::Asynchronous<>>(dir, victim, kill, WorkerLoss::by_policy);
    if (what == "staleness") return train<policy::BoundedStaleness<1>>(dir, victim, kill, WorkerLoss::by_policy);
    if (what == "sync-continue")
      return train<policy::Synchronous<topology::ParameterServer>>(dir, victim, kill, WorkerLoss::continue_with_survivors);
    if (what == "sync-stop")
      return train<policy::Synchronous<topology::ParameterServer>>(dir, victim, kill, WorkerLoss::by_policy);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    std::fflush(stdout);
    return 3;
  }
  std::printf("error: unknown case %s\n", what.c_str());
  return 2;
}

int drive(const Program& self, const std::string& what, bool kill) {
  const flotilla_test::TemporaryDirectory dir("flotilla_ps_trainer_recovery");
  const std::size_t ranks = workers + servers;
  flotilla_test::JobSpec spec;
  spec.ranks = ranks;
  spec.command = self.command({"rank", what, dir.path(), kill ? "kill" : "nokill"});
  spec.timeout = std::chrono::seconds(90);
  const auto job = flotilla_test::run_job(spec);
  const auto& out = job.out;
  flotilla_test::Checks check;
  job.print();
  const std::string lost = "lost worker 2 (rank 2 at 127.0.0.1:";
  const std::size_t victim = victim_of(what);
  const std::string vname = "rank " + std::to_string(victim);
  if (kill) check.killed(job, victim, vname);

  if (what == "sync-stop" || what == "server-killed") {
    for (std::size_t r = 0; r < ranks; ++r) {
      if (r == victim) continue;
      check.stopped_naming(job, r, victim);
      check.expect(!contains(out[r], "training goes on"), "rank " + std::to_string(r) + " should not go on");
    }
    check.in_time(job, std::chrono::seconds(30), "the job should stop within seconds of the kill");
  } else {
    std::vector<std::string> histories;
    for (std::size_t r = 0; r < workers; ++r) {
      if (kill && r == victim) continue;
      check.finished(job, r, "should have finished training");
      const auto h = flotilla_test::checked_history(check, out[r], r, epochs);
      histories.push_back(flotilla_test::joined(h));
      if (h.size() == epochs)
        check.expect(field(h.back(), "workers") == (kill ? 2.0 : 3.0),
                     "worker " + std::to_string(r) + ": the last epoch should count " + (kill ? "2" : "3") + " workers");
      if (kill) {
        check.expect(occurrences(out[r], lost) == 1, "worker " + std::to_string(r) + " should log once that it lost worker 2");
        check.expect(contains(out[r], "training goes on without it, 2 of 3 workers left"),
                     "worker " + std::to_string(r) + " should say that training goes on");
        if (what == "sync-continue")
          check.expect(contains(out[r], "now averages 2 x 32 = 64 samples instead of 96"),
                       "worker " + std::to_string(r) + " should say that the effective batch shrinks");
      }
    }
    for (std::size_t i = 1; i < histories.size(); ++i)
      check.expect(histories[i] == histories[0], "the surviving workers should report the same history");
    for (std::size_t r = workers; r < ranks; ++r) {
      check.finished(job, r, "the server should have finished");
      if (kill) check.expect(contains(out[r], "dropped worker 2"), "server rank " + std::to_string(r) + " should drop worker 2");
    }
  }
  std::printf("%s (%s): %.1f s\n", what.c_str(), kill ? (vname + " killed").c_str() : "no kill", job.seconds());
  return check.verdict();
}

}  // namespace

int run(const Program& self, int argc, char** argv) {
  return flotilla_test::guarded_main([&] {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "drive" && argc > 2) return drive(self, argv[2], !(argc > 3 && std::string(argv[3]) == "nokill"));
    if (mode == "rank" && argc > 4) return rank_main(argv[2], argv[3], std::string(argv[4]) == "kill");
    std::fprintf(stderr, "usage: %s drive async|staleness|sync-continue|sync-stop|server-killed [nokill]\n", self.name().c_str());
    return 2;
  });
}

}  // namespace flotilla_test::ps_trainer_recovery
