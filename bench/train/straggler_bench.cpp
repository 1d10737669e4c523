// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_straggler_bench: in-process data-parallel training of the Fashion-MNIST MLP with one slow
// worker, under each update policy. Every configuration trains a fresh trainer from the same seed
// for one epoch (or --max-steps updates), then evaluates the whole test set; one JSON line each.
//
//   flotilla_straggler_bench --workers 4 --straggler 3 --factor 2 [--policies sync,sync-ps,...]
//
// Policies: sync (Synchronous<> : ring allreduce), sync-ps (Synchronous<ParameterServer>),
// ssp1, ssp2, ssp4, ssp8 (BoundedStaleness<S>), async (Asynchronous<ParameterServer>).
// --factor 1 runs without a straggler. Workers are threads of this process with one core each;
// parameter-server policies add one server thread (TrainerOptions::servers = 1).
//
// Reported per configuration: samples/s over the training (all workers, from the epoch record),
// the wall time of fit(), test accuracy and loss after training, and the epoch record's extras
// (max_steps_ahead, max_staleness, compute / exposed communication / update ms per step).
#include "../common/bench_common.hpp"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::size_t workers, straggler, batch, steps, epochs, synthetic, repeat;
  double factor, lr;
  std::uint64_t seed;
  std::filesystem::path data;
};

template <class Policy>
void run(const std::string& name, const Settings& s, const flotilla::data::Dataset<float>& train,
         const flotilla::data::Dataset<float>& test) {
  flotilla::TrainerOptions<bench::Mlp> o;
  o.optimizer.learning_rate = s.lr;
  o.optimizer.momentum = 0.9;
  o.batch_size = s.batch;
  o.threads = 1;
  o.seed = s.seed;
  o.workers = s.workers;
  o.servers = 1;
  if (s.factor > 1) o.straggler = {s.straggler, s.factor};
  for (std::size_t rep = 0; rep < s.repeat; ++rep) {
    flotilla::Trainer<bench::Mlp, Policy> trainer(o);
    flotilla::FitOptions f;
    f.epochs = s.epochs;
    f.max_steps = s.steps;
    f.log = nullptr;
    const double t0 = bench::now_seconds(), c0 = bench::process_cpu_seconds();
    const auto history = trainer.fit(train, nullptr, f);
    const double t1 = bench::now_seconds(), c1 = bench::process_cpu_seconds();
    const auto ev = trainer.evaluate(test);
    double samples = 0, seconds = 0;
    for (const auto& r : history) {
      samples += r.samples_per_second * r.seconds;
      seconds += r.seconds;
    }
    std::printf("{\"policy\":\"%s\",\"workers\":%zu,\"straggler\":%s,\"factor\":%.2f,\"rep\":%zu,\"steps\":%llu,"
                "\"samples\":%.0f,\"samples_per_second\":%.2f,\"fit_seconds\":%.4f,\"cpu_seconds\":%.4f,"
                "\"test_accuracy\":%.6f,\"test_loss\":%.6f,\"train_loss\":%.6f",
                name.c_str(), s.workers, s.factor > 1 ? std::to_string(s.straggler).c_str() : "null", s.factor, rep,
                static_cast<unsigned long long>(trainer.step()), samples, samples / std::max(seconds, 1e-9), t1 - t0,
                c1 - c0, ev.accuracy, ev.loss, history.empty() ? 0.0 : history.back().train_loss);
    if (!history.empty())
      for (const auto& [key, value] : history.back().extra)
        if (key != "workers") std::printf(",\"%s\":%.6g", key.c_str(), value);
    std::printf("}\n");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_straggler_bench",
                               "update policies with a slow worker (MLP, Fashion-MNIST, SGD with momentum 0.9)");
    auto& workers = flags.add<std::size_t>("workers", 4, example::flag_help::workers);
    auto& straggler = flags.add<std::size_t>("straggler", 3, "the slow worker's rank");
    auto& factor = flags.add<double>("factor", 2.0, "how much slower it is (1: no straggler)");
    auto& policies = flags.add<std::string>("policies", "sync,sync-ps,ssp1,ssp2,ssp4,ssp8,async", "comma-separated");
    auto& batch = flags.add<std::size_t>("batch", 64, example::flag_help::batch);
    auto& epochs = flags.add<std::size_t>("epochs", 1, example::flag_help::epochs);
    auto& steps = flags.add<std::size_t>("max-steps", 0, example::flag_help::max_steps);
    auto& repeat = flags.add<std::size_t>("repeat", 1, example::flag_help::repeat);
    auto& lr = flags.add<double>("lr", 0.05, example::flag_help::lr);
    auto& seed = flags.add<std::uint64_t>("seed", 1, example::flag_help::seed);
    auto& synthetic = flags.add<std::size_t>("synthetic", 0, example::flag_help::synthetic);
    auto& data = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                  example::flag_help::data, "FLOTILLA_FASHION_MNIST");
    flags.at_least("workers", 1).at_least("batch", 1).at_least("epochs", 1).above("lr", 0);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    const Settings s{workers, straggler, batch, steps, epochs, synthetic, repeat, factor, lr, seed, data};
    if (s.factor > 1 && s.straggler >= s.workers) throw flotilla::ConfigError("--straggler must be below --workers");
    const auto train = bench::load(flotilla::data::Split::train, s.data, s.synthetic);
    const auto test = bench::load(flotilla::data::Split::test, s.data, s.synthetic ? s.synthetic / 6 + 1 : 0);

    using namespace flotilla;
    using PS = topology::ParameterServer;
    std::stringstream list(policies);
    std::string p;
    while (std::getline(list, p, ',')) {
      if (p == "sync") run<policy::Synchronous<>>(p, s, train, test);
      else if (p == "sync-ps") run<policy::Synchronous<PS>>(p, s, train, test);
      else if (p == "ssp1") run<policy::BoundedStaleness<1>>(p, s, train, test);
      else if (p == "ssp2") run<policy::BoundedStaleness<2>>(p, s, train, test);
      else if (p == "ssp4") run<policy::BoundedStaleness<4>>(p, s, train, test);
      else if (p == "ssp8") run<policy::BoundedStaleness<8>>(p, s, train, test);
      else if (p == "async") run<policy::Asynchronous<PS>>(p, s, train, test);
      else throw ConfigError("unknown policy '" + p + "'");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_straggler_bench: %s\n", e.what());
    return 1;
  }
}
