// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_core_latency_bench: the round trip of one cache line between two threads pinned to two
// CPUs, the floor under every synchronisation between two ranks on one host (a shared-memory
// allreduce waits for such a line at least twice per call; a loopback socket's wake-ups cost more).
//
//   flotilla_core_latency_bench [--cpus 0,1] [--trips 200000] [--repeat 5]
//
// On the 2-core virtual machine of docs/benchmarks.md it is bimodal: short when the host runs the
// two virtual CPUs on cores that share a cache, several times longer when it does not, switching
// every few seconds to minutes (docs/benchmarks.md, "The machine's two phases"). That is the "far
// phase" of every communicating job there. Run it next to a benchmark to know which phase a figure
// was taken in. Linux only (thread affinity).
#include <flotilla/cli/flags.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "../../examples/flag_help.hpp"

namespace {

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    throw std::runtime_error("cannot pin a thread to CPU " + std::to_string(cpu));
}

/// Nanoseconds per round trip: this thread (on `a`) writes an odd value, the other (on `b`)
/// answers with the next even one, `trips` times.
double round_trip_ns(int a, int b, long trips) {
  alignas(64) std::atomic<long> line{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};  // set (after `failure`) when the echo thread cannot run
  std::thread echo([&] {
    try {
      pin_to(b);
    } catch (...) {
      failure = std::current_exception();
      failed.store(true, std::memory_order_release);
      return;
    }
    for (long i = 0; i < trips; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin_to(a);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < trips && !failed.load(std::memory_order_acquire); ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2 && !failed.load(std::memory_order_acquire)) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  echo.join();
  if (failure) std::rethrow_exception(failure);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(trips);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_core_latency_bench", "round trip of a cache line between two CPUs");
    auto& cpus = flags.add<std::string>("cpus", "0,1", "the two CPUs, comma-separated");
    auto& trips = flags.add<long>("trips", 200000, "round trips per measurement");
    auto& repeat = flags.add<std::size_t>("repeat", 5, example::flag_help::repeat);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    const auto comma = cpus.find(',');
    if (comma == std::string::npos) throw std::runtime_error("--cpus needs two CPUs, e.g. 0,1");
    const int a = std::stoi(cpus.substr(0, comma)), b = std::stoi(cpus.substr(comma + 1));
    if (trips < 1 || repeat < 1) throw std::runtime_error("--trips and --repeat must be at least 1");
    for (std::size_t r = 0; r < repeat; ++r)
      std::printf("{\"cpus\":[%d,%d],\"trips\":%ld,\"rep\":%zu,\"round_trip_ns\":%.1f}\n", a, b, trips, r,
                  round_trip_ns(a, b, trips));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_core_latency_bench: %s\n", e.what());
    return 1;
  }
}
