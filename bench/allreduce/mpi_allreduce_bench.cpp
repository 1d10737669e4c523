// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// What bounding the waits costs: MpiEndpoint's allreduce_sum and sendrecv against bare MPI calls,
// at 4 KiB to 64 MiB.
//
//   mpirun -n 2 flotilla_mpi_allreduce_bench [max_bytes] [repetitions]
//
// Allreduce variants, each in place on floats:
//   blocking           MPI_Allreduce (the target: the transport within 5% of it)
//   iallreduce+spin    MPI_Iallreduce, MPI_Test in a tight loop
//   iallreduce+yield   MPI_Iallreduce, MPI_Test, yielding after 100 us
//   iallreduce+sleep   MPI_Iallreduce, MPI_Test, sleeping after 1 ms (as an idle wait would)
//   ibarrier+blocking  an MPI_Ibarrier polled (spin, then yield), then MPI_Allreduce
//   endpoint           flotilla's MpiEndpoint::allreduce_sum (ibarrier+blocking, as chosen)
// Ring exchange (each rank sends to the next and receives from the previous):
//   MPI_Sendrecv       blocking
//   endpoint           MpiEndpoint::sendrecv (MPI_Isend + MPI_Improbe/MPI_Imrecv, polled)
// For each size the variants take turns, `repetitions` times, in an order that rotates, each turn
// timing enough iterations to last about 50 ms; the best turn of each variant is reported (the
// slowest rank's time), which filters out noise from other processes on a shared machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "flotilla/transport/mpi.hpp"

using flotilla::transport::Mpi;
using flotilla::transport::mpi::detail::MpiBackoff;
using flotilla::transport::mpi::detail::MpiWait;
using Clock = std::chrono::steady_clock;

namespace {

/// Tests `r` until it completes, pausing between tests as a wait in state `pending` would (or not
/// at all).
void poll(MPI_Request& r, MpiWait pending, bool pause) {
  MpiBackoff backoff;
  int done = 0;
  for (;;) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (pause) backoff.pause(pending);
  }
}

using Variant = std::pair<std::string, std::function<void()>>;

/// Times each variant at each size (bytes) and prints one row per size; `prepare(bytes)` sizes the
/// buffers and `factor` turns bytes per call into the bandwidth printed.
void measure(const char* title, const std::vector<Variant>& variants, const std::function<void(std::size_t)>& prepare,
             double factor, std::size_t max_bytes, int repetitions, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    std::printf("\n%s; best of %d turns; time per call in us (GB/s)\n%10s", title, repetitions, "bytes");
    for (const auto& v : variants) std::printf(" %19s", v.first.c_str());
    std::printf(" %18s\n", "endpoint/first");
  }
  for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    prepare(bytes);
    // Iterations per turn: enough for ~50 ms by the first variant, agreed by all ranks.
    const auto t0 = Clock::now();
    for (int i = 0; i < 3; ++i) variants[0].second();
    double once = std::chrono::duration<double>(Clock::now() - t0).count() / 3;
    MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, comm);
    const int iterations = std::clamp(static_cast<int>(0.05 / once), 3, 10000);
    std::vector<double> best(variants.size(), 1e30);
    for (int rep = 0; rep < repetitions; ++rep) {
      // The order rotates from turn to turn: a variant that always ran first (or right after
      // another) would be measured 10-50% apart from the same code run elsewhere in the turn.
      for (std::size_t k = 0; k < variants.size(); ++k) {
        const std::size_t v = (k + static_cast<std::size_t>(rep)) % variants.size();
        variants[v].second();  // warm-up
        MPI_Barrier(comm);
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) variants[v].second();
        double t = std::chrono::duration<double>(Clock::now() - start).count() / iterations;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
        best[v] = std::min(best[v], t);
      }
    }
    if (rank == 0) {
      std::printf("%10zu", bytes);
      for (const double t : best)
        std::printf(" %10.1f (%6.2f)", t * 1e6, factor * static_cast<double>(bytes) / t / 1e9);
      std::printf(" %18.3f\n", best.back() / best.front());
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t max_bytes = argc > 1 ? std::stoull(argv[1]) : std::size_t{64} << 20;
  const int repetitions = argc > 2 ? std::stoi(argv[2]) : 5;
  Mpi::options o;
  o.timeout = std::chrono::minutes(5);
  const int world = static_cast<int>(Mpi::launched_ranks());

  Mpi::run(o, Mpi::launched_ranks(), [&](Mpi::endpoint& e) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    std::vector<float> data;
    const auto n = [&] { return static_cast<int>(data.size()); };
    const auto iallreduce = [&](MpiWait pending, bool pause) {
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, data.data(), n(), MPI_FLOAT, MPI_SUM, comm, &r);
      poll(r, pending, pause);
    };
    const std::vector<Variant> allreduces = {
        {"blocking", [&] { MPI_Allreduce(MPI_IN_PLACE, data.data(), n(), MPI_FLOAT, MPI_SUM, comm); }},
        {"iallreduce+spin", [&] { iallreduce(MpiWait::busy, false); }},
        {"iallreduce+yield", [&] { iallreduce(MpiWait::busy, true); }},
        {"iallreduce+sleep", [&] { iallreduce(MpiWait::idle, true); }},
        {"ibarrier+blocking",
         [&] {
           MPI_Request r;
           MPI_Ibarrier(comm, &r);
           poll(r, MpiWait::busy, true);
           MPI_Allreduce(MPI_IN_PLACE, data.data(), n(), MPI_FLOAT, MPI_SUM, comm);
         }},
        {"endpoint", [&] { e.allreduce_sum(data); }},
    };
    // Bus bandwidth, 2(N-1)/N * bytes / time: what each rank's link carries in a ring.
    measure(("allreduce_sum of floats, " + std::to_string(world) + " ranks").c_str(), allreduces,
            [&](std::size_t bytes) { data.assign(bytes / sizeof(float), 0.0f); },  // zeros: never denormal or inf
            2.0 * (world - 1) / world, max_bytes, repetitions, comm);

    std::vector<std::byte> out, in;
    const int right = static_cast<int>((e.rank() + 1) % e.size()),
              left = static_cast<int>((e.rank() + e.size() - 1) % e.size());
    const std::vector<Variant> exchanges = {
        {"MPI_Sendrecv",
         [&] {
           MPI_Sendrecv(out.data(), static_cast<int>(out.size()), MPI_BYTE, right, 1, in.data(),
                        static_cast<int>(in.size()), MPI_BYTE, left, 1, comm, MPI_STATUS_IGNORE);
         }},
        {"endpoint", [&] { e.sendrecv(static_cast<std::size_t>(right), 1, out, static_cast<std::size_t>(left), in); }},
    };
    // Bytes each rank sends per call (and receives as many).
    measure(("ring sendrecv, " + std::to_string(world) + " ranks").c_str(), exchanges,
            [&](std::size_t bytes) {
              out.assign(bytes, std::byte{1});
              in.assign(bytes, std::byte{0});
            },
            1.0, max_bytes, repetitions, comm);
    MPI_Comm_free(&comm);
  });
  return 0;
}
