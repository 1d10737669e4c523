// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_reproducible_bench: what policy::Reproducible costs against policy::Synchronous<> at
// the same global batch, with in-process workers, on the Fashion-MNIST MLP and CNN.
//
//   flotilla_reproducible_bench [--models mlp,cnn] [--configs 1x1,1x2,2x1] [--shards 8,16,32]
//                               [--global-batch 64] [--steps 100] [--repeat 5]
//
// A configuration WxT is W workers of T cores each (--global-batch is split among the
// workers). For each model, configuration and shard size, both trainers start from the same seed
// and take timed runs of --steps updates in turn (synchronous, reproducible, synchronous, ...),
// after a warm-up of each; one JSON line gives each policy's median samples/s and their ratio.
#include "../common/bench_common.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::size_t batch, steps, repeat, synthetic;
  std::uint64_t seed;
  std::filesystem::path data;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

template <class Trainer>
double samples_per_second(Trainer& t, const flotilla::data::Dataset<float>& train, std::size_t steps, std::size_t batch) {
  flotilla::FitOptions f;
  f.epochs = std::size_t{1} << 40;  // max_steps ends the call
  f.max_steps = steps;
  f.log = nullptr;
  const double t0 = bench::now_seconds();
  t.fit(train, nullptr, f);
  return static_cast<double>(steps * batch) / (bench::now_seconds() - t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class Model>
void compare(const std::string& model, std::size_t workers, std::size_t threads, std::size_t shard, const Settings& s,
             const flotilla::data::Dataset<float>& train) {
  flotilla::TrainerOptions<Model> o;
  o.optimizer.learning_rate = 0.05;
  o.batch_size = s.batch / workers;
  o.workers = workers;
  o.threads = threads;
  o.seed = s.seed;
  o.prefetch = 0;
  flotilla::policy::Reproducible reproducible;
  reproducible.shard_samples = shard;
  flotilla::Trainer<Model> sync(o);
  flotilla::Trainer<Model, flotilla::policy::Reproducible> repro(o, reproducible);
  samples_per_second(sync, train, std::max<std::size_t>(s.steps / 5, 1), s.batch);
  samples_per_second(repro, train, std::max<std::size_t>(s.steps / 5, 1), s.batch);
  std::vector<double> a, b;
  for (std::size_t i = 0; i < s.repeat; ++i) {
    a.push_back(samples_per_second(sync, train, s.steps, s.batch));
    b.push_back(samples_per_second(repro, train, s.steps, s.batch));
  }
  std::printf("{\"model\":\"%s\",\"workers\":%zu,\"threads\":%zu,\"global_batch\":%zu,\"shard_samples\":%zu,"
              "\"synchronous\":%.1f,\"reproducible\":%.1f,\"ratio\":%.3f}\n",
              model.c_str(), workers, threads, s.batch, shard, median(a), median(b), median(b) / median(a));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_reproducible_bench",
                               "policy::Reproducible against policy::Synchronous<> (MLP and CNN, Fashion-MNIST)");
    auto& models = flags.add<std::string>("models", "mlp,cnn", "comma-separated: mlp, cnn");
    auto& configs = flags.add<std::string>("configs", "1x1,1x2,2x1", "comma-separated WORKERSxTHREADS");
    auto& shards = flags.add<std::string>("shards", "8,16,32", "comma-separated samples per virtual shard");
    // A global batch, not --batch's per-worker one: configurations of different worker counts are
    // compared at the same samples per update.
    auto& batch = flags.add<std::size_t>("global-batch", 64,
                                         "samples per update, split evenly over each configuration's workers");
    auto& steps = flags.add<std::size_t>("steps", 100, example::flag_help::steps);
    auto& repeat = flags.add<std::size_t>("repeat", 5, example::flag_help::repeat);
    auto& seed = flags.add<std::uint64_t>("seed", 1, example::flag_help::seed);
    auto& synthetic = flags.add<std::size_t>("synthetic", 0, example::flag_help::synthetic);
    auto& data = flags.add<std::filesystem::path>("data", flotilla::data::fashion_mnist::default_directory(),
                                                  example::flag_help::data, "FLOTILLA_FASHION_MNIST");
    if (!flags.parse(argc, argv, std::cout)) return 0;
    const Settings s{batch, steps, repeat, synthetic, seed, data};
    const auto train = bench::whole_batches(bench::load(flotilla::data::Split::train, s.data, s.synthetic), s.batch);
    for (const auto& model : split_list(models))
      for (const auto& config : split_list(configs)) {
        const std::size_t x = config.find('x');
        if (x == std::string::npos) throw flotilla::ConfigError("--configs: '" + config + "' is not WORKERSxTHREADS");
        const std::size_t workers = std::stoul(config.substr(0, x)), threads = std::stoul(config.substr(x + 1));
        for (const auto& shard_text : split_list(shards)) {
          const std::size_t shard = std::stoul(shard_text);
          if (model == "mlp") compare<bench::Mlp>(model, workers, threads, shard, s, train);
          else if (model == "cnn") compare<bench::Cnn>(model, workers, threads, shard, s, train);
          else throw flotilla::ConfigError("--models: unknown model '" + model + "'");
        }
      }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla_reproducible_bench: %s\n", e.what());
    return 1;
  }
}
