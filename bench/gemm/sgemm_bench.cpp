// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Micro-benchmark of flotilla's single-precision GEMM (core/detail/sgemm.hpp) against Eigen's product on
// the shapes flotilla's MLP and CNN examples run, plus a large square. See README.md.
//
//   sgemm_bench [--cpu] [--reps N] [filter]
//
// --cpu times with the thread's CPU clock instead of the wall clock (steadier on a shared
// machine); `filter` keeps the shapes whose name contains it. Build with -O3 -march=native, or
// the "ours" column is Eigen too.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// GCC 12 reports Eigen's AVX-512 transposes (in the product measured here) as reading
// uninitialised values once inlined into this file; Eigen's code, and not a real read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "flotilla/core/random.hpp"
#include "flotilla/core/detail/sgemm.hpp"

namespace {

using flotilla::detail::sgemm_index;

struct Shape {
  const char* name;
  sgemm_index m, n, k;
  bool trans_a, trans_b, accumulate;
};

// C = op(A) op(B) as flotilla's layers call it: Dense<N> forward is W (N x in) * X (in x batch),
// dW += dY X^T, dX = W^T dY; Conv2D is W (F x K*K*C) * cols (K*K*C x pixels*batch) and so on
// (here with an explicit cols matrix: the layer itself packs it from the image).
const Shape shapes[] = {
    {"mlp fwd 784->256", 256, 64, 784, false, false, true},
    {"mlp fwd 256->128", 128, 64, 256, false, false, true},
    {"mlp fwd 128->10", 10, 64, 128, false, false, true},
    {"mlp dW 256x784", 256, 784, 64, false, true, true},
    {"mlp dW 128x256", 128, 256, 64, false, true, true},
    {"mlp dW 10x128", 10, 128, 64, false, true, true},
    {"mlp dX 256<-128", 256, 64, 128, true, false, false},
    {"mlp dX 128<-10", 128, 64, 10, true, false, false},
    {"conv1 fwd", 32, 36864, 25, false, false, true},
    {"conv1 dW", 32, 25, 36864, false, true, true},
    {"conv2 fwd", 64, 4096, 800, false, false, true},
    {"conv2 dW", 64, 800, 4096, false, true, true},
    {"conv2 dcols", 800, 4096, 64, true, false, false},
    {"square 1024", 1024, 1024, 1024, false, false, false},
};

bool use_cpu_clock = false;

double now() {
#if defined(CLOCK_THREAD_CPUTIME_ID)  // POSIX
  if (use_cpu_clock) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
#endif
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds per call: the median over `reps` timings of >= 20 ms each, after a warm-up call.
template <class F>
double seconds_per_call(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    int calls = 0;
    const double t0 = now();
    double t1 = t0;
    do {
      f();
      ++calls;
      t1 = now();
    } while (t1 - t0 < 0.02);
    t.push_back((t1 - t0) / calls);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cpu") == 0) {
      use_cpu_clock = true;
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      filter = argv[i];
    }
  }
  std::printf("flotilla sgemm kernel: %.*s (MR %d, NR %d); Eigen %d.%d.%d; %s clock, median of %d\n",
              static_cast<int>(flotilla::detail::sgemm_kernel_name.size()), flotilla::detail::sgemm_kernel_name.data(),
              flotilla::detail::sgemm_mr, flotilla::detail::sgemm_nr, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
              EIGEN_MINOR_VERSION, use_cpu_clock ? "thread CPU" : "wall", reps);
  std::printf("%-18s %5s %6s %6s %5s  %14s %14s %7s\n", "shape", "m", "n", "k", "op", "flotilla GF/s", "Eigen GF/s",
              "ratio");
  flotilla::Generator g(1);
  for (const Shape& s : shapes) {
    if (!filter.empty() && std::string(s.name).find(filter) == std::string::npos) continue;
    const sgemm_index ar = s.trans_a ? s.k : s.m, ac = s.trans_a ? s.m : s.k;
    const sgemm_index br = s.trans_b ? s.n : s.k, bc = s.trans_b ? s.k : s.n;
    Eigen::MatrixXf a(ar, ac), b(br, bc), c(s.m, s.n);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = g.uniform(-1.0f, 1.0f);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = g.uniform(-1.0f, 1.0f);
    c.setZero();

    const double ours = seconds_per_call(
        [&] {
          flotilla::detail::sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), ar, b.data(), br, c.data(), s.m,
                                  s.accumulate);
        },
        reps);
    const double eigen = seconds_per_call(
        [&] {
          if (!s.accumulate) c.setZero();  // both orders of op cost the same; keep one code path
          if (s.trans_a && s.trans_b) {
            c.noalias() += a.transpose() * b.transpose();
          } else if (s.trans_a) {
            c.noalias() += a.transpose() * b;
          } else if (s.trans_b) {
            c.noalias() += a * b.transpose();
          } else {
            c.noalias() += a * b;
          }
        },
        reps);
    const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
    const std::string op = std::string(s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N") + (s.accumulate ? "+" : "");
    std::printf("%-18s %5td %6td %6td %5s  %14.1f %14.1f %7.2f\n", s.name, s.m, s.n, s.k, op.c_str(), flops / ours * 1e-9,
                flops / eigen * 1e-9, eigen / ours);
  }
  return 0;
}
