// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// What the distributed Fashion-MNIST examples share: the CNN, the flags, the policies to choose
// from, and the report. fashion_mnist_distributed.cpp (in-process workers), fashion_mnist_tcp.cpp
// (one process per worker over TCP) and fashion_mnist_mpi.cpp (under mpirun) differ only in the
// transport backend they pass to run_example<Backend>(), and the TCP programs in the flags of their
// own (tcp_program_flags.hpp).
#pragma once

#include <flotilla/flotilla.hpp>

#include "checkpoint_flags.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace example {

namespace fm = flotilla::data::fashion_mnist;
using Net = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                   //
                                 flotilla::Conv2D<32, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Conv2D<64, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Flatten, flotilla::Dense<10>>;
using Model = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam>;

struct Settings {
  std::size_t workers, servers, epochs, batch, baseline_steps;
  double lr;
  std::string policy;
  flotilla::Overlap overlap;
  std::filesystem::path data, metrics, plot, trace;
  flotilla::CheckpointPolicy checkpoints;
  /// The job's processes and this one's rank (out-of-process jobs).
  std::size_t ranks = 1, rank = 0;
  flotilla::WorkerLoss on_worker_loss = flotilla::WorkerLoss::by_policy;
};

/// The ranks of an MPI job, from its launcher's environment (mpirun); the TCP programs take theirs
/// from the transport's options, which flags may give too.
inline std::size_t launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
  return 1;
}

/// This process's rank in an MPI job, from the same environment; 0 for a process started by hand
/// (a job of one).
inline std::size_t launched_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name)) return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
  return 0;
}

/// The transport's settings as a program runs it: its options, the job's processes, this one's
/// rank, and what the others do when a worker is lost.
template <class Backend>
struct TransportSettings {
  typename Backend::options options{};
  std::size_t ranks = 1, rank = 0;
  flotilla::WorkerLoss on_worker_loss = flotilla::WorkerLoss::by_policy;
};

/// No flags of the transport's own: the in-process program, and the MPI one, whose settings are
/// mpirun's (and FLOTILLA_TIMEOUT_MS, read by MpiOptions).
template <class Backend>
struct NoTransportFlags {
  explicit NoTransportFlags(flotilla::cli::Flags&) {}
  TransportSettings<Backend> settings() const {
    TransportSettings<Backend> s;
    s.ranks = launched_ranks();
    s.rank = launched_rank();
    return s;
  }
};

template <class Backend, class Policy, class M>
int run(const Settings& s, const typename Backend::options& transport, const flotilla::data::Dataset<float>& train,
        const flotilla::data::Dataset<float>& test) {
  flotilla::TrainerOptions<M> options;
  options.optimizer.learning_rate = s.lr;
  // The rate anneals to zero over the run (a cosine): worth about a point of test accuracy at the end.
  // The schedule counts updates: one per global batch when updates are averaged over the workers,
  // one per worker's batch when a parameter server applies each worker's update alone.
  {
    constexpr bool servers = flotilla::ParameterServerPolicy<Policy>;
    std::size_t workers = s.workers;
    if (!Backend::in_process) {
      const std::size_t server_ranks = servers ? s.servers : 0;
      workers = s.ranks > server_ranks ? s.ranks - server_ranks : 1;
    }
    std::size_t per_update = s.batch * workers;
    if constexpr (servers) {
      if (!Policy::aggregate) per_update = s.batch;
    }
    options.schedule = flotilla::schedule::Cosine{.total = s.epochs * ((train.size() + per_update - 1) / per_update)};
  }
  options.batch_size = s.batch;
  options.seed = 1;
  options.overlap = s.overlap;
  options.on_worker_loss = s.on_worker_loss;

  // One worker, for the speed-up's denominator (in-process jobs only: there the machine is ours).
  double one_worker = 0;
  if (Backend::in_process && s.baseline_steps > 0) {
    flotilla::Trainer<M> single(options);
    flotilla::FitOptions f;
    f.log = nullptr;
    f.max_steps = s.baseline_steps;
    one_worker = single.fit(train, nullptr, f).back().samples_per_second;
    std::printf("1 worker: %.0f samples/s (%zu steps of %zu)\n", one_worker, s.baseline_steps, s.batch);
  }

  options.workers = Backend::in_process ? s.workers : 0;  // out of process: as launched
  options.servers = s.servers;
  flotilla::Trainer<M, Policy, Backend> trainer(options, Policy{}, transport);
  flotilla::FitOptions fit;
  fit.epochs = s.epochs;
  fit.metrics_file = s.metrics;
  fit.plot_file = s.plot;
  fit.trace_file = s.trace;
  fit.plot_title = "Fashion-MNIST CNN, " + std::string(Backend::name) + ", " + s.policy;
  fit.checkpoints = s.checkpoints;
  UnsavedSets unsaved;
  const auto history = fit_noting_unsaved(trainer, unsaved, train, &test, fit);
  if (history.empty()) return unsaved.exit_status(0);  // a parameter server: the workers report
  const auto& last = history.back();
  const auto workers = static_cast<std::size_t>(last.extra.front().second);
  // Every worker has the same history; rank 0 reports.
  if (!Backend::in_process && s.rank != 0) return unsaved.exit_status(0);

  double rate = 0;
  for (const auto& r : history) rate += r.samples_per_second / static_cast<double>(history.size());
  std::printf("\n%s, %zu workers, policy %s: test accuracy %.2f%% after %zu epochs, %.0f samples/s",
              std::string(Backend::name).c_str(), workers, s.policy.c_str(), 100 * last.val_accuracy.value_or(0),
              s.epochs, rate);
  if (one_worker > 0) std::printf(", %.2fx one worker", rate / one_worker);
  std::printf("\n");
  std::size_t width = 0;  // the names' column, as wide as the longest
  for (const auto& [name, value] : last.extra) width = std::max(width, name.size());
  for (const auto& [name, value] : last.extra) std::printf("  %-*s %.4g\n", static_cast<int>(width), name.c_str(), value);
  std::fflush(stdout);  // the report before the error, when both go to one terminal
  return unsaved.exit_status(0);
}

/// Parses the flags (the programs' own, then `TransportFlags`') and trains `M` (the CNN above, or
/// the same on a GPU) with the chosen policy over `Backend`.
template <class Backend, class M = Model, class TransportFlags = NoTransportFlags<Backend>>
int run_example(int argc, char** argv, const char* program) {
  try {
    flotilla::cli::Flags flags(program, "train a CNN on Fashion-MNIST (Adam, cosine-annealed) on several workers");
    auto& workers = flags.add<std::size_t>("workers", std::max(2u, std::thread::hardware_concurrency()), flag_help::workers);
    auto& servers = flags.add<std::size_t>("servers", 1, flag_help::servers);
    auto& epochs = flags.add<std::size_t>("epochs", 5, flag_help::epochs);
    auto& batch = flags.add<std::size_t>("batch", 64, flag_help::batch);
    auto& lr = flags.add<double>("lr", 1e-3, flag_help::lr);
    auto& policy = flags.add<std::string>("policy", "sync",
                                          "sync, sync-fp16, sync-ps, sync-ps-fp16 or async (-ps and async: on --servers)");
    auto& overlap = flags.add<std::string>("overlap", "auto", flag_help::overlap);
    auto& baseline = flags.add<std::size_t>("baseline-steps", 200, "steps to time one worker first (0: skip)");
    auto& data = flags.add<std::filesystem::path>("data", fm::default_directory(), flag_help::data, "FLOTILLA_FASHION_MNIST");
    auto& metrics = flags.add<std::filesystem::path>("metrics", "distributed_metrics.jsonl", flag_help::metrics);
    auto& plot = flags.add<std::filesystem::path>("plot", "distributed_curves.svg", flag_help::plot);
    auto& trace = flags.add<std::filesystem::path>("trace", "", flag_help::trace);
    const CheckpointFlags checkpoint_flags = add_checkpoint_flags(flags);
    const TransportFlags transport_flags(flags);
    flags.at_least("workers", 1).at_least("servers", 1).at_least("epochs", 1).at_least("batch", 1).above("lr", 0);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    Settings s{workers, servers, epochs, batch, baseline, lr, policy, flotilla::parse_overlap(overlap, "--overlap"),
               data, metrics, plot, trace, {}};
    s.checkpoints = checkpoint_flags.policy();
    const TransportSettings<Backend> launch = transport_flags.settings();
    const auto& transport = launch.options;
    s.ranks = launch.ranks;
    s.rank = launch.rank;
    s.on_worker_loss = launch.on_worker_loss;

    auto train = fm::load<float>(fm::Split::train, s.data);
    auto test = fm::load<float>(fm::Split::test, s.data);
    // Pixels to zero mean and unit variance over the training set, as fashion_mnist_common.hpp does.
    const float mean = train.inputs.mean();
    const float stddev = std::sqrt((train.inputs.array() - mean).square().mean());
    for (auto* d : {&train, &test}) d->inputs = (d->inputs.array() - mean) / stddev;
    using namespace flotilla;
    using PS = policy::Synchronous<topology::ParameterServer>;
    if (s.policy == "sync") return run<Backend, policy::Synchronous<topology::Ring>, M>(s, transport, train, test);
    if (s.policy == "sync-fp16")
      return run<Backend, policy::Compressed<codec::Fp16, policy::Synchronous<>>, M>(s, transport, train, test);
    if (s.policy == "sync-ps") return run<Backend, PS, M>(s, transport, train, test);
    if (s.policy == "sync-ps-fp16") return run<Backend, policy::Compressed<codec::Fp16, PS>, M>(s, transport, train, test);
    if (s.policy == "async") return run<Backend, policy::Asynchronous<topology::ParameterServer>, M>(s, transport, train, test);
    throw ConfigError("--policy: '" + s.policy + "' is not one of sync, sync-fp16, sync-ps, sync-ps-fp16, async");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace example
