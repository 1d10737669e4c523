// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_exchange_step_bench: how long one synchronous step's gradient exchange takes through the
// Trainer over TCP, for the cost model (topology/cost_model.hpp, docs/cost_model.md).
//
//   flotilla-launch -n 4 -- flotilla_exchange_step_bench --exchange ring --codec fp16 --mib 16 --steps 3
//   (--exchange servers --servers S: the last S ranks are parameter servers)
//
// The model has about --mib MiB of parameters and next to no arithmetic (StepModel below, batch
// 1), and overlap is off, so each step's exchange is all exposed
// communication: the ring's buckets allreduced after backward (policy::Synchronous<>), or the
// push of every shard and the pull of the updated parameters (Synchronous<ParameterServer>); with
// --codec fp16, policy::Compressed<codec::Fp16, ...> on the wire. The exchange's time is the
// steady step period less the step's own work: rank 0's timeline (FitOptions::trace_file) gives
// when each forward pass started, and from the second step to the last the period is their mean
// distance, less rank 0's mean forward-backward and optimizer time. (Rank 0's exposed
// communication alone would not do: a server answers the workers one after the other, and rank 0,
// answered first, pushes its next step while the others still wait.) Rank 0 prints one JSON line:
// the layout, the payload (values, wire bytes a value, buckets), the exchange's seconds, and the
// bytes rank 0 sent and received per step. The layout's hosts (--ranks-per-host) are for the
// model's counts only: where the ranks run is the launcher's business (bench/cluster_cost.sh).
#include "../common/bench_common.hpp"

#include <flotilla/codec/fp16.hpp>
#include <flotilla/transport/tcp.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

namespace tr = flotilla::transport;
using PS = flotilla::topology::ParameterServer;

struct Settings {
  std::string exchange, codec;
  std::size_t servers, steps, ranks_per_host;
};

/// When each forward pass of rank 0 started (microseconds on the timeline's clock), in order.
std::vector<double> forward_starts(const std::filesystem::path& trace) {
  std::ifstream in(trace);
  if (!in) throw flotilla::ConfigError("rank 0 wrote no timeline at " + trace.string());
  std::vector<double> starts;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"name\":\"forward+backward\"") == std::string::npos) continue;
    const std::size_t at = line.find("\"ts\":");
    if (at != std::string::npos) starts.push_back(std::stod(line.substr(at + 5)) * 1e-6);
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

// About Mib MiB of float parameters (3K + 1 of them) for a few multiply-adds each a sample: one
// input widened to K values and summed back to one. Even 8 workers' arithmetic is then small beside
// their exchange on the machine's two cores (a softmax over K classes was not: its exponentials
// took the cores from the parameter server while it was answering).
template <std::size_t Mib>
using StepModel = flotilla::Model<flotilla::Sequential<flotilla::Input<1>, flotilla::Dense<Mib * 87381>, flotilla::Dense<1>>,
                                  flotilla::MSE, flotilla::optim::SGD>;

template <std::size_t Mib, class Policy>
int run(const Settings& s, const tr::TcpOptions& options) {
  using M = StepModel<Mib>;
  const std::size_t world = options.world_size;
  const bool servers = s.exchange == "servers";
  if (servers && (s.servers == 0 || s.servers >= world))
    throw flotilla::ConfigError("--servers must be between 1 and the ranks less one");
  const std::size_t workers = servers ? world - s.servers : world;
  flotilla::data::Dataset<float> d;
  d.name = "exchange-step";
  const std::size_t samples = workers * (s.steps + 2);
  d.inputs.resize(1, static_cast<Eigen::Index>(samples));
  d.targets.resize(1, static_cast<Eigen::Index>(samples));
  for (std::size_t i = 0; i < samples; ++i) {
    d.inputs(0, static_cast<Eigen::Index>(i)) = static_cast<float>(i % 7) / 7.0f;
    d.targets(0, static_cast<Eigen::Index>(i)) = static_cast<float>(i % 3);
  }
  flotilla::TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.batch_size = 1;
  o.workers = 0;  // as launched
  o.servers = servers ? s.servers : 1;
  o.threads = 1;
  o.prefetch = 0;
  o.shuffle = false;
  o.overlap = flotilla::Overlap::never;
  flotilla::Trainer<M, Policy, tr::Tcp> trainer(o, Policy{}, options);
  flotilla::FitOptions f;
  f.epochs = 1;
  f.max_steps = s.steps + 2;
  f.log = nullptr;
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / ("flotilla_exchange_step_" + std::to_string(::getpid()) + ".json");
  f.trace_file = trace.string();
  trainer.fit(d, nullptr, f);
  std::filesystem::remove(trace.string() + ".rank" + std::to_string(options.rank));  // another worker's, if any
  if (options.rank != 0) return 0;
  const std::vector<double> starts = forward_starts(trace);
  std::filesystem::remove(trace);
  const auto& steps = trainer.step_counters();
  if (steps.size() != s.steps + 2 || starts.size() != steps.size())
    throw flotilla::ConfigError("rank 0 recorded " + std::to_string(steps.size()) + " steps and " +
                                std::to_string(starts.size()) + " forward passes, not " + std::to_string(s.steps + 2));
  // Steps 1 .. s.steps (the first sets up, the last has no next start to end it).
  double work = 0, sent = 0, received = 0;
  for (std::size_t i = 1; i <= s.steps; ++i) {
    work += steps[i].compute_seconds + steps[i].update_seconds;
    sent += static_cast<double>(steps[i].traffic.payload_bytes_sent);
    received += static_cast<double>(steps[i].traffic.payload_bytes_received);
  }
  const double n = static_cast<double>(s.steps);
  const double period = (starts[s.steps + 1] - starts[1]) / n;
  const double exchange = period - work / n;
  const std::size_t buckets =
      servers ? s.servers
              : flotilla::detail::make_buckets(M::network::parameter_offsets, M::network::parameter_counts,
                                               flotilla::policy::Synchronous<>{}.bucket_bytes / sizeof(float))
                    .size();
  // Several ranks a host sum hierarchically in float with the lossless codec; fp16 takes the ring.
  const char* kind = servers ? "parameter_servers" : s.ranks_per_host > 1 && s.codec == "fp32" ? "hierarchical" : "ring";
  std::printf("{\"exchange\":\"%s\",\"workers\":%zu,\"ranks_per_host\":%zu,\"servers\":%zu,\"codec\":\"%s\","
              "\"mib\":%zu,\"values\":%zu,\"wire_bytes\":%d,\"buckets\":%zu,\"steps\":%zu,\"seconds\":%.6f,"
              "\"period_seconds\":%.6f,\"bytes_sent\":%.0f,\"bytes_received\":%.0f}\n",
              kind, workers, servers ? 1 : s.ranks_per_host, servers ? s.servers : 0, s.codec.c_str(), Mib,
              M::parameter_count, s.codec == "fp16" ? 2 : 4, buckets, s.steps, exchange, period, sent / n, received / n);
  return 0;
}

template <std::size_t Mib>
int pick_policy(const Settings& s, const tr::TcpOptions& options) {
  using flotilla::policy::Compressed;
  using flotilla::policy::Synchronous;
  const bool fp16 = s.codec == "fp16";
  if (s.exchange == "ring")
    return fp16 ? run<Mib, Compressed<flotilla::codec::Fp16, Synchronous<>>>(s, options) : run<Mib, Synchronous<>>(s, options);
  if (s.exchange == "servers")
    return fp16 ? run<Mib, Compressed<flotilla::codec::Fp16, Synchronous<PS>>>(s, options) : run<Mib, Synchronous<PS>>(s, options);
  throw flotilla::ConfigError("--exchange must be ring or servers");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_exchange_step_bench",
                               "one synchronous step's gradient exchange over TCP (the job runs two untimed steps more: "
                               "the first and the last)");
    auto& exchange = flags.add<std::string>("exchange", "ring", "ring or servers (parameter servers: the last --servers ranks)");
    auto& codec = flags.add<std::string>("codec", "fp32", "fp32 or fp16");
    auto& mib = flags.add<std::size_t>("mib", 1, "MiB of parameters: 1, 4, 16 or 64");
    auto& servers = flags.add<std::size_t>("servers", 1, example::flag_help::servers);
    auto& steps = flags.add<std::size_t>("steps", 3, example::flag_help::steps);
    auto& per_host = flags.add<std::size_t>("ranks-per-host", 1, example::flag_help::ranks_per_host);
    flags.at_least("servers", 1);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    if (codec != "fp32" && codec != "fp16") throw flotilla::ConfigError("--codec must be fp32 or fp16");
    const Settings s{exchange, codec, servers, std::max<std::size_t>(steps, 1), std::max<std::size_t>(per_host, 1)};
    const tr::TcpOptions options = tr::TcpOptions::from_environment();
    switch (mib) {
      case 1: return pick_policy<1>(s, options);
      case 4: return pick_policy<4>(s, options);
      case 16: return pick_policy<16>(s, options);
      case 64: return pick_policy<64>(s, options);
      default: throw flotilla::ConfigError("--mib must be 1, 4, 16 or 64");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_exchange_step_bench: %s\n", e.what());
    return 1;
  }
}
