// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The transport conformance suite over MPI: run under mpirun with N processes,
//   mpirun -n N flotilla_mpi_conformance N [folded]
// `folded` limits flotilla to MPI tag 0, so that every tag but 0 is folded (see MpiEndpoint::route):
// the path taken on MPI libraries with a small MPI_TAG_UB.
// Each rank runs every check; a violation throws, run() prints it naming the rank and aborts the job,
// so the test fails with a non-zero exit status.
#include "flotilla/testing/transport_conformance.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "flotilla/transport/mpi.hpp"

using flotilla::transport::Mpi;

static_assert(flotilla::Transport<Mpi::endpoint>);
static_assert(flotilla::NativeAllreduce<Mpi::endpoint>);
static_assert(flotilla::TransportBackend<Mpi>);

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "folded")) {
    std::fprintf(stderr, "usage: mpirun -n N %s N [folded]\n", argv[0]);
    return 2;
  }
  const std::size_t ranks = std::stoul(argv[1]);
  Mpi::options o;
  o.timeout = std::chrono::seconds(60);  // generous: 4 ranks share 2 cores in CI
  if (argc == 3) o.max_mpi_tag = 0;
  Mpi::run(o, ranks, [&](Mpi::endpoint& e) {
    flotilla::testing::transport_conformance(e);
    if (e.rank() == 0)
      std::printf("mpi conformance%s: %zu rank(s) passed\n", e.tag_upper_bound() == 0 ? " (folded tags)" : "",
                  e.size());
  });
  return 0;
}
