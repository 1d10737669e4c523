// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Click-through prediction with embedding tables on parameter servers: the program that ctr.cpp
// (workers and servers as threads of one process) and ctr_tcp.cpp (one process per rank, under
// flotilla-launch) share.
//
// The model: each of the 26 categorical fields of a Criteo-format example is embedded (16 values
// per ID, rows created on first touch on the server that owns the ID), the pooled embeddings and
// the 13 numeric features (log(1 + x)) feed a 64-32 ReLU tower that ends in the click logit.
// Embedding rows are updated by Adagrad on their servers, the tower by Adam on every worker (its
// gradients summed by the ring allreduce among the workers).
//
// Without --train, it first writes a training file and a held-out file from a planted logistic
// model (flotilla-ctr-generate does the same from the command line), so that the AUC it reaches
// can be set against the planted model's own AUC on the same held-out lines: the best any model
// could do.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <unordered_set>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/data/criteo.hpp"
#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/sparse/trainer.hpp"
#include "../flag_help.hpp"

namespace example {

namespace fl = flotilla;

inline constexpr std::size_t embedding_dim = 16;
using Tower = fl::Sequential<fl::Input<fl::data::criteo_categorical_fields * embedding_dim + fl::data::criteo_dense_features>,
                             fl::Dense<64>, fl::ReLU, fl::Dense<32>, fl::ReLU, fl::Dense<1>>;
using Model = fl::sparse::CtrModel<fl::sparse::CriteoInputs, fl::Embedding<embedding_dim>, Tower, fl::optim::RowAdagrad,
                                   fl::optim::Adam>;

struct Settings {
  std::filesystem::path train, test, data_dir;
  std::size_t lines = 0, test_lines = 0, epochs = 0, batch = 0, workers = 0, servers = 0;
  std::string policy, codec;
  double row_lr = 0, tower_lr = 0;
  std::uint64_t seed = 1;
  std::filesystem::path metrics, plot;
  bool stream = false;
  std::size_t shuffle_buffer = 0;
  std::uint64_t skip_malformed = 0;
};

/// The planted model's AUC and log loss on the held-out lines: what a perfect learner would reach.
inline fl::BinaryMetrics planted_metrics(const fl::data::CtrGeneratorOptions& g, const std::vector<fl::data::CtrExample>& test) {
  const fl::data::PlantedCtrModel planted(g);
  std::vector<float> p, y;
  for (const auto& x : test) {
    p.push_back(static_cast<float>(planted.probability(x)));
    y.push_back(x.label);
  }
  return fl::binary_metrics(std::span<const float>(p), std::span<const float>(y));
}

inline fl::data::ReaderOptions reader_options(const Settings& s) {
  fl::data::ReaderOptions o;
  if (s.skip_malformed > 0) {
    o.on_malformed = fl::data::OnMalformed::skip;
    o.max_skipped = s.skip_malformed;
  }
  return o;
}

template <class Policy, class Backend>
int train(const Settings& s, const typename Backend::options& transport, const std::vector<fl::data::CtrExample>& train_set,
          const std::vector<fl::data::CtrExample>& test_set, bool report) {
  Model model;
  model.row_optimizer.learning_rate = s.row_lr;
  model.tower_optimizer.learning_rate = s.tower_lr;
  fl::sparse::TrainerOptions o;
  o.workers = s.workers;
  o.servers = s.servers;
  o.batch_size = s.batch;
  o.seed = s.seed;
  o.verbose = report;
  o.metrics_file = s.metrics;
  o.plot_file = s.plot;
  fl::sparse::Trainer<Model, Policy, Backend> trainer(model, o, transport);
  const auto t0 = std::chrono::steady_clock::now();
  fl::data::ReaderOptions reader = reader_options(s);
  reader.shuffle_buffer = s.shuffle_buffer;
  reader.seed = s.seed;
  const fl::History h = s.stream ? trainer.fit_file(s.train.string(), reader, test_set, s.epochs)
                                 : trainer.fit(train_set, test_set, s.epochs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!report || h.empty()) return 0;
  auto extra = [&](const char* name) {
    for (const auto& [k, v] : h.back().extra)
      if (k == name) return v;
    return std::nan("");
  };
  // What a dense exchange of the same table would move: every row of it, pushed and pulled, by
  // every worker, every step. The rows are those the servers created: every ID of the training
  // and held-out data.
  std::size_t rows = trainer.rows_held();
  if (rows == 0) {  // the servers are other processes: count the IDs
    std::unordered_set<std::uint64_t> keys;
    for (const auto* set : {&train_set, &test_set})
      for (const auto& x : *set)
        for (std::size_t f = 0; f < x.fields(); ++f)
          for (const auto id : x.field_ids(f)) keys.insert(fl::embedding_key(f, id, Model::embedding::buckets));
    rows = keys.size();
  }
  const double table_bytes = static_cast<double>(rows) * embedding_dim * sizeof(float);
  const auto& t = trainer.traffic();
  std::printf("\nrows in the table: %zu (%.1f MiB of embeddings)\n", rows, table_bytes / (1 << 20));
  std::printf("per worker and step: %.0f distinct rows pulled and pushed, %.1f KiB moved\n", t.distinct_keys_per_step,
              t.bytes_per_step / 1024);
  std::printf("a dense push and pull of the same table would move %.1f MiB per worker and step (%.0fx)\n",
              2 * table_bytes / (1 << 20), 2 * table_bytes / t.bytes_per_step);
  std::printf("RESULT {\"auc\": %.5f, \"log_loss\": %.5f, \"average_precision\": %.5f, \"samples_per_s\": %.0f, "
              "\"seconds\": %.2f, \"rows_per_step\": %.1f, \"bytes_per_step\": %.0f}\n",
              extra("auc"), extra("log_loss"), extra("average_precision"), h.back().samples_per_second, seconds,
              t.distinct_keys_per_step, t.bytes_per_step);
  return 0;
}

template <class Backend, class Codec>
int train_with_codec(const Settings& s, const typename Backend::options& transport, const std::vector<fl::data::CtrExample>& tr,
                     const std::vector<fl::data::CtrExample>& te, bool report) {
  if (s.policy == "sync")
    return train<fl::policy::Compressed<Codec, fl::policy::Synchronous<fl::topology::ParameterServer>>, Backend>(s, transport, tr, te, report);
  if (s.policy == "async")
    return train<fl::policy::Compressed<Codec, fl::policy::Asynchronous<fl::topology::ParameterServer>>, Backend>(s, transport, tr, te, report);
  if (s.policy == "stale")
    return train<fl::policy::Compressed<Codec, fl::policy::BoundedStaleness<2>>, Backend>(s, transport, tr, te, report);
  throw fl::ConfigError("--policy: '" + s.policy + "' is not one of sync, async, stale (bounded staleness 2)");
}

/// The in-process program's transport: nothing to set.
struct InProcessFlags {
  using backend = fl::transport::InProcess;
  static constexpr bool generates = true;  // one process: it may write the data files itself
  explicit InProcessFlags(fl::cli::Flags&) {}
  backend::options options() const { return {}; }
  std::size_t rank() const { return 0; }
  void check(std::size_t, std::size_t) const {}
};

/// `TransportFlags` adds the transport's flags and says this process's rank; only rank 0 reports.
template <class TransportFlags>
int run(int argc, char** argv, const char* program) {
  using Backend = typename TransportFlags::backend;
  fl::cli::Flags flags(program, "Click-through prediction with embedding rows on parameter servers");
  TransportFlags transport_flags(flags);
  Settings s;
  auto& train_path = flags.add<std::filesystem::path>("train", {}, flag_help::train);
  auto& test_path = flags.add<std::filesystem::path>(
      "test", {}, "Criteo-format held-out file (without --train: --test-lines generated lines, in --data)");
  auto& dir = flags.add<std::filesystem::path>("data", "ctr-data", flag_help::data);
  auto& lines = flags.add<std::size_t>("lines", 2'000'000, flag_help::lines);
  auto& test_lines = flags.add<std::size_t>("test-lines", 200'000, "held-out lines to generate without --train");
  auto& epochs = flags.add<std::size_t>("epochs", 1, flag_help::epochs);
  auto& batch = flags.add<std::size_t>("batch", 1024, flag_help::batch);
  auto& workers = flags.add<std::size_t>("workers", 2, flag_help::workers);
  auto& servers = flags.add<std::size_t>("servers", 2, flag_help::servers);
  auto& policy = flags.add<std::string>("policy", "sync", "sync, async or stale (bounded staleness 2)");
  auto& codec = flags.add<std::string>("codec", "fp32", "rows and gradients on the wire: fp32, fp16 or bf16");
  auto& row_lr = flags.add<double>("row-lr", 0.05, "Adagrad learning rate of the embedding rows");
  auto& tower_lr = flags.add<double>("tower-lr", 1e-3, "Adam learning rate of the tower");
  auto& seed = flags.add<std::uint64_t>("seed", 1, flag_help::seed);
  auto& metrics = flags.add<std::filesystem::path>("metrics", {}, flag_help::metrics);
  auto& plot = flags.add<std::filesystem::path>("plot", {}, flag_help::plot);
  auto& stream = flags.add<bool>("stream", false, "stream the training file (larger than memory) instead of loading it");
  auto& shuffle = flags.add<std::size_t>("shuffle-buffer", 0, "with --stream: examples in each worker's shuffle buffer (0: file order)");
  auto& skip_malformed = flags.add<std::uint64_t>(
      "skip-malformed", 0, "skip and count up to this many malformed lines per pass (0: the first one is an error)");
  flags.at_least("epochs", 1).at_least("batch", 1).at_least("workers", 1).at_least("servers", 1);
  if (!flags.parse(argc, argv, std::cout)) return 0;
  s = Settings{train_path, test_path, dir, lines, test_lines, epochs, batch, workers, servers, policy, codec, row_lr,
               tower_lr, seed, metrics, plot, stream, shuffle, skip_malformed};
  const auto transport = transport_flags.options();
  const bool reporter = transport_flags.rank() == 0;
  transport_flags.check(s.workers, s.servers);

  fl::data::CtrGeneratorOptions g;
  g.seed = s.seed;
  const bool generated = s.train.empty();
  if (generated && !TransportFlags::generates)
    throw fl::ConfigError("--train and --test: every rank reads the same files; write them first (flotilla-ctr-generate)");
  if (generated) {
    if (s.lines == 0) throw fl::ConfigError("--lines: 0 training lines to generate (give --train FILE, or --lines N >= 1)");
    s.train = s.data_dir / "train.tsv";
    s.test = s.data_dir / "test.tsv";
    if (reporter) {
      std::filesystem::create_directories(s.data_dir);
      const auto t0 = std::chrono::steady_clock::now();
      g.lines = s.lines;
      fl::data::write_criteo(g, s.train);
      fl::data::write_criteo(g.held_out(s.test_lines), s.test);
      std::printf("generated %zu training and %zu held-out lines in %s (%.1f s)\n", s.lines, s.test_lines,
                  s.data_dir.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  if (s.test.empty()) throw fl::ConfigError("--test: a held-out file is needed with --train");
  const fl::data::ReaderOptions ro = reader_options(s);
  const auto train_set =
      s.stream ? std::vector<fl::data::CtrExample>{} : fl::data::read_ctr_file<fl::data::CriteoFormat>(s.train.string(), ro);
  const auto test_set = fl::data::read_ctr_file<fl::data::CriteoFormat>(s.test.string(), ro);
  if (reporter) {
    std::printf("%zu training and %zu held-out examples; %zu workers, %zu servers, policy %s, codec %s\n", train_set.size(),
                test_set.size(), s.workers, s.servers, s.policy.c_str(), s.codec.c_str());
    std::printf("the tower (its input: %zu fields x %zu values of the embedding rows, then the numeric features):\n%s",
                fl::data::criteo_categorical_fields, embedding_dim, fl::summary<Tower>().to_string().c_str());
    if (generated) {
      const auto best = planted_metrics(g, test_set);
      std::printf("the planted model on the held-out lines: AUC %.4f, log loss %.4f\n", best.auc, best.log_loss);
    }
  }
  if (s.codec == "fp32") return train_with_codec<Backend, fl::codec::Fp32>(s, transport, train_set, test_set, reporter);
  if (s.codec == "fp16") return train_with_codec<Backend, fl::codec::Fp16>(s, transport, train_set, test_set, reporter);
  if (s.codec == "bf16") return train_with_codec<Backend, fl::codec::Bf16>(s, transport, train_set, test_set, reporter);
  throw fl::ConfigError("--codec: '" + s.codec + "' is not one of fp32, fp16, bf16");
}

}  // namespace example
