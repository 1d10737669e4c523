// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Trainer::fit with parameter servers over TCP: a worker process killed (SIGKILL, as kill -9) in
// the middle of training is started again with the same rank and rejoins the running job
// (TcpOptions::rejoin, FLOTILLA_REJOIN). One program: `drive <case>` starts the job (this same
// program, one process per rank, through transport::launch), starts the extra processes itself,
// and checks what every one of them did; the `rank` mode is one rank.
//
// The job: 3 workers and 2 parameter servers train an MLP on 6000 Fashion-MNIST images for 30
// epochs (63 steps each, about 0.1 s: the restarted process must find the job still running),
// evaluating on 1000 after every epoch. Worker 2 kills itself once its
// step log shows step 20 (in the first epoch).
//
//   drive async       policy::Asynchronous, every rank with a shared secret. Once both servers say
//                     where a lost worker can rejoin, a second process claiming rank 1 (alive)
//                     tries to rejoin and is refused, and exits non-zero with a message saying
//                     rank 1 is still alive. Once both servers dropped worker 2, a process with
//                     another secret tries to rejoin as rank 2 and fails authentication, and
//                     worker 2 is started again with FLOTILLA_REJOIN: it
//                     rejoins (logging where), trains to the end, exits 0. Both servers log that
//                     it rejoined and that they applied its pushes afterwards (a count > 0). The
//                     other workers log that it rejoined, finish 30 epochs, report the same
//                     history, whose last epoch counts 3 workers again, with a sane validation
//                     accuracy (> 70%); the rejoined worker's last record is the same as theirs.
//   drive staleness   the same with policy::BoundedStaleness<2>.
//
// Exit status 0 when what happened is what should have; otherwise it prints why and exits 1.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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

namespace flotilla_test::ps_trainer_rejoin {

namespace {

using namespace flotilla;
namespace fm = data::fashion_mnist;
using Net = Sequential<Input<784>, Dense<64>, ReLU, Dense<10>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam>;
using Clock = std::chrono::steady_clock;
using flotilla_test::contains;
using flotilla_test::field;
using flotilla_test::lines_with;
using flotilla_test::word_after;

constexpr std::size_t workers = 3, servers = 2, victim = 2, kill_at_step = 20, epochs = 30;
constexpr std::size_t train_samples = 6000, validation_samples = 1000, batch = 32;

template <class Policy>
int train(const std::string& dir, bool kill) {
  const auto o = transport::TcpOptions::from_environment();
  const auto step_log = std::filesystem::path(dir) / "steps.jsonl";
  if (kill && o.rank == victim && o.rejoin.empty()) {
    // As kill -9 from outside, once its own step log shows the step.
    flotilla_test::kill_self_when_logged(step_log.string() + ".rank" + std::to_string(victim), kill_at_step);
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
  Trainer<M, Policy, transport::Tcp> trainer(to, Policy{}, o);
  FitOptions f;
  f.epochs = epochs;
  f.log = &std::cout;
  f.progress = ProgressBar::Style::lines;
  if (kill && o.rejoin.empty()) f.step_log_file = step_log;
  const auto history = trainer.fit(train, &validation, f);
  flotilla_test::print_history(history);
  std::fflush(stdout);
  return 0;
}

int rank_main(const std::string& what, const std::string& dir, bool kill) {
  try {
    if (what == "async") return train<policy::Asynchronous<>>(dir, kill);
    if (what == "staleness") return train<policy::BoundedStaleness<2>>(dir, kill);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    std::fflush(stdout);
    return 3;
  }
  std::printf("error: unknown case %s\n", what.c_str());
  return 2;
}

/// A process started by the driver (not by the launcher): its output (both streams) and status.
struct Extra {
  std::string output;
  int status = -1;
  bool ran = false;
};

Extra run_extra(const std::string& command) {
  Extra x;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return x;
  x.ran = true;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) x.output += buf;
  x.status = ::pclose(p);
  return x;
}

int drive(const Program& self, const std::string& what) {
  const flotilla_test::TemporaryDirectory temporary("flotilla_ps_trainer_rejoin");
  const std::string& dir = temporary.path();
  const std::size_t ranks = workers + servers;
  Extra duplicate, rejoined, impostor;
  std::thread duplicate_thread, rejoin_thread, impostor_thread;
  bool duplicate_started = false, rejoin_started = false;
  Clock::time_point rejoin_start{};
  flotilla_test::JobSpec spec;
  spec.ranks = ranks;
  spec.command = self.command({"rank", what, dir, "kill"});
  spec.timeout = std::chrono::seconds(90);
  const std::string secret = "rejoin-test-secret";
  spec.environment = {"FLOTILLA_SECRET=" + secret};
  // What an extra process of rank `rank` runs: this program as one rank, rejoining the job.
  auto extra_command = [&](std::size_t rank, const std::string& rejoin, const std::string& key) {
    return "FLOTILLA_SECRET=" + key + " FLOTILLA_RANK=" + std::to_string(rank) + " FLOTILLA_WORLD_SIZE=" + std::to_string(ranks) +
           " FLOTILLA_COORDINATOR=127.0.0.1:1 FLOTILLA_HEARTBEAT_MS=200 FLOTILLA_CONNECT_TIMEOUT_MS=10000 FLOTILLA_REJOIN=" + rejoin + " '" + self.executable +
           "' " + self.subcommand + " rank " + what + " '" + dir + "' nokill";
  };
  spec.on_line = [&](std::size_t, const std::vector<std::string>& out) {
    const std::string marker = "a lost worker can rejoin at ";
    const std::string s0 = word_after(out[workers], marker), s1 = word_after(out[workers + 1], marker);
    if (s0.empty() || s1.empty()) return;
    const std::string rejoin = s0 + "," + s1;
    if (!duplicate_started) {
      duplicate_started = true;
      duplicate_thread = std::thread([&, c = extra_command(1, rejoin, secret)] { duplicate = run_extra(c); });
    }
    if (!rejoin_started && contains(out[workers], "dropped worker 2") && contains(out[workers + 1], "dropped worker 2")) {
      rejoin_started = true;
      rejoin_start = Clock::now();
      impostor_thread = std::thread([&, c = extra_command(victim, rejoin, "another-secret-entirely")] { impostor = run_extra(c); });
      rejoin_thread = std::thread([&, c = extra_command(victim, rejoin, secret)] { rejoined = run_extra(c); });
    }
  };
  const auto job = flotilla_test::run_job(spec);
  if (duplicate_thread.joinable()) duplicate_thread.join();
  if (rejoin_thread.joinable()) rejoin_thread.join();
  if (impostor_thread.joinable()) impostor_thread.join();
  const double took = std::chrono::duration<double>(Clock::now() - job.started).count();
  const auto& out = job.out;
  flotilla_test::Checks check;
  job.print();
  std::printf("--- duplicate rank 1 (status %d)\n%s", duplicate.status, duplicate.output.c_str());
  std::printf("--- rank 2 restarted (status %d)\n%s", rejoined.status, rejoined.output.c_str());
  std::printf("--- rank 2 with another secret (status %d)\n%s", impostor.status, impostor.output.c_str());

  check.killed(job, victim, "rank 2");
  check.expect(duplicate.ran && duplicate.status != 0, "the duplicate rank 1 should have exited non-zero");
  check.expect(contains(duplicate.output, "rank 1 is still alive"), "the duplicate rank 1 should be told that rank 1 is still alive");
  check.expect(impostor.ran && impostor.status != 0 && contains(impostor.output, "authentication failed"),
               "a process with another secret should fail to authenticate and exit non-zero");
  check.expect(rejoined.ran && WIFEXITED(rejoined.status) && WEXITSTATUS(rejoined.status) == 0,
               "the restarted rank 2 should exit 0");
  check.expect(contains(rejoined.output, "flotilla: worker 2 rejoined the job at epoch"),
               "the restarted rank 2 should log where it rejoined");
  const auto rh = lines_with(rejoined.output, "history ");
  check.expect(!rh.empty() && rh.size() < epochs, "the restarted rank 2 should report the epochs it took part in");

  std::vector<std::string> histories;
  for (std::size_t r = 0; r < workers; ++r) {
    if (r == victim) continue;
    check.finished(job, r, "should have finished training");
    check.expect(contains(out[r], "worker 2 rejoined; training goes on with 3 of 3 workers"),
                 "worker " + std::to_string(r) + " should log that worker 2 rejoined");
    const auto h = flotilla_test::checked_history(check, out[r], r, epochs);
    histories.push_back(flotilla_test::joined(h));
    if (h.size() != epochs) continue;
    check.expect(field(h.back(), "workers") == 3.0, "worker " + std::to_string(r) + ": the last epoch should count 3 workers again");
    if (!rh.empty()) check.expect(rh.back() == h.back(), "the restarted rank 2's last record should be the others' last record");
  }
  for (std::size_t i = 1; i < histories.size(); ++i)
    check.expect(histories[i] == histories[0], "the other workers should report the same history");
  for (std::size_t r = workers; r < ranks; ++r) {
    const std::string name = "server rank " + std::to_string(r);
    check.finished(job, r, "the server should have finished");
    check.expect(contains(out[r], "dropped worker 2"), name + " should drop worker 2");
    check.expect(contains(out[r], "rank 1 is still alive") == (r == workers),
                 name + " should log the refused duplicate exactly when it was the one asked (server 0)");
    check.expect(contains(out[r], "worker 2 rejoined at update"), name + " should re-admit worker 2");
    const std::string applied = word_after(out[r], ": applied ");
    check.expect(!applied.empty() && std::stoull(applied) > 0, name + " should apply pushes from the rejoined worker");
  }
  std::printf("%s: %.1f s (rank 2 restarted %.1f s in)\n", what.c_str(), took,
              rejoin_started ? std::chrono::duration<double>(rejoin_start - job.started).count() : -1.0);
  return check.verdict();
}

}  // namespace

int run(const Program& self, int argc, char** argv) {
  return flotilla_test::guarded_main([&] {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "drive" && argc > 2) return drive(self, argv[2]);
    if (mode == "rank" && argc > 4) return rank_main(argv[2], argv[3], std::string(argv[4]) == "kill");
    std::fprintf(stderr, "usage: %s drive async|staleness\n", self.name().c_str());
    return 2;
  });
}

}  // namespace flotilla_test::ps_trainer_rejoin
