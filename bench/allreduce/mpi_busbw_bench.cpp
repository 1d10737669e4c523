// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_mpi_busbw_bench: allreduce bus bandwidth under mpirun, bare MPI_Allreduce next to
// flotilla's MPI transport: collective::ring_allreduce on a transport::MpiEndpoint with its default
// options (`flotilla`: the endpoint's MPI_Allreduce up to MpiOptions::native_allreduce_max_bytes,
// flotilla's ring above), and each of the two alone: `flotilla-native` (AllreduceAlgorithm::native:
// MPI_Allreduce, behind the endpoint's deadline) and `flotilla-ring` (the ring over the endpoint's
// send/recv).
//
//   mpirun -n 2 --mca pml ob1 --mca btl vader,self flotilla_mpi_busbw_bench [--sizes 4K,64M] [--repeat 5]
//
// One JSON line per measurement on rank 0 (see allreduce_common.hpp for the timing loop).
#include <mpi.h>

#include <flotilla/collective/ring_allreduce.hpp>
#include <flotilla/transport/mpi.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "allreduce_common.hpp"
#include "../../examples/flag_help.hpp"

#include <flotilla/cli/flags.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int status = 0;
  try {
    flotilla::cli::Flags flags("flotilla_mpi_busbw_bench", "allreduce bus bandwidth: MPI_Allreduce and flotilla's MPI transport");
    auto& sizes = flags.add<std::string>("sizes", "", "comma-separated bytes with K/M suffixes (default 4K..64M, powers of 4)");
    auto& repeat = flags.add<std::size_t>("repeat", 5, example::flag_help::repeat);
    auto& target = flags.add<double>("target", 0.25, "seconds per measurement");
    auto& label = flags.add<std::string>("label", "mpi", "label printed with each line");
    auto& methods_flag = flags.add<std::string>("methods", "mpi,flotilla,flotilla-native,flotilla-ring", "which to time");
    std::ostringstream help;
    if (!flags.parse(argc, argv, help)) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0) std::cout << help.str();
      MPI_Finalize();
      return 0;
    }

    MPI_Comm bare = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &bare);
    int rank = 0, size = 1;
    MPI_Comm_rank(bare, &rank);
    MPI_Comm_size(bare, &size);
    flotilla::transport::MpiEndpoint endpoint;  // duplicates MPI_COMM_WORLD itself

    bench::Job job;
    job.rank = static_cast<std::size_t>(rank);
    job.size = static_cast<std::size_t>(size);
    job.barrier = [&] { MPI_Barrier(bare); };
    job.max = [&](double v) {
      double out = 0;
      MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, bare);
      return out;
    };
    job.from_rank0 = [&](std::size_t v) {
      unsigned long long x = v;
      MPI_Bcast(&x, 1, MPI_UNSIGNED_LONG_LONG, 0, bare);
      return static_cast<std::size_t>(x);
    };

    std::vector<bench::Method> all = {
        {"mpi",
         [&](std::vector<float>& b) {
           MPI_Allreduce(MPI_IN_PLACE, b.data(), static_cast<int>(b.size()), MPI_FLOAT, MPI_SUM, bare);
         }},
        {"flotilla", [&](std::vector<float>& b) { flotilla::collective::ring_allreduce(endpoint, std::span<float>(b)); }},
        {"flotilla-native",
         [&](std::vector<float>& b) {
           flotilla::collective::RingOptions o;
           o.algorithm = flotilla::collective::AllreduceAlgorithm::native;
           flotilla::collective::ring_allreduce(endpoint, std::span<float>(b), o);
         }},
        {"flotilla-ring",
         [&](std::vector<float>& b) {
           flotilla::collective::RingOptions o;
           o.algorithm = flotilla::collective::AllreduceAlgorithm::ring;
           flotilla::collective::ring_allreduce(endpoint, std::span<float>(b), o);
         }},
    };
    std::vector<bench::Method> chosen;
    for (const auto& m : all)
      if (("," + methods_flag + ",").find("," + m.name + ",") != std::string::npos) chosen.push_back(m);

    bench::Settings s;
    s.sizes = bench::parse_sizes(sizes);
    s.repeat = repeat;
    s.target_seconds = target;
    s.label = label;
    bench::run(job, chosen, s);
    MPI_Comm_free(&bare);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_mpi_busbw_bench: %s\n", e.what());
    status = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
