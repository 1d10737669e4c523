// A job in which one rank fails while the others wait for it: run() must print the error naming the
// rank and end the whole job with MPI_Abort, well before the others' 30 s timeout. With the
// argument "kill", rank 1 is killed (SIGKILL) instead: mpirun must notice and end the job, naming
// it. (Open MPI 4.1 without ULFM cannot go on after a rank dies, whatever the policy: an
// asynchronous job over MPI stops too. Driven by check_rank_failure.cmake, which checks the exit
// status, the message and the time taken.)
#include <signal.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "flotilla/transport/mpi.hpp"

using flotilla::transport::Mpi;

int main(int argc, char** argv) {
  const bool kill = argc > 1 && std::strcmp(argv[1], "kill") == 0;
  Mpi::options o;
  o.timeout = std::chrono::seconds(30);
  Mpi::run(o, Mpi::launched_ranks(), [kill](Mpi::endpoint& e) {
    if (e.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the others are waiting by now
      if (kill) ::raise(SIGKILL);
      throw std::runtime_error("rank one broke on purpose");
    }
    std::vector<std::byte> buffer(4);
    e.recv(1, 7, buffer);  // never sent
  });
  return 0;  // not reached: the job is aborted
}
