// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Sums each rank's number over the job with the MPI transport; rank 0 prints the total.
#include <cstdio>
#include <flotilla/transport/mpi.hpp>
#include <vector>

int main() {
  using flotilla::transport::Mpi;
  Mpi::run({}, Mpi::launched_ranks(), [](flotilla::transport::MpiEndpoint& e) {
    std::vector<float> v{static_cast<float>(e.rank() + 1)};
    e.allreduce_sum(v);
    if (e.rank() == 0)
      std::printf("flotilla mpi consumer: sum %g over %zu ranks\n", static_cast<double>(v[0]), e.size());
  });
  return 0;
}
