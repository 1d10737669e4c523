// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A job in which one rank fails while the others wait for it must end promptly, well before the
// others' 30 s timeout, with the failure printed. Driven by check_rank_failure.cmake, which checks
// the exit status, the message and the time taken. Two ways to fail, by the first argument:
//   throws  (default) rank 1 throws while the others wait in a receive: run() prints the error
//           naming the rank and ends the whole job with MPI_Abort;
//   stalls  rank 1 stays alive but never joins an allreduce_sum the others are in (a blocking
//           MPI_Allreduce): their watchdog prints which call timed out and ends the job, after the
//           2 s timeout this mode sets;
//   handler as stalls, with a watchdog handler of the program's own (Options::on_timeout): it is
//           called with what timed out, instead of the default's message, and ends the process
//           itself;
//   kill    rank 1 is killed with SIGKILL while the others wait in a receive: mpirun must notice
//           and end the job, naming the rank. (Open MPI 4.1 without ULFM cannot go on after a rank
//           dies, whatever the policy: an asynchronous job over MPI stops too.)
//   stop    rank 1 stops itself (SIGSTOP) while the others wait in a receive from it: their receive
//           times out after the 2 s this mode sets, and the error names rank 1 and its host; the
//           job then ends through MPI_Abort, which kills the stopped rank too.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "flotilla/transport/mpi.hpp"

using flotilla::transport::Mpi;

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "throws";
  const bool stalls = mode == "stalls" || mode == "handler";
  Mpi::options o;
  o.timeout = stalls || mode == "stop" ? std::chrono::seconds(2) : std::chrono::seconds(30);
  if (mode == "handler")
    o.on_timeout = [](const flotilla::transport::mpi::WatchdogTimeout& t) {
      std::fprintf(stderr, "rank_failure: on_timeout: %s of %llu values on rank %zu of %zu after %lld ms\n",
                   t.operation.c_str(), static_cast<unsigned long long>(t.values), t.rank, t.ranks,
                   static_cast<long long>(t.timeout.count()));
      std::fflush(stderr);
      std::_Exit(3);
    };
  Mpi::run(o, Mpi::launched_ranks(), [&](Mpi::endpoint& e) {
    if (e.rank() == 1) {
      if (stalls) std::this_thread::sleep_for(std::chrono::minutes(5));  // ended by mpirun long before
      std::this_thread::sleep_for(std::chrono::milliseconds(100));       // the others are waiting by now
      if (mode == "kill") ::raise(SIGKILL);
      if (mode == "stop") ::raise(SIGSTOP);
      throw std::runtime_error("rank one broke on purpose");
    }
    if (stalls) {
      std::vector<float> values(4, 1.0f);
      e.allreduce_sum(values);  // rank 1 never joins
    }
    std::vector<std::byte> buffer(4);
    e.recv(1, 7, buffer);  // never sent
  });
  return 0;  // not reached: the job is aborted
}
