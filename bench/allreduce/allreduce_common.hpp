// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The timing loop the allreduce benchmarks share (tcp_busbw_bench.cpp, mpi_busbw_bench.cpp),
// so that flotilla's transports and bare MPI are timed exactly alike:
//
//   for each repetition, for each size (4 KiB .. 64 MiB), for each method (in turn):
//     warm-up calls; barrier; `iters` calls on each rank; elapsed time = the slowest rank's
//     time per call = elapsed / iters; bus bandwidth = 2 (N-1)/N x bytes / time.
//
// `iters` is calibrated once per size and method so that a measurement lasts about --target
// seconds, and agreed on by all ranks (rank 0's choice). Each call reduces a buffer of zeros in
// place (after one call on known values whose sum is checked): repeated sums of anything else would
// overflow to infinity within a few hundred calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

/// What the harness needs from the job around the methods: a barrier, the maximum of a double
/// over the ranks, and rank 0's value of a size_t.
struct Job {
  std::size_t rank = 0, size = 1;
  std::function<void()> barrier;
  std::function<double(double)> max;
  std::function<std::size_t(std::size_t)> from_rank0;
};

struct Method {
  std::string name;
  std::function<void(std::vector<float>&)> allreduce;  // sums in place over the ranks
};

struct Settings {
  std::vector<std::size_t> sizes;  // bytes
  std::size_t repeat = 5;
  double target_seconds = 0.25;
  std::size_t max_iters = 20000;
  std::string label;  // printed with each line (e.g. the MPI btl)
};

/// 4 KiB, 16 KiB, ..., 64 MiB (powers of 4), or what `list` (comma-separated, with K/M suffixes) names.
inline std::vector<std::size_t> parse_sizes(const std::string& list) {
  std::vector<std::size_t> out;
  if (list.empty()) {
    for (std::size_t b = 4096; b <= (std::size_t{64} << 20); b *= 4) out.push_back(b);
    return out;
  }
  std::size_t at = 0;
  while (at < list.size()) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(at, end - at);
    std::size_t mult = 1;
    if (!item.empty() && (item.back() == 'K' || item.back() == 'k')) mult = 1024, item.pop_back();
    else if (!item.empty() && (item.back() == 'M' || item.back() == 'm')) mult = 1024 * 1024, item.pop_back();
    out.push_back(std::stoull(item) * mult);
    at = end + 1;
  }
  return out;
}

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Times `iters` calls; returns the slowest rank's seconds per call.
inline double time_calls(const Job& job, const Method& m, std::vector<float>& buf, std::size_t iters) {
  job.barrier();
  const double t0 = seconds_now();
  for (std::size_t i = 0; i < iters; ++i) m.allreduce(buf);
  const double t = seconds_now() - t0;
  return job.max(t) / static_cast<double>(iters);
}

/// Runs every method at every size, `repeat` times, methods interleaved; prints one JSON line per
/// measurement on rank 0.
inline void run(const Job& job, const std::vector<Method>& methods, const Settings& s) {
  const std::size_t n = job.size;
  std::vector<float> buf;
  // Check each method once: rank r contributes r + 1 everywhere; the sum is n (n + 1) / 2.
  for (const Method& m : methods) {
    buf.assign(1000003, static_cast<float>(job.rank + 1));
    m.allreduce(buf);
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (float v : buf)
      if (v != want) throw std::runtime_error(m.name + ": allreduce gave a wrong sum");
  }
  // Calibrate every (size, method) first, then measure: repetitions outermost, so that the
  // repetitions of one measurement are spread over the whole run.
  std::vector<std::vector<std::size_t>> iters(s.sizes.size(), std::vector<std::size_t>(methods.size()));
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    buf.assign(std::max<std::size_t>(s.sizes[i] / sizeof(float), 1), 0.0f);
    for (std::size_t k = 0; k < methods.size(); ++k) {
      // Warm-up (connections, buffers, page faults), then calibrate on a few calls.
      for (int w = 0; w < 3; ++w) methods[k].allreduce(buf);
      std::size_t probe = 1;
      double t = time_calls(job, methods[k], buf, probe);
      while (t * static_cast<double>(probe) < 0.02 && probe < s.max_iters) {
        probe *= 4;
        t = time_calls(job, methods[k], buf, probe);
      }
      const double want = std::clamp(s.target_seconds / std::max(t, 1e-9), 3.0, static_cast<double>(s.max_iters));
      iters[i][k] = job.from_rank0(static_cast<std::size_t>(want));
    }
  }
  for (std::size_t r = 0; r < s.repeat; ++r) {
    for (std::size_t i = 0; i < s.sizes.size(); ++i) {
      const std::size_t bytes = s.sizes[i];
      buf.assign(std::max<std::size_t>(bytes / sizeof(float), 1), 0.0f);
      for (std::size_t j = 0; j < methods.size(); ++j) {
        const std::size_t k = (j + r) % methods.size();  // rotate which method goes first
        methods[k].allreduce(buf);                       // the buffer is fresh: touch it once
        const double t = time_calls(job, methods[k], buf, iters[i][k]);
        const double bus = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * static_cast<double>(bytes) / t;
        if (job.rank == 0) {
          std::printf("{\"label\":\"%s\",\"method\":\"%s\",\"ranks\":%zu,\"bytes\":%zu,\"rep\":%zu,\"iters\":%zu,"
                      "\"seconds\":%.9f,\"bus_gbps\":%.6f}\n",
                      s.label.c_str(), methods[k].name.c_str(), n, bytes, r, iters[i][k], t, bus / 1e9);
          std::fflush(stdout);
        }
      }
    }
  }
}

}  // namespace bench
