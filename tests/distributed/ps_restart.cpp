// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A parameter server killed with SIGKILL mid-run; the job restarts and resumes from its newest
// complete checkpoint set. Run by run_restart.cmake as
//
//   flotilla-launch -n 3 --restarts 1 -- flotilla_distributed_tcp ps-restart <directory>
//
// Ranks 0 and 1 are workers, rank 2 the server, training an MLP on a Fashion-MNIST subset with
// synchronous parameter-server updates and a checkpoint set every 25 updates. In the first attempt
// (FLOTILLA_RESTART=0) the server watches worker 0's step log and kills itself with SIGKILL once 70
// updates are done; the launcher stops the workers and starts the job again, which resumes.
// Worker 0 of the second attempt then checks, from its step log (one line per update, kept across
// the restart), that the updates lost are at most the 25 since a checkpoint, that the run ended at
// its full length, and that its test accuracy is within one point of an uninterrupted run's
// (trained here, in-process, afterwards). It prints the figures for docs/reliability.md.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::ps_restart {

using namespace flotilla;
namespace fm = data::fashion_mnist;
using Net = Sequential<Input<784>, Dense<64>, ReLU, Dense<10>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam>;
using Policy = policy::Synchronous<topology::ParameterServer>;

namespace {

constexpr std::size_t train_samples = 8000, test_samples = 2000, batch = 32, epochs = 2;
constexpr std::uint64_t every_steps = 25, kill_after = 70;
constexpr std::uint64_t total_steps = epochs * (train_samples / (2 * batch));  // 125 updates per epoch

std::size_t env(const char* name) {
  const char* v = std::getenv(name);
  return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : 0;
}

/// The "step" of every line of a step log, in order.
std::vector<std::uint64_t> logged_steps(const std::filesystem::path& log) {
  std::vector<std::uint64_t> steps;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("\"step\":");
    if (at != std::string::npos) steps.push_back(std::strtoull(line.c_str() + at + 7, nullptr, 10));
  }
  return steps;
}

TrainerOptions<M> options() {
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 2e-3;
  o.batch_size = batch;
  o.seed = 7;
  o.servers = 1;
  return o;
}

}  // namespace

int run(const Program& self, int argc, char** argv) {
  try {
    if (argc != 2) {
      std::fprintf(stderr, "usage: %s <checkpoint directory>  (under flotilla-launch -n 3 --restarts 1)\n", self.name().c_str());
      return 2;
    }
    const std::filesystem::path dir = argv[1];
    const std::size_t rank = env("FLOTILLA_RANK"), attempt = env("FLOTILLA_RESTART");
    const auto train = data::subset(fm::load<float>(fm::Split::train), 0, train_samples);
    const auto test = data::subset(fm::load<float>(fm::Split::test), 0, test_samples);
    const auto step_log = dir / "steps.jsonl";
    const auto marker = dir / "server-killed";

    if (rank == 2 && attempt == 0) {
      // The server kills itself (SIGKILL: no handler, no cleanup, as kill -9 from outside) once
      // worker 0 has logged kill_after updates.
      std::thread([step_log, marker] {
        for (;;) {
          const auto done = logged_steps(step_log).size();
          if (done >= kill_after) {
            std::ofstream(marker) << done << "\n";
            ::kill(::getpid(), SIGKILL);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }).detach();
    }

    auto o = options();
    o.workers = 0;  // as launched: 2 workers, 1 server
    // The first attempt runs slower (worker 1 sleeps 19 times its compute time after each step,
    // which changes no number), so that the server is surely killed long before the end.
    if (attempt == 0) o.straggler = {1, 20.0};
    Trainer<M, Policy, transport::Tcp> trainer(o, Policy{}, transport::Tcp::options::from_environment());
    FitOptions f;
    f.epochs = epochs;
    f.log = &std::cerr;
    f.progress = ProgressBar::Style::lines;
    f.step_log_file = step_log;
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = every_steps;
    f.checkpoints.resume = true;
    const auto started = std::chrono::steady_clock::now();
    const auto history = trainer.fit(train, nullptr, f);
    if (history.empty() || rank != 0) return 0;  // the server; worker 1 has the same history
    if (attempt == 0) {
      std::fprintf(stderr, "error: the first attempt finished: the server was never killed\n");
      return 3;
    }
    if (!std::filesystem::exists(marker)) {
      std::fprintf(stderr, "error: the job was restarted, but not because the server was killed\n");
      return 1;
    }

    // The step log holds the first attempt's updates, then the resumed ones.
    const auto steps = logged_steps(step_log);
    std::size_t restart_at = 1;
    while (restart_at < steps.size() && steps[restart_at] > steps[restart_at - 1]) ++restart_at;
    if (restart_at >= steps.size()) {
      std::fprintf(stderr, "error: the step log shows no restart\n");
      return 1;
    }
    const std::uint64_t killed_after = steps[restart_at - 1], resumed_from = steps[restart_at] - 1;
    const std::uint64_t lost = killed_after - resumed_from;
    const double accuracy = trainer.evaluate(test).accuracy;

    auto ro = options();
    ro.workers = 2;
    Trainer<M, Policy> reference(ro, Policy{}, transport::InProcessOptions{.beside_launched_job = true});
    FitOptions rf;
    rf.epochs = epochs;
    rf.log = nullptr;
    reference.fit(train, nullptr, rf);
    const double reference_accuracy = reference.evaluate(test).accuracy;
    const bool identical = std::memcmp(std::as_const(trainer).parameters().data(),
                                       std::as_const(reference).parameters().data(),
                                       std::as_const(trainer).parameters().size_bytes()) == 0;
    std::printf("server killed after update %llu; resumed from the checkpoint of update %llu: %llu update(s) lost "
                "(checkpoints every %llu)\n",
                static_cast<unsigned long long>(killed_after), static_cast<unsigned long long>(resumed_from),
                static_cast<unsigned long long>(lost), static_cast<unsigned long long>(every_steps));
    std::printf("final update %llu of %llu; test accuracy %.2f%%, uninterrupted run %.2f%%; parameters %s\n",
                static_cast<unsigned long long>(trainer.step()), static_cast<unsigned long long>(total_steps),
                100 * accuracy, 100 * reference_accuracy,
                identical ? "bit-identical to the uninterrupted run's" : "differ from the uninterrupted run's");
    std::printf("second attempt: %.2f s from its start to the end of training\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    int status = 0;
    if (killed_after < kill_after || lost > every_steps) {
      std::fprintf(stderr, "error: %llu updates lost, more than the %llu between checkpoints\n",
                   static_cast<unsigned long long>(lost), static_cast<unsigned long long>(every_steps));
      status = 1;
    }
    if (trainer.step() != total_steps) {
      std::fprintf(stderr, "error: the resumed run ended at update %llu, not %llu\n",
                   static_cast<unsigned long long>(trainer.step()), static_cast<unsigned long long>(total_steps));
      status = 1;
    }
    if (std::abs(accuracy - reference_accuracy) > 0.01) {
      std::fprintf(stderr, "error: accuracy %.2f%% is more than a point from the uninterrupted run's %.2f%%\n",
                   100 * accuracy, 100 * reference_accuracy);
      status = 1;
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test::ps_restart
