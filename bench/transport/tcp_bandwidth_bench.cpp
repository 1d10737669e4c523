// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Raw throughput of the TCP transport between ranks: sendrecv (both directions at once, as a ring
// step does), one-way send/recv, and a plain ring allreduce built on sendrecv (for an estimate of
// the bus bandwidth a collective can reach; flotilla's own allreduce lives elsewhere).
//
//   flotilla-launch -n 2 -- flotilla_tcp_bandwidth_bench [--mode sendrecv|oneway|allreduce] [--min 4096]
//                     [--max 67108864] [--segment 0] [--bytes-per-size 1073741824]
//
// Rank 0 prints one line per size: the time of one operation and the throughput. For sendrecv
// and one-way, "GB/s" is bytes moved per second in each direction; for allreduce it is the bus
// bandwidth, 2(N-1)/N * size / time, the figure NCCL and the OSU benchmarks report.
//
// --segment B (sendrecv, oneway): each operation of `size` bytes is made of messages of B bytes,
// over consecutive parts of the buffers, as a collective moves a large buffer. The buffers are
// 4 x --max, used in turn, so that data comes from memory rather than a warm cache; without
// --segment, each size reuses the same buffers (warm in cache when they fit).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "flotilla/cli/flags.hpp"
#include "flotilla/transport/tcp.hpp"

namespace {

using flotilla::transport::TcpEndpoint;

void ring_allreduce(TcpEndpoint& e, std::span<float> data, std::vector<float>& scratch) {
  const std::size_t n = e.size(), r = e.rank();
  if (n == 1) return;
  const std::size_t right = (r + 1) % n, left = (r + n - 1) % n;
  auto chunk = [&](std::size_t c) {
    const std::size_t per = (data.size() + n - 1) / n, b = std::min(data.size(), c * per);
    return data.subspan(b, std::min(data.size(), b + per) - b);
  };
  for (std::size_t s = 0; s + 1 < n; ++s) {  // reduce-scatter
    const auto out = chunk((r + n - s) % n), in = chunk((r + n - s - 1) % n);
    scratch.resize(in.size());
    e.sendrecv(right, 7, std::as_bytes(out), left, std::as_writable_bytes(std::span<float>(scratch)));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] += scratch[i];
  }
  for (std::size_t s = 0; s + 1 < n; ++s) {  // allgather
    const auto out = chunk((r + 1 + n - s) % n), in = chunk((r + n - s) % n);
    e.sendrecv(right, 8, std::as_bytes(out), left, std::as_writable_bytes(in));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flotilla;
  try {
    cli::Flags flags("flotilla_tcp_bandwidth_bench", "throughput of the TCP transport (run under flotilla-launch)");
    auto& mode = flags.add<std::string>("mode", "sendrecv", "sendrecv, oneway or allreduce");
    auto& min_size = flags.add<std::size_t>("min", 4096, "smallest message, bytes");
    auto& max_size = flags.add<std::size_t>("max", 64u << 20, "largest message, bytes");
    auto& budget = flags.add<std::size_t>("bytes-per-size", 1u << 30, "bytes to move per size (sets the repetitions)");
    auto& segment = flags.add<std::size_t>("segment", 0, "message size within each operation (0: one message)");
    transport::TcpFlags tcp(flags);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    if (mode != "sendrecv" && mode != "oneway" && mode != "allreduce")
      throw ConfigError("--mode: '" + mode + "' is not sendrecv, oneway or allreduce");
    const auto options = tcp.options();
    transport::Tcp::run(options, options.world_size, [&](transport::TcpEndpoint& e) {
      const std::size_t n = e.size(), r = e.rank();
      if (r == 0)
        std::printf("# %s, %zu ranks, socket buffer %s, %s\n# %12s %10s %12s %9s\n", mode.c_str(), n,
                    options.socket_buffer_bytes ? std::to_string(options.socket_buffer_bytes).c_str() : "kernel",
                    segment ? ("segments of " + std::to_string(segment) + " bytes, cold buffers").c_str()
                            : "one message, same buffers",
                    "bytes", "reps", "us/op", "GB/s");
      const std::size_t span_bytes = segment ? 4 * max_size : max_size;
      std::vector<std::byte> out(span_bytes), in(span_bytes);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i * 131 + r);
      std::vector<float> data(max_size / sizeof(float), 1.0f), scratch;
      for (std::size_t size = min_size; size <= max_size; size *= 4) {
        const std::size_t reps = std::clamp<std::size_t>(budget / size, 3, 20000);
        std::size_t at = 0;  // where in the buffers this operation goes (--segment)
        auto once = [&] {
          if (mode != "allreduce") {
            const std::size_t piece = segment ? std::min(segment, size) : size;
            if (segment && at + size > span_bytes) at = 0;
            for (std::size_t off = 0; off < size; off += piece) {
              const std::size_t len = std::min(piece, size - off);
              const std::span<const std::byte> o(out.data() + at + off, len);
              const std::span<std::byte> b(in.data() + at + off, len);
              if (mode == "sendrecv") {
                e.sendrecv((r + 1) % n, 1, o, (r + n - 1) % n, b);
              } else {
                if (r == 0) e.send(1, 2, o);
                if (r == 1) e.recv(0, 2, b);
              }
            }
            if (segment) at += size;
          } else {
            ring_allreduce(e, std::span<float>(data.data(), size / sizeof(float)), scratch);
          }
        };
        for (int w = 0; w < 2; ++w) once();
        e.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < reps; ++i) once();
        if (mode == "oneway") e.barrier();  // the receiver's end is the end
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double per = s / static_cast<double>(reps);
        const double moved = mode == "allreduce" ? 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * static_cast<double>(size)
                                                 : static_cast<double>(size);
        if (r == 0) std::printf("  %12zu %10zu %12.1f %9.3f\n", size, reps, per * 1e6, moved / per / 1e9);
        std::fflush(stdout);
      }
    });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "flotilla_tcp_bandwidth_bench: %s\n", ex.what());
    return 1;
  }
  return 0;
}
