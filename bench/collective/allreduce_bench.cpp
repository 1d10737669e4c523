// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Ring allreduce over the in-process transport: time per call and bus bandwidth
// (2(N-1)/N * bytes / time, NCCL's definition), each call timed on rank 0 between barriers. See
// README.md.
//
//   allreduce_bench sizes    [best]   N = 2, 4; 4 KiB to 64 MiB; fp32 pipelined / inline, fp16
//   allreduce_bench segments [best]   N = 2, 4; 4 and 64 MiB; segment sizes 16 KiB to 16 MiB
//   allreduce_bench link GB/s         64 MiB behind a simulated link of that bandwidth
//
// Medians of the repetitions, or with `best` their minimum (steadier on a shared machine).
#include <flotilla/codec/fp16.hpp>
#include <flotilla/collective/ring_allreduce.hpp>
#include <flotilla/transport/in_process.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using flotilla::transport::InProcess;
namespace codec = flotilla::codec;
namespace collective = flotilla::collective;

bool use_best = false;

/// The in-process endpoint behind a simulated link: every send takes bytes / bandwidth of wall
/// time without using a core (as a NIC's DMA would), so arithmetic can overlap the wire.
struct SlowLink {
  InProcess::endpoint& e;
  double bytes_per_second;
  void wire(std::size_t bytes) const {
    std::this_thread::sleep_for(std::chrono::duration<double>(static_cast<double>(bytes) / bytes_per_second));
  }
  std::size_t rank() const { return e.rank(); }
  std::size_t size() const { return e.size(); }
  void send(std::size_t p, flotilla::Tag t, std::span<const std::byte> b) {
    wire(b.size());
    e.send(p, t, b);
  }
  void recv(std::size_t p, flotilla::Tag t, std::span<std::byte> b) { e.recv(p, t, b); }
  void sendrecv(std::size_t to, flotilla::Tag t, std::span<const std::byte> o, std::size_t from, std::span<std::byte> i) {
    wire(std::max(o.size(), i.size()));  // full duplex
    e.sendrecv(to, t, o, from, i);
  }
  std::size_t recv_any(flotilla::Tag t, std::span<std::byte> b) { return e.recv_any(t, b); }
  void barrier() { e.barrier(); }
  flotilla::TrafficCounters counters() const { return e.counters(); }
};

template <class C>
double seconds(std::size_t ranks, std::size_t bytes, const collective::RingOptions& o, int reps, double link_gbps = 0) {
  std::vector<double> times;
  InProcess::run({}, ranks, [&](InProcess::endpoint& base) {
    SlowLink slow{base, link_gbps * 1e9};
    std::vector<float> v(bytes / sizeof(float), 1.f);
    auto once = [&](auto& e) {
      e.barrier();
      const auto t0 = clock_type::now();
      collective::ring_allreduce<C>(e, std::span<float>(v), o);
      e.barrier();
      return std::chrono::duration<double>(clock_type::now() - t0).count();
    };
    for (int r = -2; r < reps; ++r) {  // two warm-up calls: buffers, helper thread
      const double t = link_gbps > 0 ? once(slow) : once(base);
      if (base.rank() == 0 && r >= 0) times.push_back(t);
      std::fill(v.begin(), v.end(), 1.f);  // keep the values bounded (and exact in fp16)
    }
  });
  std::sort(times.begin(), times.end());
  return use_best ? times.front() : times[times.size() / 2];
}

double bus_gbps(std::size_t ranks, std::size_t bytes, double s) {
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * static_cast<double>(bytes) / s / 1e9;
}

void print(std::size_t ranks, std::size_t bytes, double s) {
  std::printf(" %9.1f us %5.2f GB/s |", s * 1e6, bus_gbps(ranks, bytes, s));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "sizes";
  use_best = argc > 2 && std::string(argv[2]) == "best";
  if (what == "sizes" || what == "segments") {
    std::printf("%s of repetitions\n%-2s %9s %9s | %-24s| %-24s| %-24s|\n", use_best ? "best" : "median", "N", "bytes",
                "segment", " fp32, pipelined", " fp32, inline", " fp16, pipelined");
    for (std::size_t ranks : {2, 4}) {
      std::vector<std::pair<std::size_t, std::size_t>> cases;  // (bytes, segment bytes)
      if (what == "sizes") {
        for (std::size_t bytes = 4096; bytes <= (std::size_t{64} << 20); bytes *= 4) cases.emplace_back(bytes, 256 * 1024);
      } else {
        for (std::size_t bytes : {std::size_t{4} << 20, std::size_t{64} << 20})
          for (std::size_t seg = 16384; seg <= (std::size_t{16} << 20); seg *= 4) cases.emplace_back(bytes, seg);
      }
      for (auto [bytes, seg] : cases) {
        const int reps = bytes >= (std::size_t{16} << 20) ? 7 : bytes >= (std::size_t{1} << 20) ? 21 : 201;
        collective::RingOptions on, off;
        on.segment_bytes = off.segment_bytes = seg;
        off.pipeline = false;
        std::printf("%-2zu %9zu %9zu |", ranks, bytes, seg);
        print(ranks, bytes, seconds<codec::Fp32>(ranks, bytes, on, reps));
        print(ranks, bytes, seconds<codec::Fp32>(ranks, bytes, off, reps));
        print(ranks, bytes, seconds<codec::Fp16>(ranks, bytes, on, reps));
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  } else if (what == "link") {
    const double gbps = argc > 2 ? std::atof(argv[2]) : 1.25;
    const std::size_t bytes = std::size_t{64} << 20;
    for (std::size_t ranks : {2, 4}) {
      collective::RingOptions on, off;
      off.pipeline = false;
      const double wire = 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes / (gbps * 1e9);
      std::printf("link %.2f GB/s, N=%zu, 64 MiB (fp32 wire time %.1f ms): fp32 pipelined %.1f ms, inline %.1f ms | "
                  "fp16 pipelined %.1f ms, inline %.1f ms\n",
                  gbps, ranks, wire * 1e3, seconds<codec::Fp32>(ranks, bytes, on, 5, gbps) * 1e3,
                  seconds<codec::Fp32>(ranks, bytes, off, 5, gbps) * 1e3, seconds<codec::Fp16>(ranks, bytes, on, 5, gbps) * 1e3,
                  seconds<codec::Fp16>(ranks, bytes, off, 5, gbps) * 1e3);
      std::fflush(stdout);
    }
  }
}
