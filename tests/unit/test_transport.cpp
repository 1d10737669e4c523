// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The in-process transport: the conformance suite for 1 to 8 ranks, plus failure handling.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <stdexcept>

#include "flotilla/testing/transport_conformance.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_transport {

using namespace flotilla;
using transport::InProcess;

TEST_CASE("the in-process transport passes the conformance suite") {
  static_assert(Transport<InProcess::endpoint>);
  static_assert(TransportBackend<InProcess>);
  for (std::size_t ranks = 1; ranks <= 8; ++ranks) {
    CAPTURE(ranks);
    CHECK_NOTHROW(InProcess::run({}, ranks, [](InProcess::endpoint& e) { testing::transport_conformance(e); }));
  }
  static_assert(KnowsRanksOnHost<InProcess::endpoint>);
  InProcess::run({}, 3, [](InProcess::endpoint& e) { CHECK(e.ranks_on_this_host() == 3); });
}

/// An environment of the given variables only.
transport::EnvironmentLookup only(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST_CASE("a process that a launcher started as one of several does not train alone") {
  // What the launcher's variables say, given directly (the environment is the process's, shared
  // by every test: launch_environment() reads it through a lookup, tested in tcp.options).
  const auto torchrun = transport::launch_environment(only({{"RANK", "1"}, {"WORLD_SIZE", "4"}}));
  REQUIRE(torchrun.launcher == transport::Launcher::torchrun);
  CHECK_THROWS_WITH_AS(InProcess::refuse_under_launcher(torchrun),
                       doctest::Contains("rank 1 of 4 of a job that torchrun started (RANK=1 WORLD_SIZE=4)"), ConfigError);
  CHECK_THROWS_WITH_AS(InProcess::refuse_under_launcher(torchrun), doctest::Contains("transport::Tcp"), ConfigError);
  const auto alone = transport::launch_environment(only({}));
  CHECK(alone.launcher == transport::Launcher::none);
  CHECK_NOTHROW(InProcess::refuse_under_launcher(alone));
  const auto one = transport::launch_environment(only({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}));
  CHECK(one.launcher == transport::Launcher::open_mpi);
  CHECK_NOTHROW(InProcess::refuse_under_launcher(one));  // mpirun -n 1: the whole job is this process

  // run() itself, under torchrun's variables in this process's environment.
  if (!std::getenv("RANK") && !std::getenv("WORLD_SIZE")) {
    ::setenv("RANK", "1", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    CHECK_THROWS_AS(InProcess::run({}, 1, [](InProcess::endpoint&) {}), ConfigError);
    transport::InProcessOptions beside;
    beside.beside_launched_job = true;
    CHECK_NOTHROW(InProcess::run(beside, 2, [](InProcess::endpoint& e) { testing::transport_conformance(e); }));
    ::unsetenv("RANK");
    ::unsetenv("WORLD_SIZE");
  }
}

TEST_CASE("a failing rank aborts the others, and run() rethrows its error") {
  std::atomic<int> woken{0};
  try {
    InProcess::run({}, 4, [&](InProcess::endpoint& e) {
      if (e.rank() == 2) throw std::runtime_error("rank two broke");
      std::vector<std::byte> b(4);
      try {
        e.recv(2, 1, b);  // never sent: must be woken by the abort, not hang
      } catch (const TransportError& err) {
        if (std::string(err.what()).find("rank 2 failed: rank two broke") != std::string::npos) ++woken;
        throw;
      }
    });
    FAIL("expected an exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "rank two broke");
  }
  CHECK(woken == 3);
}

TEST_CASE("waits time out with a message naming the rank, peer and operation") {
  transport::InProcessOptions o;
  o.timeout = std::chrono::milliseconds(50);
  const auto started = std::chrono::steady_clock::now();
  try {
    InProcess::run(o, 2, [](InProcess::endpoint& e) {
      std::vector<std::byte> b(4);
      if (e.rank() == 0) e.recv(1, 9, b);
    });
    FAIL("expected a timeout");
  } catch (const TransportError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("rank 0") != std::string::npos);
    CHECK(msg.find("recv from rank 1") != std::string::npos);
    CHECK(msg.find("timed out") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  CHECK_THROWS_WITH_AS(InProcess::run({}, 2,
                                      [](InProcess::endpoint& e) {
                                        if (e.rank() == 0) e.send(5, 1, {});
                                      }),
                       doctest::Contains("the job has 2 ranks"), TransportError);
}

}  // namespace unit_transport
