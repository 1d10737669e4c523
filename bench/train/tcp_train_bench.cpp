// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_tcp_train_bench: synchronous data-parallel training of the Fashion-MNIST MLP over the TCP
// transport, one worker per process: Trainer<Mlp, policy::Synchronous<>, transport::Tcp>.
//
//   flotilla-launch -n 2 -- flotilla_tcp_train_bench [--steps 1000] [--warmup 200] [--repeat 3]
//       [--stream-gradients true] [--overlap auto|always|never] [--bucket-bytes N]
//       [--step-log FILE] [--trace FILE]
//
// Every rank trains with batch 64 (a global batch of 64 x ranks) and TrainerOptions::threads
// (default 1) cores, on the first whole global batches of the training set. After `warmup` untimed
// updates it times `repeat` calls of fit() with FitOptions::max_steps = steps, printing one JSON
// line per call per rank: its wall time, its samples, and the epoch record's per-step counters.
// The job's throughput is (samples of all ranks) / (the slowest rank's seconds). Run with -n 1 for
// the single-process baseline of the scaling efficiency. --step-log and --trace write the timed
// calls' per-step counters and Chrome-trace timeline (FitOptions::step_log_file and trace_file;
// ranks other than 0 add ".rank<k>"), to see where a step's exposed communication goes.
#include "../common/bench_common.hpp"

#include <flotilla/transport/tcp.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  try {
    namespace tr = flotilla::transport;
    flotilla::cli::Flags flags("flotilla_tcp_train_bench",
                               "synchronous data-parallel MLP training over TCP (SGD, momentum 0.9), timed calls");
    auto& steps = flags.add<std::size_t>("steps", 1000, example::flag_help::steps);
    auto& warmup = flags.add<std::size_t>("warmup", 200, example::flag_help::warmup);
    auto& repeat = flags.add<std::size_t>("repeat", 3, example::flag_help::repeat);
    auto& batch = flags.add<std::size_t>("batch", 64, example::flag_help::batch);
    auto& threads = flags.add<std::size_t>("threads", 1, example::flag_help::threads);
    auto& lr = flags.add<double>("lr", 0.05, example::flag_help::lr);
    auto& stream = flags.add<bool>("stream-gradients", false, "layers report parts of their gradient during backward");
    auto& bucket_bytes = flags.add<std::size_t>("bucket-bytes", flotilla::policy::Synchronous<>{}.bucket_bytes,
                                                 "bytes of gradient per allreduce bucket");
    auto& overlap = flags.add<std::string>("overlap", "auto", example::flag_help::overlap);
    auto& synthetic = flags.add<std::size_t>("synthetic", 0, example::flag_help::synthetic);
    auto& step_log = flags.add<std::filesystem::path>("step-log", {}, example::flag_help::step_log);
    auto& trace = flags.add<std::filesystem::path>("trace", {}, example::flag_help::trace);
    auto& data = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                  example::flag_help::data, "FLOTILLA_FASHION_MNIST");
    flags.at_least("batch", 1).at_least("threads", 1).above("lr", 0);
    if (!flags.parse(argc, argv, std::cout)) return 0;

    const tr::TcpOptions options = tr::TcpOptions::from_environment();
    const std::size_t world = options.world_size;
    const auto full = bench::load(flotilla::data::Split::train, data, synthetic);
    const auto train = bench::whole_batches(full, batch * world);

    flotilla::TrainerOptions<bench::Mlp> o;
    o.optimizer.learning_rate = lr;
    o.optimizer.momentum = 0.9;
    o.batch_size = batch;
    o.threads = threads;
    o.prefetch = 0;
    o.seed = 1;
    o.stream_gradients = stream;
    o.overlap = flotilla::parse_overlap(overlap, "--overlap");
    flotilla::Trainer<bench::Mlp, flotilla::policy::Synchronous<>, tr::Tcp> trainer(o, flotilla::policy::Synchronous<>{.bucket_bytes = bucket_bytes}, options);

    auto timed = [&](std::size_t n, int index) {
      flotilla::FitOptions f;
      f.epochs = std::size_t{1} << 40;
      f.max_steps = n;
      f.log = nullptr;
      if (index >= 0) {
        f.step_log_file = step_log;
        f.trace_file = trace;
      }
      const std::uint64_t s0 = trainer.step();
      const double c0 = bench::process_cpu_seconds(), t0 = bench::now_seconds();
      const auto history = trainer.fit(train, nullptr, f);
      const double t1 = bench::now_seconds(), c1 = bench::process_cpu_seconds();
      const std::uint64_t done = trainer.step() - s0;
      if (index < 0) return;
      std::printf("{\"rank\":%zu,\"world\":%zu,\"run\":%d,\"steps\":%llu,\"samples\":%llu,\"seconds\":%.6f,\"cpu_seconds\":%.6f",
                  options.rank, world, index, static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(done * batch), t1 - t0, c1 - c0);
      // The counters of the last epoch record of the call (means per step).
      if (!history.empty())
        for (const auto& [key, value] : history.back().extra) std::printf(",\"%s\":%.6g", key.c_str(), value);
      std::printf("}\n");
      std::fflush(stdout);
    };
    if (warmup) timed(warmup, -1);
    for (std::size_t r = 0; r < repeat; ++r) timed(steps, static_cast<int>(r));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_tcp_train_bench: %s\n", e.what());
    return 1;
  }
}
