// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_train_bench: the training throughput and learning curves of the Fashion-MNIST MLP
// (784-256-128-10, ReLU) and CNN (Conv2D<32,5>, ReLU, MaxPool2D<2>, Conv2D<64,5>, ReLU, MaxPool2D<2>,
// Flatten, Dense<10>) under Trainer::fit, SGD with momentum. The PyTorch comparisons
// (bench/train_vs_pytorch.py, bench/curves_vs_pytorch.py) drive it; it also runs on its own.
//
//   flotilla_train_bench --model mlp --threads 1 --mode run --steps 500 --repeat 3
//       warm up, then time `steps` updates `repeat` times; one JSON line per timed run
//   flotilla_train_bench --model cnn --threads 2 --mode serve
//       loads the data once, then reads commands on stdin, one per line, answering each on stdout:
//         run N     -> {"steps":N,"samples":...,"seconds":...,"cpu_seconds":...,"samples_per_second":...}
//         quit
//       (the drivers alternate runs of flotilla and PyTorch this way without reloading anything)
//   flotilla_train_bench --model mlp --mode curve --epochs 5 --lr 0.05 --seed 1
//       trains `epochs` epochs over the whole training set, evaluating the test set after each;
//       one JSON line per epoch
//
// Throughput runs use the first 937 x 64 training samples, so that every step has a full batch,
// with no validation set (nothing but training inside the timed call) and progress off.
#include "../common/bench_common.hpp"

#include <iostream>
#include <sstream>
#include <string>

namespace {

struct Settings {
  std::string model, mode;
  std::size_t threads, batch, steps, warmup, repeat, epochs, synthetic, prefetch;
  double lr, momentum;
  std::uint64_t seed;
  std::filesystem::path data;
};

template <class Model>
flotilla::TrainerOptions<Model> trainer_options(const Settings& s) {
  flotilla::TrainerOptions<Model> o;
  o.optimizer.learning_rate = s.lr;
  o.optimizer.momentum = s.momentum;
  o.batch_size = s.batch;
  o.threads = s.threads;
  o.seed = s.seed;
  o.prefetch = s.prefetch;
  return o;
}

/// Times `steps` updates of `trainer` (continuing where the previous call stopped) as one JSON line.
template <class Trainer>
std::string timed_run(Trainer& trainer, const flotilla::data::Dataset<float>& train, const Settings& s,
                      std::size_t steps) {
  flotilla::FitOptions f;
  f.epochs = std::size_t{1} << 40;  // max_steps ends the call, across epoch boundaries
  f.max_steps = steps;
  f.log = nullptr;
  const std::uint64_t step0 = trainer.step();
  const double c0 = bench::process_cpu_seconds(), t0 = bench::now_seconds();
  trainer.fit(train, nullptr, f);
  const double t1 = bench::now_seconds(), c1 = bench::process_cpu_seconds();
  const std::uint64_t done = trainer.step() - step0;
  if (done != steps) throw flotilla::ConfigError("expected " + std::to_string(steps) + " steps, ran " + std::to_string(done));
  const double samples = static_cast<double>(done * s.batch);
  char line[256];
  std::snprintf(line, sizeof line,
                "{\"steps\":%llu,\"samples\":%.0f,\"seconds\":%.6f,\"cpu_seconds\":%.6f,\"samples_per_second\":%.2f}",
                static_cast<unsigned long long>(done), samples, t1 - t0, c1 - c0, samples / (t1 - t0));
  return line;
}

template <class Model>
int run(const Settings& s) {
  namespace fm = flotilla::data::fashion_mnist;
  const auto full = bench::load(flotilla::data::Split::train, s.data, s.synthetic);
  flotilla::Trainer<Model> trainer(trainer_options<Model>(s));

  if (s.mode == "curve") {
    const auto test = bench::load(flotilla::data::Split::test, s.data, s.synthetic ? s.synthetic / 6 + 1 : 0);
    flotilla::FitOptions f;
    f.epochs = s.epochs;
    f.log = nullptr;
    const auto history = trainer.fit(full, &test, f);
    for (const auto& r : history)
      std::printf("{\"epoch\":%llu,\"train_loss\":%.6f,\"train_accuracy\":%.6f,\"test_loss\":%.6f,\"test_accuracy\":%.6f,"
                  "\"seconds\":%.3f}\n",
                  static_cast<unsigned long long>(r.epoch), r.train_loss, r.train_accuracy, r.val_loss.value_or(-1),
                  r.val_accuracy.value_or(-1), r.seconds);
    return 0;
  }

  const auto train = bench::whole_batches(full, s.batch);
  if (s.mode == "run") {
    if (s.warmup) timed_run(trainer, train, s, s.warmup);
    for (std::size_t i = 0; i < s.repeat; ++i) std::printf("%s\n", timed_run(trainer, train, s, s.steps).c_str());
    return 0;
  }
  if (s.mode == "serve") {
    std::printf("ready\n");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string command;
      in >> command;
      if (command == "quit") break;
      std::size_t steps = 0;
      if (command != "run" || !(in >> steps) || steps == 0) {
        std::printf("{\"error\":\"unknown command\"}\n");
      } else {
        std::printf("%s\n", timed_run(trainer, train, s, steps).c_str());
      }
      std::fflush(stdout);
    }
    return 0;
  }
  throw flotilla::ConfigError("--mode must be run, serve or curve");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_train_bench",
                               "training throughput and curves of the Fashion-MNIST MLP and CNN (SGD with momentum)");
    auto& model = flags.add<std::string>("model", "mlp", "mlp, cnn or resnet");
    auto& mode = flags.add<std::string>(
        "mode", "run", "run (--steps, --warmup, --repeat), serve or curve (--epochs); see the top of train_bench.cpp");
    auto& threads = flags.add<std::size_t>("threads", 1, example::flag_help::threads);
    auto& batch = flags.add<std::size_t>("batch", 64, example::flag_help::batch);
    auto& steps = flags.add<std::size_t>("steps", 300, example::flag_help::steps);
    auto& warmup = flags.add<std::size_t>("warmup", 50, example::flag_help::warmup);
    auto& repeat = flags.add<std::size_t>("repeat", 3, example::flag_help::repeat);
    auto& epochs = flags.add<std::size_t>("epochs", 5, example::flag_help::epochs);
    auto& lr = flags.add<double>("lr", 0.05, example::flag_help::lr);
    auto& momentum = flags.add<double>("momentum", 0.9, example::flag_help::momentum);
    auto& seed = flags.add<std::uint64_t>("seed", 1, example::flag_help::seed);
    auto& prefetch = flags.add<std::size_t>("prefetch", 0,
                                            "batches gathered ahead on a background thread (0: on the training thread, "
                                            "so that the run uses exactly --threads threads)");
    auto& synthetic = flags.add<std::size_t>("synthetic", 0, example::flag_help::synthetic);
    auto& data = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                  example::flag_help::data, "FLOTILLA_FASHION_MNIST");
    flags.at_least("threads", 1).at_least("batch", 1).at_least("epochs", 1).above("lr", 0).at_least("momentum", 0);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    const Settings s{model, mode, threads, batch, steps, warmup, repeat, epochs, synthetic, prefetch, lr, momentum, seed, data};
    if (s.model == "mlp") return run<bench::Mlp>(s);
    if (s.model == "cnn") return run<bench::Cnn>(s);
    if (s.model == "resnet") return run<bench::Resnet>(s);
    throw flotilla::ConfigError("--model must be mlp, cnn or resnet");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_train_bench: %s\n", e.what());
    return 1;
  }
}
