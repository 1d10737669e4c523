// What the Fashion-MNIST examples share: their flags, the data, and the final report. Each example
// (fashion_mnist_mlp.cpp, fashion_mnist_cnn.cpp) only declares its network and its settings.
#pragma once

#include <flotilla/flotilla.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

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
  std::filesystem::path metrics, plot, checkpoint, resume;
};

/// Parses the flags over `defaults`. Returns false when the program should exit (after --help).
inline bool parse_flags(int argc, char** argv, const char* name, const char* what, Settings& s) {
  flotilla::cli::Flags flags(name, what);
  auto& data_dir = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                    "directory holding the Fashion-MNIST IDX files", "FLOTILLA_FASHION_MNIST");
  auto& epochs = flags.add<std::size_t>("epochs", s.epochs, "passes over the training set");
  auto& batch = flags.add<std::size_t>("batch", s.batch, "samples per update");
  auto& lr = flags.add<double>("lr", s.learning_rate, "learning rate (SGD with momentum)");
  auto& momentum = flags.add<double>("momentum", s.momentum, "momentum");
  auto& threads = flags.add<std::size_t>("threads", s.threads, "cores sharing each batch");
  auto& seed = flags.add<std::uint64_t>("seed", s.seed, "seed of the initial weights and the data order");
  auto& metrics = flags.add<std::filesystem::path>("metrics", s.metrics, "per-epoch metrics file (.jsonl or .csv)");
  auto& plot = flags.add<std::filesystem::path>("plot", s.plot, "SVG plot of the loss and accuracy curves");
  auto& checkpoint = flags.add<std::filesystem::path>("checkpoint", s.checkpoint, "checkpoint written after each epoch");
  auto& resume = flags.add<std::filesystem::path>("resume", s.resume, "checkpoint to resume from");
  if (!flags.parse(argc, argv, std::cout)) return false;
  s = Settings{data_dir, epochs, batch, lr, momentum, threads, seed, metrics, plot, checkpoint, resume};
  return true;
}

/// Loads the data, trains `Model` with SGD + momentum as the settings say, and prints the test
/// accuracy and per-class precision and recall. Returns the process exit code.
template <class Model>
int train_and_report(const Settings& s) {
  namespace fm = flotilla::data::fashion_mnist;
  std::printf("loading Fashion-MNIST from %s\n", s.data_dir.string().c_str());
  const auto train = fm::load<float>(fm::Split::train, s.data_dir);
  const auto test = fm::load<float>(fm::Split::test, s.data_dir);
  std::printf("%zu training and %zu test images; model with %zu parameters\n", train.size(), test.size(),
              Model::parameter_count);

  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = s.learning_rate;
  options.optimizer.momentum = s.momentum;
  options.batch_size = s.batch;
  options.threads = s.threads;
  options.seed = s.seed;
  flotilla::Trainer<Model> trainer(options);
  if (!s.resume.empty()) {
    trainer.load(s.resume);
    std::printf("resumed from %s at epoch %llu, step %llu\n", s.resume.string().c_str(),
                static_cast<unsigned long long>(trainer.epoch()), static_cast<unsigned long long>(trainer.step()));
  }

  flotilla::FitOptions fit;
  fit.epochs = s.epochs;
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
