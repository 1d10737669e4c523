// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_tcp_busbw_bench: allreduce bus bandwidth of flotilla's ring allreduce
// (collective::ring_allreduce) over the TCP transport, in a job started by flotilla-launch.
//
//   flotilla-launch -n 2 -- flotilla_tcp_busbw_bench [--sizes 4K,64M] [--repeat 5]
//
// Methods (--methods): `flotilla` is collective::ring_allreduce with its default options, as
// users and the Trainer get it (the algorithm chosen by size: RingOptions::algorithm); `ring` is
// the ring alone (256 KiB segments, reduction on the helper thread); `ring-nopipe` reduces on
// the calling thread; `ring-seg1M` and `ring-seg4M` use larger segments; `ring-slot-per-segment`
// receives each segment of the reduce-scatter into a buffer of its own (RingOptions::receive_slots
// = 0; the default cycles through 4); `doubling` is recursive
// doubling at every size; `native` is the endpoint's own allreduce_sum at every size (the
// shared-memory path, in pieces of its capacity above it; needs it on). One JSON line per measurement on rank 0 (see allreduce_common.hpp for
// the timing loop).
#include <flotilla/cli/flags.hpp>
#include <flotilla/collective/allreduce_small.hpp>
#include <flotilla/collective/broadcast.hpp>
#include <flotilla/collective/ring_allreduce.hpp>
#include <flotilla/transport/tcp.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "allreduce_common.hpp"
#include "../../examples/flag_help.hpp"

int main(int argc, char** argv) {
  try {
    namespace tr = flotilla::transport;
    flotilla::cli::Flags flags("flotilla_tcp_busbw_bench", "allreduce bus bandwidth of flotilla's TCP transport");
    auto& sizes = flags.add<std::string>("sizes", "", "comma-separated bytes with K/M suffixes (default 4K..64M, powers of 4)");
    auto& repeat = flags.add<std::size_t>("repeat", 5, example::flag_help::repeat);
    auto& target = flags.add<double>("target", 0.25, "seconds per measurement");
    auto& label = flags.add<std::string>("label", "tcp", "label printed with each line");
    auto& methods_flag = flags.add<std::string>("methods", "flotilla",
                                                "flotilla, ring, ring-nopipe, ring-seg1M, ring-seg4M, ring-slot-per-segment, doubling, native (comma-separated)");
    if (!flags.parse(argc, argv, std::cout)) return 0;

    const tr::TcpOptions options = tr::TcpOptions::from_environment();
    tr::Tcp::run(options, options.world_size, [&](tr::TcpEndpoint& e) {
      constexpr flotilla::Tag control = flotilla::collective::default_tags::allreduce_small;
      bench::Job job;
      job.rank = e.rank();
      job.size = e.size();
      job.barrier = [&] { e.barrier(); };
      job.max = [&](double v) {
        std::vector<double> all(e.size(), 0.0);
        all[e.rank()] = v;
        flotilla::collective::allreduce_sum(e, std::span<double>(all), control);
        return *std::max_element(all.begin(), all.end());
      };
      job.from_rank0 = [&](std::size_t v) {
        std::uint64_t x = v;
        flotilla::collective::broadcast(e, std::span<std::uint64_t>(&x, 1), 0, flotilla::collective::default_tags::broadcast);
        return static_cast<std::size_t>(x);
      };
      auto ring = [&](flotilla::collective::RingOptions o) {
        return [&e, o](std::vector<float>& b) { flotilla::collective::ring_allreduce(e, std::span<float>(b), o); };
      };
      using flotilla::collective::AllreduceAlgorithm;
      flotilla::collective::RingOptions automatic, plain, nopipe, seg1, seg4, per_segment, doubling;
      for (auto* o : {&plain, &nopipe, &seg1, &seg4, &per_segment}) o->algorithm = AllreduceAlgorithm::ring;
      nopipe.pipeline = false;
      per_segment.receive_slots = 0;
      seg1.segment_bytes = 1 << 20;
      seg4.segment_bytes = 4 << 20;
      doubling.algorithm = AllreduceAlgorithm::recursive_doubling;
      const std::vector<bench::Method> all = {{"flotilla", ring(automatic)}, {"ring", ring(plain)},
                                              {"ring-nopipe", ring(nopipe)}, {"ring-seg1M", ring(seg1)},
                                              {"ring-seg4M", ring(seg4)},    {"ring-slot-per-segment", ring(per_segment)},
                                              {"doubling", ring(doubling)},
                                              {"native", [&e](std::vector<float>& b) { e.allreduce_sum(std::span<float>(b)); }}};
      std::vector<bench::Method> chosen;
      for (const auto& m : all)
        if (("," + methods_flag + ",").find("," + m.name + ",") != std::string::npos) chosen.push_back(m);
      if (chosen.empty()) throw flotilla::ConfigError("--methods names none of flotilla, ring, ring-nopipe, ring-seg1M, ring-seg4M, ring-slot-per-segment, doubling, native");

      bench::Settings s;
      s.sizes = bench::parse_sizes(sizes);
      s.repeat = repeat;
      s.target_seconds = target;
      s.label = label;
      bench::run(job, chosen, s);
    });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_tcp_busbw_bench: %s\n", e.what());
    return 1;
  }
}
