// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The workers' reductions through parameter server 0 (topology/detail/ps_reduce.hpp), over the in-process
// transport: sums in worker order and maxima, the contributor list that tells the workers who is
// left, a round that completes without a worker that is gone, and a malformed announcement refused
// with an error naming the worker. The server side runs a minimal loop here, not
// ParameterServerShard::serve (whose use of it the Trainer tests and ps_trainer_recovery cover).
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flotilla/topology/detail/ps_reduce.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_ps_reduce {

using namespace flotilla;
using transport::InProcess;

namespace {

constexpr std::size_t announce_size = detail::PsHeader::size + 64;

/// Server 0 (rank `workers`): receives announcements until `rounds` rounds have been answered;
/// workers marked in `gone` are not waited for.
void serve_rounds(InProcess::endpoint& e, std::size_t workers, std::size_t rounds, const std::vector<char>& gone) {
  detail::PsReduceRounds r(workers);
  std::vector<std::byte> in(announce_size);
  auto never = [](const PeerLostError& err) { throw err; };
  while (r.round() < rounds) {
    const std::size_t w = e.recv_any(detail::protocol_tags::ps_push, in);
    r.receive(e, w, detail::PsHeader::read(in.data()));
    r.answer_if_complete(e, gone, never);
  }
}

}  // namespace

TEST_CASE("ps reduce: sums in worker order, maxima, and the same contributor list for every worker") {
  constexpr std::size_t workers = 3;
  std::vector<std::vector<double>> results(workers);
  std::vector<std::vector<std::size_t>> contributors(workers);
  InProcess::run({}, workers + 1, [&](InProcess::endpoint& e) {
    if (e.rank() == workers) return serve_rounds(e, workers, 2, std::vector<char>(workers, 0));
    std::vector<std::byte> announce(announce_size);
    const double r = static_cast<double>(e.rank());
    std::vector<double> v = {r + 1, 0.1 * r, 10 * r, -r};  // two summed, two maximised
    const auto a = detail::ps_reduce(e, workers, 0, std::span<double>(v), 2, announce);
    // A second round of nothing: a barrier.
    const auto b = detail::ps_reduce(e, workers, 1, std::span<double>(), 0, announce);
    if (b.contributors != a.contributors) throw std::runtime_error("the barrier's contributors differ");
    results[e.rank()] = v;
    contributors[e.rank()] = a.contributors;
  });
  const double tenth_sum = (0.0 + 0.1) + 0.2;  // in worker order
  for (std::size_t w = 0; w < workers; ++w) {
    CHECK(results[w] == std::vector<double>{6.0, tenth_sum, 20.0, 0.0});
    CHECK(contributors[w] == std::vector<std::size_t>{0, 1, 2});
  }
}

TEST_CASE("ps reduce: a round completes without a worker that is gone, and says who took part") {
  constexpr std::size_t workers = 3;
  std::vector<std::vector<std::size_t>> contributors(workers);
  std::vector<double> sum(workers, 0);
  InProcess::run({}, workers + 1, [&](InProcess::endpoint& e) {
    if (e.rank() == workers) return serve_rounds(e, workers, 1, {0, 1, 0});  // worker 1 died or finished
    if (e.rank() == 1) return;
    std::vector<std::byte> announce(announce_size);
    std::vector<double> v = {static_cast<double>(e.rank()) + 1};
    contributors[e.rank()] = detail::ps_reduce(e, workers, 0, std::span<double>(v), 1, announce).contributors;
    sum[e.rank()] = v[0];
  });
  for (const std::size_t w : {std::size_t{0}, std::size_t{2}}) {
    CHECK(contributors[w] == std::vector<std::size_t>{0, 2});
    CHECK(sum[w] == 4.0);
  }
}

TEST_CASE("ps reduce: a malformed announcement is refused, naming the worker and the problem") {
  auto refused = [](detail::PsHeader h) {
    std::string what;
    InProcess::run({}, 2, [&](InProcess::endpoint& e) {
      std::vector<std::byte> msg(announce_size);
      if (e.rank() == 0) {
        h.write(msg.data());
        e.send(1, detail::protocol_tags::ps_push, msg);
        return;
      }
      detail::PsReduceRounds r(1);
      const std::size_t w = e.recv_any(detail::protocol_tags::ps_push, msg);
      try {
        r.receive(e, w, detail::PsHeader::read(msg.data()));
      } catch (const TransportError& err) {
        what = err.what();
      }
    });
    return what;
  };
  using H = detail::PsHeader;
  const std::string too_many = refused(H{H::reduce, 0, 0, detail::ps_reduce_max_values + 1, 0});
  CHECK(too_many.find("reduction from worker 0 announces " + std::to_string(detail::ps_reduce_max_values + 1) +
                      " values") != std::string::npos);
  const std::string summed = refused(H{H::reduce, 0, 0, 2, 3});
  CHECK(summed.find("announces 2 values (3 summed)") != std::string::npos);
  const std::string round = refused(H{H::reduce, 0, 5, 1, 1});
  CHECK(round.find("is for round 5, this server is at round 0") != std::string::npos);
}

}  // namespace unit_ps_reduce
