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
//   drive soak S  16 workers push to one server as fast as they can for S seconds, then stop;
//                 pushes applied must equal pushes sent (summed over the workers' reports), and the
//                 parameters must be exactly what that many unit gradients make.
//
// Exit status 0 when what happened is what should have; otherwise it prints why and exits 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
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

/// One rank. `victim` dies after `victim_pushes`; the others push `pushes` times, or for `seconds`
/// when that is > 0.
int rank_main(bool aggregate, std::size_t victim, std::size_t victim_pushes, std::size_t pushes, double seconds) {
  const auto o = transport::TcpOptions::from_environment();
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
        shard.serve(e, workers, aggregate, aggregate ? 0 : 2, sgd, [](std::uint64_t) { return 1.0; });
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
          if (e.rank() == victim && sent == victim_pushes) ::raise(SIGKILL);
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

/// Starts the job and checks it.
int drive(const Program& self, const std::string& what, double seconds) {
  const bool soak = what == "soak";
  const std::size_t ranks = soak ? 17 : 5;
  flotilla_test::JobSpec spec;
  spec.ranks = ranks;
  spec.command = self.command({what == "sync" ? "sync-rank" : "async-rank", soak ? "99" : "2", "20", "200",
                  std::to_string(soak ? seconds : 0.0)});
  spec.timeout = std::chrono::seconds(soak ? static_cast<long>(seconds) + 60 : 60);
  const auto job = flotilla_test::run_job(spec);
  const auto& out = job.out;
  const std::size_t server = ranks - 1;
  flotilla_test::Checks check;
  job.print();
  if (what == "async" || soak) {
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
    if (mode == "drive" && argc > 2) return drive(self, argv[2], argc > 3 ? std::stod(argv[3]) : 10.0);
    if ((mode == "async-rank" || mode == "sync-rank") && argc > 5)
      return rank_main(mode == "sync-rank", std::stoul(argv[2]), std::stoul(argv[3]), std::stoul(argv[4]),
                       std::stod(argv[5]));
    std::fprintf(stderr, "usage: %s drive async|sync|soak [seconds]\n", self.name().c_str());
    return 2;
  });
}

}  // namespace flotilla_test::ps_recovery
