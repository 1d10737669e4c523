// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// What the Fashion-MNIST examples share: their flags, the data, and the final report. Each example
// (fashion_mnist_mlp.cpp, fashion_mnist_cnn.cpp) only declares its network and its settings.
#pragma once

#include <flotilla/flotilla.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "flag_help.hpp"

namespace example {

/// Settings common to the examples, with the example's own defaults.
struct Settings {
  std::filesystem::path data_dir;
  std::size_t epochs;
  std::size_t batch;
  double learning_rate;
  double momentum;
  std::size_t threads;
  std::uint64_t seed;
  std::filesystem::path metrics, plot, checkpoint;
  bool resume = false;  ///< continue from `checkpoint`, when it exists
  std::string schedule = "cosine";
  double weight_decay = 0;   ///< on weights only: biases and normalisation parameters are left alone
  std::size_t workers = 1;   ///< in-process workers (threads of this process), each a share of the batch
};

/// Parses the flags over `defaults`. Returns false when the program should exit (after --help).
inline bool parse_flags(int argc, char** argv, const char* name, const char* what, Settings& s) {
  flotilla::cli::Flags flags(name, what);
  auto& data_dir = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                    flag_help::data, "FLOTILLA_FASHION_MNIST");
  auto& epochs = flags.add<std::size_t>("epochs", s.epochs, flag_help::epochs);
  auto& batch = flags.add<std::size_t>("batch", s.batch, flag_help::batch);
  auto& lr = flags.add<double>("lr", s.learning_rate, flag_help::lr);
  auto& momentum = flags.add<double>("momentum", s.momentum, flag_help::momentum);
  auto& threads = flags.add<std::size_t>("threads", s.threads, flag_help::threads);
  auto& seed = flags.add<std::uint64_t>("seed", s.seed, flag_help::seed);
  auto& metrics = flags.add<std::filesystem::path>("metrics", s.metrics, flag_help::metrics);
  auto& plot = flags.add<std::filesystem::path>("plot", s.plot, flag_help::plot);
  auto& checkpoint = flags.add<std::filesystem::path>("checkpoint", s.checkpoint,
                                                      "checkpoint file, written after each epoch (--resume reads it)");
  auto& resume = flags.add<bool>("resume", s.resume, flag_help::resume);
  auto& schedule = flags.add<std::string>("schedule", s.schedule,
                                          "learning-rate schedule: cosine (from --lr down to 0 over the run) or constant");
  auto& weight_decay = flags.add<double>("weight-decay", s.weight_decay,
                                         "weight decay of the weights (not of biases or normalisation parameters)");
  auto& workers = flags.add<std::size_t>("workers", s.workers, flag_help::workers);
  flags.at_least("epochs", 1).at_least("batch", 1).above("lr", 0).at_least("momentum", 0).at_least("threads", 1);
  flags.at_least("weight-decay", 0).at_least("workers", 1);
  if (!flags.parse(argc, argv, std::cout)) return false;
  if (schedule != "cosine" && schedule != "constant")
    throw flotilla::ConfigError("--schedule: expected cosine or constant, not '" + schedule + "'");
  if (resume && checkpoint.empty())
    throw flotilla::ConfigError("--resume needs --checkpoint: the file to continue from, which the run goes on writing");
  s = Settings{data_dir, epochs, batch, lr, momentum, threads, seed, metrics, plot, checkpoint, resume, schedule,
               weight_decay, workers};
  return true;
}

/// Loads the data, trains `Model` as the settings say, and prints the test
/// accuracy and per-class precision and recall. Returns the process exit code.
template <class Model>
int train_and_report(const Settings& s) {
  namespace fm = flotilla::data::fashion_mnist;
  std::printf("loading Fashion-MNIST from %s\n", s.data_dir.string().c_str());
  auto train = fm::load<float>(fm::Split::train, s.data_dir);
  auto test = fm::load<float>(fm::Split::test, s.data_dir);
  // Pixels to zero mean and unit variance over the training set (both sets with the same figures):
  // better-conditioned first-layer gradients, so the same steps go further.
  const float mean = train.inputs.mean();
  const float stddev = std::sqrt((train.inputs.array() - mean).square().mean());
  for (auto* d : {&train, &test}) d->inputs = (d->inputs.array() - mean) / stddev;
  std::printf("%zu training and %zu test images; the model:\n%s\n", train.size(), test.size(),
              flotilla::summary<typename Model::architecture, typename Model::scalar_type>().to_string().c_str());

  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = s.learning_rate;
  if constexpr (requires { options.optimizer.momentum; }) options.optimizer.momentum = s.momentum;
  options.batch_size = s.batch;
  options.threads = s.threads;
  options.workers = s.workers;
  if (s.weight_decay > 0) {
    options.optimizer.weight_decay = s.weight_decay;
    options.optimizer.decay_biases = false;
    options.optimizer.decay_normalization = false;
  }
  options.seed = s.seed;
  if (s.schedule == "cosine") {
    // Annealing the rate to zero over the run is worth a point or more of test accuracy at the end.
    const std::size_t steps_per_epoch = (train.size() + s.batch * s.workers - 1) / (s.batch * s.workers);
    options.schedule = flotilla::schedule::Cosine{.total = s.epochs * steps_per_epoch, .min_factor = 0.0, .warmup = 0};
  }
  flotilla::Trainer<Model> trainer(options);
  // As --resume does with checkpoint sets (checkpoint_flags.hpp): no file yet is a run from the
  // start, so that one command line serves the first run and every restart, and --epochs counts
  // the whole run.
  std::size_t epochs = s.epochs;
  if (s.resume) {
    if (std::filesystem::exists(s.checkpoint)) {
      trainer.load(s.checkpoint);
      std::printf("resumed from %s at epoch %llu, step %llu\n", s.checkpoint.string().c_str(),
                  static_cast<unsigned long long>(trainer.epoch()), static_cast<unsigned long long>(trainer.step()));
      epochs = trainer.epoch() < epochs ? epochs - static_cast<std::size_t>(trainer.epoch()) : 0;
    } else {
      std::printf("no checkpoint at %s yet: starting from the beginning\n", s.checkpoint.string().c_str());
    }
  }

  flotilla::FitOptions fit;
  fit.epochs = epochs;
  fit.metrics_file = s.metrics;
  fit.plot_file = s.plot;
  fit.checkpoint_file = s.checkpoint;
  const auto history = trainer.fit(train, &test, fit);

  const auto result = trainer.evaluate(test);
  std::printf("\ntest accuracy %.2f%%, test loss %.4f, %.0f training samples/s in the last epoch\n\n",
              100 * result.accuracy, result.loss, history.empty() ? 0.0 : history.back().samples_per_second);
  std::printf("%s", result.confusion->report(fm::class_names).c_str());
  return 0;
}

/// Runs `body`, turning flotilla's exceptions into a message and exit code 1.
template <class F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace example
