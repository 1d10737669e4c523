// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Synchronous ring training over TCP processes when a worker is killed (kill -9) in the middle of
// Trainer::fit. One program: `drive <case>` starts the ranks of a job as processes of this same
// program (transport::launch, which here does not stop the job when a rank dies) and checks what
// every rank printed and how it ended.
//
//   drive continue   3 ranks, TrainerOptions::on_worker_loss = continue_with_survivors. Rank 2
//                    kills itself (SIGKILL) 1.5 ms after its update 80 (of 4 epochs of 63), from a
//                    thread of its own, so that it dies wherever its training thread is. Ranks 0
//                    and 1 must exit 0, each having logged the loss once, with bit-identical
//                    parameters, the same history and update count, epochs re-sharded, a falling
//                    loss and a sane accuracy.
//   drive continue5  the same with 5 ranks, and rank 4 killed too, while it applies its update 110
//                    (about 60 before the end): rank 0, no neighbour of rank 2 in the ring, must
//                    learn of it all the same, and the ring re-forms twice (5, 4, then 3 workers).
//   drive stop       the default: the survivors stop, exit non-zero, naming rank 2 and its host.
//
// For experiments by hand (not in ctest): `drive continue DELAY_US STEP kill|stall small|big` kills
// rank 2 DELAY_US after its update STEP instead (62 is the last update of the first epoch, 251 the
// last of the job; a negative DELAY_US kills it while it applies that update), or stops it
// (SIGSTOP, continued 4 s after it started), so that the survivors must see it stall and go on
// without it, and it must stop with an error when it wakes up alone; "big" trains a model of 1.1
// million parameters. RING_RECOVERY_CHECKPOINT_FILE=<file> adds a checkpoint after every epoch.
//
// Exit status 0 when what happened is what should have; otherwise it prints why and exits 1.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "../common/blobs.hpp"
#include "../common/recovery_job.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::ring_recovery {

namespace {

using namespace flotilla;
using Clock = std::chrono::steady_clock;
using flotilla_test::contains;
using flotilla_test::occurrences;
using Small = Model<Sequential<Input<1, 6, 6>, Flatten, Dense<48>, ReLU, Dense<3>>, SoftmaxCrossEntropy, optim::Momentum, float>;
using Big = Model<Sequential<Input<1, 6, 6>, Flatten, Dense<1024>, ReLU, Dense<1024>, ReLU, Dense<3>>, SoftmaxCrossEntropy,
                  optim::Momentum, float>;

constexpr std::size_t victim = 2;
constexpr std::size_t second_victim = 4;  // in jobs of 5
constexpr std::uint64_t second_victim_step = 110;
std::atomic<std::uint64_t> updates{0};  // the victim's update count, for its killer thread

/// Microseconds on the machine's monotonic clock, the same in every process of the job.
long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

void die(bool stall) {
  std::printf("victim: stopping at %lld us\n", now_us());
  std::fflush(stdout);
  ::kill(::getpid(), stall ? SIGSTOP : SIGKILL);
}

/// The training log, each line stamped with now_us() as it is written, so that the driver can
/// tell how long after the victim died the survivors had agreed to go on.
class StampedLog : public std::streambuf {
 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    if (line_.empty()) line_ = "[" + std::to_string(now_us()) + " us] ";
    line_ += static_cast<char>(c);
    if (c == '\n') {
      std::fputs(line_.c_str(), stdout);
      std::fflush(stdout);
      line_.clear();
    }
    return c;
  }

 private:
  std::string line_;
};

struct Case {
  bool survive = true;
  long delay_us = 1500;
  std::uint64_t victim_step = 80;
  bool stall = false;
  bool big = false;
};

template <class M>
int rank_main(Case c) {
  const auto o = transport::TcpOptions::from_environment();
  const auto data = flotilla_test::blobs<float>(3000, 5);
  TrainerOptions<M> t;
  t.optimizer.learning_rate = 0.05;
  t.batch_size = 16;
  t.workers = 0;  // as launched
  t.seed = 7;
  t.prefetch = 0;
  t.on_worker_loss = c.survive ? WorkerLoss::continue_with_survivors : WorkerLoss::stop;
  const bool victim_here = o.rank == victim || o.rank == second_victim;
  if (o.rank == second_victim) {  // at a set point of its training, well before the end of it
    c.victim_step = second_victim_step;
    c.delay_us = -1;
    c.stall = false;
  }
  t.schedule = [c, victim_here](std::uint64_t step) {
    updates.store(step, std::memory_order_relaxed);
    // A negative delay: die at once, in the middle of applying update `victim_step`.
    if (victim_here && c.delay_us < 0 && step == c.victim_step) die(c.stall);
    // However late its killer thread runs (a loaded machine), the victim dies in the middle of
    // training: 30 updates on, it waits for it.
    if (victim_here && !c.stall && c.delay_us >= 0 && step >= c.victim_step + 30)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    return 1.0;
  };
  policy::Synchronous<> sync;
  sync.bucket_bytes = 2048;  // several buckets in flight per update: more for a death to interrupt
  if (victim_here && c.stall && ::fork() == 0) {  // stalled, not dead: its connections stay open
    ::sleep(4);
    ::kill(::getppid(), SIGCONT);  // the others have gone on without it by now
    ::_exit(0);
  }
  if (victim_here && c.delay_us >= 0)
    std::thread([c] {
      while (updates.load(std::memory_order_relaxed) < c.victim_step) std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::this_thread::sleep_for(std::chrono::microseconds(c.delay_us));
      die(c.stall);
    }).detach();
  Trainer<M, policy::Synchronous<>, transport::Tcp> trainer(t, sync, o);
  FitOptions f;
  f.epochs = 4;
  StampedLog stamped;
  std::ostream log(&stamped);
  f.log = &log;
  f.progress = ProgressBar::Style::none;
  // By hand: a checkpoint after every epoch, with its barriers (docs/reliability.md).
  if (const char* file = std::getenv("RING_RECOVERY_CHECKPOINT_FILE")) f.checkpoint_file = file;
  History h;
  try {
    h = trainer.fit(data, nullptr, f);
  } catch (const TransportError& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 3;
  }
  std::uint64_t fnv = 1469598103934665603ull;
  for (const float v : std::as_const(trainer).parameters()) {
    unsigned char b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    for (const unsigned char byte : b) fnv = (fnv ^ byte) * 1099511628211ull;
  }
  std::printf("parameters fnv1a %016llx after %llu updates\n", static_cast<unsigned long long>(fnv),
              static_cast<unsigned long long>(trainer.step()));
  for (const auto& r : h)
    std::printf("epoch %llu step %llu loss %.9g accuracy %.9g workers %g\n", static_cast<unsigned long long>(r.epoch),
                static_cast<unsigned long long>(r.step), r.train_loss, r.train_accuracy, r.extra.front().second);
  std::printf("first loss %.6f last loss %.6f accuracy %.4f\n", h.front().train_loss, h.back().train_loss,
              trainer.evaluate(data).accuracy);
  return 0;
}

/// The lines of `s` that start with `prefix`, as one string.
std::string lines_of(const std::string& s, const std::string& prefix) {
  return flotilla_test::joined(flotilla_test::lines_with(s, prefix));
}

int drive(const Program& self, const std::string& what, const std::vector<std::string>& extra) {
  const bool survive = what == "continue" || what == "continue5";
  const std::size_t ranks = what == "continue5" ? 5 : 3;
  std::vector<std::size_t> victims = {victim};
  if (ranks == 5) victims.push_back(second_victim);
  auto is_victim = [&](std::size_t r) { return std::find(victims.begin(), victims.end(), r) != victims.end(); };
  flotilla_test::JobSpec spec;
  spec.ranks = ranks;
  spec.command = self.command({survive ? "rank-continue" : "rank-stop"});
  spec.command.insert(spec.command.end(), extra.begin(), extra.end());
  spec.timeout = std::chrono::seconds(60);
  const auto job = flotilla_test::run_job(spec);
  const auto& out = job.out;
  flotilla_test::Checks check;
  job.print();
  const bool stall = extra.size() > 2 && extra[2] == "stall";
  if (stall)
    check.expect(job.exit(victim).exited && job.exit(victim).status == 3 &&
               contains(out[victim], "goes on only with more than half of its workers"),
           "rank 2, woken up after the others went on, should stop naming the majority rule");
  else
    for (const std::size_t v : victims)
      check.killed(job, v, "rank " + std::to_string(v));
  std::vector<std::size_t> survivors;
  for (std::size_t r = 0; r < ranks; ++r)
    if (!is_victim(r)) survivors.push_back(r);
  if (survive) {
    long long died = -1;
    if (const auto at = out[victim].find("victim: stopping at "); at != std::string::npos)
      died = std::stoll(out[victim].substr(at + 20));
    for (const std::size_t r : survivors) {
      const std::string& s = out[r];
      check.finished(job, r, "should have finished");
      for (std::size_t k = 0; k < victims.size(); ++k) {
        const std::size_t left = ranks - 1 - k;
        const std::string logged = "continuing with " + std::to_string(left) + " workers, effective batch " +
                                   std::to_string(16 * left);
        check.expect(occurrences(s, "worker " + std::to_string(victims[k]) + " (host 127.0.0.1:") == 1 && occurrences(s, logged) == 1,
               "rank " + std::to_string(r) + " should log the loss of worker " + std::to_string(victims[k]) +
                   " once: '... " + logged + "'");
      }
      check.expect(contains(s, "lost during "), "rank " + std::to_string(r) + " should name the operation in flight");
      if (const auto at = s.find(" us] worker 2 (host"); at != std::string::npos && died >= 0) {
        const auto open = s.rfind('[', at);
        std::printf("rank %zu: agreed to go on %lld us after rank 2 stopped\n", r, std::stoll(s.substr(open + 1)) - died);
      }
      const auto at = s.find("first loss ");
      double first = 0, last = 0, accuracy = 0;
      if (at == std::string::npos ||
          std::sscanf(s.c_str() + at, "first loss %lf last loss %lf accuracy %lf", &first, &last, &accuracy) != 3) {
        check.expect(false, "rank " + std::to_string(r) + " printed no losses");
        continue;
      }
      check.expect(last < 0.5 * first, "rank " + std::to_string(r) + ": the loss should fall (first epoch " +
                                     std::to_string(first) + ", last " + std::to_string(last) + ")");
      check.expect(accuracy > 0.9, "rank " + std::to_string(r) + ": training accuracy " + std::to_string(accuracy) + " (> 0.9 expected)");
      check.expect(contains(s, "workers " + std::to_string(survivors.size()) + "\n"),
             "rank " + std::to_string(r) + ": the last epochs should have " + std::to_string(survivors.size()) + " workers");
      // Re-sharded: an epoch of 3000 samples is ceil(3000 / (16 x workers)) global batches (63 of
      // 3 x 16, 94 of 2 x 16), in every epoch that started and ended with the same workers.
      unsigned long long epoch = 0, step = 0, before = 0;
      double workers = 0, previous_workers = 0, loss = 0, accuracy_ = 0;
      std::size_t from = 0;
      while ((from = s.find("\nepoch ", from)) != std::string::npos) {
        ++from;
        if (std::sscanf(s.c_str() + from, "epoch %llu step %llu loss %lf accuracy %lf workers %lf", &epoch, &step, &loss,
                        &accuracy_, &workers) != 5)
          break;
        const auto n = static_cast<unsigned long long>(workers);
        if (workers == previous_workers || (previous_workers == 0 && n == ranks))
          check.expect(step - before == (3000 + 16 * n - 1) / (16 * n),
                 "rank " + std::to_string(r) + ": epoch " + std::to_string(epoch) + " of " + std::to_string(workers) +
                     " workers took " + std::to_string(step - before) + " updates");
        before = step;
        previous_workers = workers;
      }
      check.expect(epoch == 4, "rank " + std::to_string(r) + " should have recorded 4 epochs");
    }
    const std::size_t first = survivors.front();
    const std::string p0 = lines_of(out[first], "parameters fnv1a"), h0 = lines_of(out[first], "epoch ");
    for (const std::size_t r : survivors) {
      const std::string p = lines_of(out[r], "parameters fnv1a");
      check.expect(!p0.empty() && p == p0, "the survivors' parameters and update counts should be identical:\n  " + p0 + "  " + p);
      check.expect(!h0.empty() && lines_of(out[r], "epoch ") == h0, "the survivors' histories should be identical");
    }
    check.in_time(job, std::chrono::seconds(15), "the job should go on at once");
    std::printf("%s: survivors identical (%s), %lld ms\n", what.c_str(), p0.empty() ? "-" : p0.substr(0, p0.size() - 1).c_str(),
                job.milliseconds());
  } else {
    for (const std::size_t r : survivors) {
      check.stopped_naming(job, r, victim);
      check.expect(!contains(out[r], "continuing with"), "rank " + std::to_string(r) + " should not go on by default");
    }
    check.in_time(job, std::chrono::seconds(10), "the job should stop at once");
  }
  return check.verdict();
}

}  // namespace

int run(const Program& self, int argc, char** argv) {
  return flotilla_test::guarded_main([&] {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "drive" && argc > 2) return drive(self, argv[2], std::vector<std::string>(argv + 3, argv + argc));
    if (mode == "rank-continue" || mode == "rank-stop") {
      Case c;
      c.survive = mode == "rank-continue";
      if (argc > 2) c.delay_us = std::stol(argv[2]);
      if (argc > 3) c.victim_step = std::stoull(argv[3]);
      if (argc > 4) c.stall = std::string(argv[4]) == "stall";
      if (argc > 5) c.big = std::string(argv[5]) == "big";
      return c.big ? rank_main<Big>(c) : rank_main<Small>(c);
    }
    std::fprintf(stderr, "usage: %s drive continue|continue5|stop [DELAY_US [STEP [kill|stall [small|big]]]]\n", self.name().c_str());
    return 2;
  });
}

}  // namespace flotilla_test::ring_recovery
