// Distributed training of a CNN on Fashion-MNIST, on several workers of this machine, with no setup.
//
// The workers are threads of this process (flotilla's embedded default transport). Each takes its
// share of every global batch; the update policy decides what happens to their gradients:
//   --policy sync       synchronous, peer to peer: gradients summed by ring allreduce, in buckets
//                       sent while backward is still running (the default)
//   --policy sync-fp16  the same with fp16 on the wire (half the bytes)
//   --policy sync-ps    synchronous, through a parameter server
//   --policy async      asynchronous, through a parameter server: no worker waits for another
// The same program runs as separate processes with the TCP transport (fashion_mnist_tcp) or MPI
// (fashion_mnist_mpi); see the README.
//
// It first times one worker for a few hundred steps, then trains with --workers workers and reports
// test accuracy, samples per second and the speed-up over one worker.
#include <flotilla/flotilla.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace fm = flotilla::data::fashion_mnist;
using Net = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                   //
                                 flotilla::Conv2D<32, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Conv2D<64, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Flatten, flotilla::Dense<10>>;
using Model = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Momentum>;

struct Settings {
  std::size_t workers, epochs, batch, baseline_steps;
  double lr;
  std::string policy;
  std::filesystem::path data, metrics, plot, trace;
};

template <class Policy>
int run(const Settings& s, const flotilla::data::Dataset<float>& train, const flotilla::data::Dataset<float>& test) {
  flotilla::TrainerOptions<Model> options;
  options.optimizer.learning_rate = s.lr;
  options.optimizer.momentum = 0.9;
  options.batch_size = s.batch;
  options.seed = 1;

  // One worker, for the speed-up's denominator.
  double one_worker = 0;
  if (s.baseline_steps > 0) {
    flotilla::Trainer<Model> single(options);
    flotilla::FitOptions f;
    f.log = nullptr;
    f.max_steps = s.baseline_steps;
    one_worker = single.fit(train, nullptr, f).back().samples_per_second;
    std::printf("1 worker: %.0f samples/s (%zu steps of %zu)\n", one_worker, s.baseline_steps, s.batch);
  }

  options.workers = s.workers;
  flotilla::Trainer<Model, Policy> trainer(options);
  flotilla::FitOptions fit;
  fit.epochs = s.epochs;
  fit.metrics_file = s.metrics;
  fit.plot_file = s.plot;
  fit.trace_file = s.trace;
  fit.plot_title = "Fashion-MNIST CNN, " + std::to_string(s.workers) + " workers, " + s.policy;
  std::printf("%zu workers, policy %s, %zu samples per worker per step\n", s.workers, s.policy.c_str(), s.batch);
  const auto history = trainer.fit(train, &test, fit);

  const auto result = trainer.evaluate(test);
  double rate = 0;
  for (const auto& r : history) rate += r.samples_per_second / static_cast<double>(history.size());
  std::printf("\ntest accuracy %.2f%% after %zu epochs; %.0f samples/s with %zu workers", 100 * result.accuracy,
              s.epochs, rate, s.workers);
  if (one_worker > 0) std::printf(", %.2fx one worker", rate / one_worker);
  std::printf("\n");
  for (const auto& [name, value] : history.back().extra) std::printf("  %-32s %.4g\n", name.c_str(), value);
  return 0;
}

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("fashion_mnist_distributed", "train a CNN on Fashion-MNIST on several in-process workers");
    Settings s;
    auto& workers = flags.add<std::size_t>("workers", std::max(2u, std::thread::hardware_concurrency()),
                                           "workers (threads of this process)");
    auto& epochs = flags.add<std::size_t>("epochs", 5, "passes over the training set");
    auto& batch = flags.add<std::size_t>("batch", 64, "samples per worker per step");
    auto& lr = flags.add<double>("lr", 0.05, "learning rate (SGD with momentum 0.9)");
    auto& policy = flags.add<std::string>("policy", "sync", "sync, sync-fp16, sync-ps or async");
    auto& baseline = flags.add<std::size_t>("baseline-steps", 200, "steps to time one worker first (0: skip)");
    auto& data = flags.add<std::filesystem::path>("data", fm::default_directory(), "Fashion-MNIST directory",
                                                  "FLOTILLA_FASHION_MNIST");
    auto& metrics = flags.add<std::filesystem::path>("metrics", "distributed_metrics.jsonl", "per-epoch metrics");
    auto& plot = flags.add<std::filesystem::path>("plot", "distributed_curves.svg", "loss and accuracy curves (SVG)");
    auto& trace = flags.add<std::filesystem::path>("trace", "", "Chrome-trace timeline of every worker (JSON)");
    if (!flags.parse(argc, argv, std::cout)) return 0;
    s = Settings{workers, epochs, batch, baseline, lr, policy, data, metrics, plot, trace};
    if (s.workers == 0) throw flotilla::ConfigError("--workers must be at least 1");

    std::printf("loading Fashion-MNIST from %s\n", s.data.string().c_str());
    const auto train = fm::load<float>(fm::Split::train, s.data);
    const auto test = fm::load<float>(fm::Split::test, s.data);
    using namespace flotilla;
    if (s.policy == "sync") return run<policy::Synchronous<topology::Ring>>(s, train, test);
    if (s.policy == "sync-fp16") return run<policy::Compressed<codec::Fp16, policy::Synchronous<>>>(s, train, test);
    if (s.policy == "sync-ps") return run<policy::Synchronous<topology::ParameterServer>>(s, train, test);
    if (s.policy == "async") return run<policy::Asynchronous<topology::ParameterServer>>(s, train, test);
    throw ConfigError("--policy: '" + s.policy + "' is not one of sync, sync-fp16, sync-ps, async");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
