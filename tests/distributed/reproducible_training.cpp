// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// policy::Reproducible across processes: a job of N ranks (flotilla-launch over TCP, or mpirun)
// ends 50 updates with the same bits as one worker on one core in this process.
//
// Run as `flotilla_distributed_<backend> reproducible THREADS`: every rank trains on THREADS cores
// with batch 48 / N; rank 0 then trains the reference alone (1 worker, 1 core, batch 48) and
// compares the parameters bit for bit. It also prints how far the ordinary synchronous job of the
// same ranks ends from that reference, which is what the mode is for.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "../common/process_backend.hpp"
#include "../common/reproducible_run.hpp"
#include "../common/test_program.hpp"

namespace flotilla_test::reproducible_training {

using flotilla_test::Backend;
using flotilla_test::backend_options;
using flotilla_test::rank_and_size;
namespace r = flotilla_test::reproducible;

static std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

int run(const Program& self, int argc, char** argv) {
  try {
    if (argc != 2) {
      std::fprintf(stderr, "usage: %s THREADS\n", self.name().c_str());
      return 2;
    }
    const std::size_t threads = static_cast<std::size_t>(std::stoul(argv[1]));
    const auto [rank, world] = rank_and_size();
    if (r::global_batch % world != 0 || (r::global_batch / world) % 2 != 0) {
      std::fprintf(stderr, "reproducible: %zu ranks do not divide the global batch of %zu into shards of 2\n", world,
                   r::global_batch);
      return 2;
    }
    const auto job = r::fifty_steps<flotilla::policy::Reproducible, Backend>(0, world, threads, r::shards_of_two(),
                                                                           backend_options());
    const auto ordinary = r::fifty_steps<flotilla::policy::Synchronous<>, Backend>(0, world, threads, {}, backend_options());
    if (rank != 0) return 0;  // rank 0 alone trains the reference and compares
    const auto reference = r::fifty_steps(1, 1, 1, r::shards_of_two(),
                                          flotilla::transport::InProcessOptions{.beside_launched_job = true});
    const std::size_t bad = differing(job, reference), drift = differing(ordinary, reference);
    std::printf("reproducible, %zu ranks of %zu cores: %zu of %zu parameters differ from one worker on one core "
                "(the ordinary synchronous job: %zu)\n",
                world, threads, bad, reference.size(), drift);
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flotilla_test::reproducible_training
