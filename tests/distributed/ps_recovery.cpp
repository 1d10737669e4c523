// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Parameter servers over TCP processes when a worker dies, and a soak of many workers pushing to
// one server. One program: `drive <case>` starts the job (this same program, one process per
// rank, through transport::launch) and checks what every rank printed; the other modes are ranks.
//
//   drive async   4 workers + 1 server, asynchronous with staleness bound 2: worker 2 kills itself
//                 (SIGKILL) after 20 pushes; the server drops it and the 3 others finish their 200
//                 pushes (they would wait forever for its clock if the bound still counted it).
//                 The server checks that it applied exactly 3 x 200 + 20 pushes, and that its
//                 parameters are exactly what that many unit gradients make.
//   drive sync    the same, synchronous (the server aggregates one push per worker a step): the
//                 job stops; every surviving rank exits non-zero within a second or two with an
//                 error naming rank 2, its host and the operation.
//   drive stall [HEARTBEAT_MS]
//                 as async, but without a staleness bound, and worker 2 stops itself (SIGSTOP)
//                 after 20 pushes, with heartbeats every HEARTBEAT_MS (default 100) ms: its
//                 connections stay open, only its heartbeats stop. The 3 others push (one each
//                 2 ms) for 2 stall limits, keeping the server busy all along. The server's
//                 "dropped worker 2" line must come between the stall limit less an interval and
//                 the stall limit plus an interval after the stop (docs/reliability.md, "Failure
//                 detection"); the driver then kills the stopped worker (SIGKILL). Applied pushes
//                 must equal pushes sent.
//   drive stall-sync [HEARTBEAT_MS]
//                 the same with an aggregating server (synchronous), for the measurements of
//                 bench/reliability/stall_detection.py: every surviving rank must exit non-zero
//                 naming rank 2 and its host; prints when each one named it.
//   drive soak S  16 workers push to one server as fast as they can for S seconds, then stop;
//                 pushes applied must equal pushes sent (summed over the workers' reports), and the
//                 parameters must be exactly what that many unit gradients make.
//
// Exit status 0 when what happened is what should have; otherwise it prints why and exits 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/recovery_job.hpp"
#include "flotilla/codec/fp32.hpp"
#include "flotilla/optim/sgd.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/transport/tcp.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::ps_recovery {

namespace {

using namespace flotilla;
using flotilla_test::contains;
using Clock = std::chrono::steady_clock;
using Shard = detail::ParameterServerShard<float, optim::SGD, codec::Fp32>;
using Client = detail::ParameterServerClient<float, codec::Fp32>;

constexpr std::size_t parameters = 1000;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

/// One rank. `victim` dies (or, when `stall`, stops) after `victim_pushes`; the others push
/// `pushes` times, or for `seconds` when that is > 0.
int rank_main(bool aggregate, std::size_t victim, std::size_t victim_pushes, std::size_t pushes, double seconds,
              bool stall = false, std::chrono::milliseconds heartbeat = {}) {
  auto o = transport::TcpOptions::from_environment();
  if (stall) o.heartbeat_interval = heartbeat;
  const std::size_t workers = o.world_size - 1;
  const Clock::time_point t0 = Clock::now();
  int status = 0;
  try {
    transport::Tcp::run(o, 0, [&](transport::TcpEndpoint& e) {
      if (e.rank() == workers) {
        TensorInfo t;
        t.size = parameters;
        std::vector<float> initial(parameters, 0.0f);
        Shard shard({0, parameters}, initial, {t});
        optim::SGD sgd;
        sgd.learning_rate = 1.0;  // every push of unit gradients takes exactly 1 off every parameter
        const std::size_t staleness = aggregate ? 0 : stall ? std::numeric_limits<std::size_t>::max() : 2;
        shard.serve(e, workers, aggregate, staleness, sgd, [](std::uint64_t) { return 1.0; });
        const auto p = shard.parameters();
        bool exact = true;
        for (const float v : p) exact = exact && v == -static_cast<float>(shard.pushes());
        std::printf("server: applied %llu pushes, %zu worker(s) dropped, parameters %s\n",
                    static_cast<unsigned long long>(shard.pushes()), shard.dropped_workers().size(),
                    exact ? "exact" : "WRONG");
        for (const auto& why : shard.dropped_workers()) std::printf("server: dropped: %s\n", why.c_str());
        if (!exact) status = 1;
        return;
      }
      if (!aggregate) e.continue_without_lost_peers(true);  // the other workers may die too
      Client client({{0, parameters}}, workers);
      std::vector<float> params(parameters), grads(parameters, 1.0f);
      client.exchange_full(e, detail::PsHeader::hello, params);
      const std::size_t mine = e.rank() == victim ? victim_pushes : pushes;
      std::size_t sent = 0;
      const auto start = Clock::now();
      try {
        while (seconds > 0 ? std::chrono::duration<double>(Clock::now() - start).count() < seconds : sent < mine) {
          client.push(e, 0, grads);
          client.pull(e, 0, params);
          ++sent;
          // A step's computation: the server waits between pushes, as in training, and the
          // machine's cores stay free for its checks.
          if (stall) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          if (e.rank() == victim && sent == victim_pushes) {
            if (!stall) ::raise(SIGKILL);
            std::printf("worker %zu: stopping, pid %ld\n", e.rank(), static_cast<long>(::getpid()));
            std::fflush(stdout);
            ::raise(SIGSTOP);  // the driver kills it once the server has dropped it
          }
        }
        client.exchange_full(e, detail::PsHeader::done, params);
      } catch (const TransportError& err) {
        std::printf("caught after %lld ms: %s\n", ms_since(t0), err.what());
        std::fflush(stdout);
        throw;
      }
      std::printf("worker %zu: pushed %zu\n", e.rank(), sent);
    });
  } catch (const TransportError& err) {
    std::printf("error: %s\n", err.what());
    return 3;
  }
  return status;
}

/// When worker 2 said it stops and when the server said it dropped it, as the driver read them.
struct StallTimes {
  std::mutex m;
  std::optional<Clock::time_point> stopped, dropped;
  std::vector<std::optional<Clock::time_point>> failed;  // by rank: its first line with an error
  long victim_pid = 0;
  bool victim_killed = false;
};

/// Starts the job and checks it.
int drive(const Program& self, const std::string& what, double seconds) {
  const bool soak = what == "soak", stall_sync = what == "stall-sync", stall = what == "stall" || stall_sync;
  const std::size_t ranks = soak ? 17 : 5;
  // The stall case: `seconds` is the heartbeat interval in milliseconds.
  const long long interval = stall ? static_cast<long long>(seconds) : 0, limit = 6 * interval;  // TcpOptions' misses
  flotilla_test::JobSpec spec;
  spec.ranks = ranks;
  if (stall)
    spec.command = self.command({stall_sync ? "stall-sync-rank" : "stall-rank", "2", "20", "0",
                                 std::to_string(2.0 * static_cast<double>(limit) / 1000.0), std::to_string(interval)});
  else
    spec.command = self.command({what == "sync" ? "sync-rank" : "async-rank", soak ? "99" : "2", "20", "200",
                                 std::to_string(soak ? seconds : 0.0)});
  spec.timeout = std::chrono::seconds(soak ? static_cast<long>(seconds) + 60 : 60);
  StallTimes times;
  times.failed.resize(ranks);
  // The victim is killed as soon as the server has dropped it, or has failed without doing so:
  // no stopped process outlives the test.
  auto kill_victim = [&] {
    if (times.victim_pid > 0 && !times.victim_killed) {
      ::kill(static_cast<pid_t>(times.victim_pid), SIGKILL);
      times.victim_killed = true;
    }
  };
  if (stall)
    spec.on_line = [&](std::size_t rank, const std::vector<std::string>& out) {
      const auto now = Clock::now();
      const std::string& text = out[rank];
      const auto last = text.rfind('\n', text.size() - 2);
      const std::string line = text.substr(last == std::string::npos ? 0 : last + 1);
      const std::lock_guard lock(times.m);
      if (rank == 2 && contains(line, "stopping, pid ")) {
        times.stopped = now;
        times.victim_pid = std::stol(line.substr(line.find("pid ") + 4));
      }
      if (rank == ranks - 1 && contains(line, "dropped worker 2")) {
        if (!times.dropped) times.dropped = now;
        kill_victim();
      }
      if ((contains(line, "error: ") || contains(line, "caught after ")) && !times.failed[rank]) times.failed[rank] = now;
      if (rank == ranks - 1 && (contains(line, "error: ") || contains(line, "server: applied"))) kill_victim();
    };
  const auto job = flotilla_test::run_job(spec);
  {
    const std::lock_guard lock(times.m);
    kill_victim();
  }
  const auto& out = job.out;
  const std::size_t server = ranks - 1;
  flotilla_test::Checks check;
  job.print();
  if (stall_sync) {
    check.killed(job, 2, "worker 2");
    const std::lock_guard lock(times.m);
    check.expect(times.stopped.has_value(), "worker 2 should have said that it stops");
    for (std::size_t r = 0; r < ranks; ++r) {
      if (r == 2) continue;
      check.stopped_naming(job, r, 2);
      check.expect(contains(out[r], "it is stalled"), "rank " + std::to_string(r) + " should say that rank 2 stalled");
      if (times.stopped && times.failed[r])
        std::printf("stall-sync: rank %zu named it %lld ms after it stopped (stall limit %lld ms, heartbeats every %lld ms)\n",
                    r, static_cast<long long>(
                           std::chrono::duration_cast<std::chrono::milliseconds>(*times.failed[r] - *times.stopped).count()),
                    limit, interval);
    }
  } else if (what == "async" || stall || soak) {
    std::size_t sent = 0;
    for (std::size_t r = 0; r < server; ++r) {
      if (!soak && r == 2) {
        check.killed(job, r, "worker 2");
        sent += 20;
        continue;
      }
      check.finished(job, r, "should have finished");
      const auto at = out[r].find("pushed ");
      if (at != std::string::npos) sent += std::stoul(out[r].substr(at + 7));
    }
    check.expect(job.exit(server).ok(), "the server should have finished: " + job.describe(server));
    check.expect(contains(out[server], "server: applied " + std::to_string(sent) + " pushes"),
                 "the server should have applied the " + std::to_string(sent) + " pushes sent");
    check.expect(contains(out[server], "parameters exact"), "the parameters should be exact");
    if (!soak) {
      check.expect(contains(out[server], "1 worker(s) dropped"), "the server should have dropped worker 2");
      check.expect(contains(out[server], "rank 2 at 127.0.0.1:"), "the server should name rank 2 and its host");
    }
    if (stall) {
      check.expect(contains(out[server], "it is stalled"), "the server should say that worker 2 stalled");
      const std::lock_guard lock(times.m);
      check.expect(times.stopped.has_value(), "worker 2 should have said that it stops");
      check.expect(times.dropped.has_value(), "the server should have said that it dropped worker 2");
      if (times.stopped && times.dropped) {
        const long long delay =
            std::chrono::duration_cast<std::chrono::milliseconds>(*times.dropped - *times.stopped).count();
        std::printf("stall: worker 2 dropped %lld ms after it stopped (stall limit %lld ms, heartbeats every %lld ms)\n",
                    delay, limit, interval);
        check.expect(delay >= limit - interval && delay <= (limit + interval) * flotilla_test::time_scale,
                     "the server should drop the stopped worker between " + std::to_string(limit - interval) + " and " +
                         std::to_string(limit + interval) + " ms after it stopped, not after " +
                         std::to_string(delay) + " ms");
      }
    }
    std::printf("%s: %zu workers, %zu pushes sent and applied in %lld ms\n", what.c_str(), server, sent, job.milliseconds());
  } else {
    check.killed(job, 2, "worker 2");
    for (std::size_t r = 0; r < ranks; ++r) {
      if (r == 2) continue;
      check.stopped_naming(job, r, 2);
      check.expect(contains(out[r], "closed the connection"), "rank " + std::to_string(r) + " should say how rank 2 failed");
    }
    check.expect(contains(out[server], "recv_any from any rank"), "the server should name its operation");
    check.in_time(job, std::chrono::seconds(10), "the job should stop at once");
  }
  return check.verdict();
}

}  // namespace

int run(const Program& self, int argc, char** argv) {
  return flotilla_test::guarded_main([&] {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "drive" && argc > 2)
      return drive(self, argv[2],
                   argc > 3 ? std::stod(argv[3]) : std::string(argv[2]).rfind("stall", 0) == 0 ? 100.0 : 10.0);
    if ((mode == "async-rank" || mode == "sync-rank") && argc > 5)
      return rank_main(mode == "sync-rank", std::stoul(argv[2]), std::stoul(argv[3]), std::stoul(argv[4]),
                       std::stod(argv[5]));
    if ((mode == "stall-rank" || mode == "stall-sync-rank") && argc > 6)
      return rank_main(mode == "stall-sync-rank", std::stoul(argv[2]), std::stoul(argv[3]), std::stoul(argv[4]),
                       std::stod(argv[5]), true, std::chrono::milliseconds(std::stol(argv[6])));
    std::fprintf(stderr, "usage: %s drive async|sync|soak [seconds] | drive stall|stall-sync [heartbeat ms]\n",
                 self.name().c_str());
    return 2;
  });
}

}  // namespace flotilla_test::ps_recovery
