// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_TRAINER_HPP_INCLUDED
#define FLOTILLA_SPARSE_TRAINER_HPP_INCLUDED
// sparse::Trainer<CtrModel, Policy, Backend>: trains a click-through model with its embedding rows
// on parameter servers. Ranks [0, W) are workers, [W, W + S) servers. A worker's step:
//
//   1. the batch's distinct row keys (EmbeddingLookup), pulled from the servers that own them;
//   2. pooled embeddings and numeric features -> the dense tower -> logits; binary cross-entropy;
//   3. backward through the tower to its input, then to one coalesced gradient per distinct key,
//      pushed back to the key's server, which applies the row optimizer (synchronous: once every
//      worker's push of the step is in, summed in worker order; asynchronous: as each arrives;
//      bounded staleness: a worker waits at the bound for the slowest);
//   4. the tower's gradients, either summed by the ring allreduce among the workers and applied by
//      the tower's optimizer on every worker alike (TowerUpdates::ring, the default: the hybrid of
//      large recommendation systems, sparse rows on servers and the small dense part replicated),
//      or pushed to the servers like rows (TowerUpdates::servers: the tower cut into rows, updated
//      there, and under an asynchronous policy asynchronous too, as in TensorFlow's parameter
//      servers).
//
// Only the rows a step touches move: distinct keys x row bytes each way, plus 8 bytes per key,
// where a dense push of the same table would move the whole table twice per worker and step.
//
// As in flotilla::Trainer, the loss is scaled by 1 / (global batch), and with examples in memory
// every worker takes its contiguous part of each global batch of one permutation drawn from the
// seed and the epoch: synchronous training on W workers of batch B equals one worker with batch
// W x B, to float rounding. Training from a file streams it (sparse/detail/data_source.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/log.hpp"
#include "flotilla/core/message_tags.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/criteo.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/data/ctr_reader.hpp"
#include "flotilla/exchange/policy_exchange.hpp"
#include "flotilla/loss/binary_cross_entropy.hpp"
#include "flotilla/nn/embedding.hpp"
#include "flotilla/optim/adam.hpp"
#include "flotilla/optim/row_lazy_adam.hpp"
#include "flotilla/optim/row_sgd.hpp"
#include "flotilla/optim/sgd.hpp"
#include "flotilla/sparse/detail/checkpoint_set.hpp"
#include "flotilla/sparse/ctr_model.hpp"
#include "flotilla/sparse/detail/data_source.hpp"
#include "flotilla/sparse/row_client.hpp"
#include "flotilla/sparse/row_server.hpp"
#include "flotilla/train/binary_metrics.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/in_process.hpp"

namespace flotilla::sparse {

/// Where the tower's gradients go.
enum class TowerUpdates {
  ring,     ///< summed by the ring allreduce among the workers; every worker applies the optimizer
  servers,  ///< pushed to the servers as rows of a table of its own, updated there like the rows
};

struct TrainerOptions {
  std::size_t workers = 1;
  std::size_t servers = 1;
  /// Examples per worker and step (the global batch is workers x batch_size).
  std::size_t batch_size = 256;
  std::uint64_t seed = 1;
  TowerUpdates tower = TowerUpdates::ring;
  /// With TowerUpdates::servers: values per row of the tower's table.
  std::size_t tower_row = 4096;
  /// Bound on each server's share of a table, in bytes (0: none).
  std::size_t max_bytes_per_shard = 0;
  /// Checkpoint sets: directory, every_steps / every_seconds, keep, at_exit, resume
  /// (sparse/detail/checkpoint_set.hpp says what a set holds).
  CheckpointPolicy checkpoints;
  /// One line per epoch on standard output (worker 0).
  bool verbose = false;
  /// Metrics file, one record per epoch (.jsonl or .csv); empty: none.
  std::filesystem::path metrics_file;
  /// An SVG plot of the losses and the validation AUC per epoch, rewritten after each; empty: none.
  std::filesystem::path plot_file;
  std::string plot_title = "flotilla click-through training";
};

/// What one step moved, averaged over worker 0's steps: the figures the design is about.
struct SparseTraffic {
  double distinct_keys_per_step = 0;  ///< rows pulled and pushed per step (every table)
  double bytes_per_step = 0;          ///< payload bytes sent and received per step
};

namespace detail {

inline constexpr Tag trainer_tag(Tag k) { return flotilla::detail::reserved_tag("sparse_trainer") + k; }

/// The row optimizer that updates the tower on the servers as the tower's own optimizer would.
template <class O>
auto tower_row_optimizer(const O& o) {
  if constexpr (std::is_same_v<O, optim::Adam>) {
    if (o.weight_decay != 0)
      throw ConfigError("sparse::Trainer: TowerUpdates::servers keeps the tower's updates on the servers, where weight "
                        "decay is not applied; use weight_decay = 0 or TowerUpdates::ring");
    return optim::RowLazyAdam{o.learning_rate, o.beta1, o.beta2, o.epsilon};
  } else if constexpr (std::is_same_v<O, optim::SGD>) {
    if (o.weight_decay != 0)
      throw ConfigError("sparse::Trainer: TowerUpdates::servers does not apply weight decay; use weight_decay = 0 or "
                        "TowerUpdates::ring");
    return optim::RowSGD{o.learning_rate};
  } else {
    static_assert(std::is_same_v<O, optim::Adam> || std::is_same_v<O, optim::SGD>,
                  "sparse::Trainer: TowerUpdates::servers updates the tower with optim::Adam or optim::SGD");
    return optim::RowSGD{};
  }
}

template <class O>
concept HasAdamFields = requires(const O& o) {
  o.beta1;
  o.beta2;
  o.epsilon;
};

}  // namespace detail

template <class Model, class Policy, class Backend = transport::InProcess>
class Trainer {
  static_assert(ParameterServerPolicy<Policy>,
                "sparse::Trainer: embedding rows live on parameter servers: the policy must be "
                "policy::Synchronous<topology::ParameterServer>, policy::Asynchronous<topology::ParameterServer> "
                "or policy::BoundedStaleness<K>");
  static_assert(TransportBackend<Backend>, "sparse::Trainer: the third argument must be a transport backend");

 public:
  using model_type = Model;
  using network = typename Model::network;
  using codec_type = policy_codec_t<Policy, float>;
  using Loss = BinaryCrossEntropyWithLogits;
  using tower_state = typename Model::tower_optimizer_type::template state<float>;
  static constexpr std::size_t fields = Model::fields, dim = Model::dim, numeric = Model::numeric;
  static constexpr std::size_t embedding_table = 0, wide_table = 1, tower_table = Model::has_wide ? 2 : 1;

  explicit Trainer(Model model = {}, TrainerOptions options = {}, typename Backend::options transport = {})
      : model_(std::move(model)),
        options_(std::move(options)),
        transport_(std::move(transport)),
        tower_state_(network::parameter_count) {
    if (options_.workers == 0) throw ConfigError("sparse::Trainer: workers must be at least 1");
    if (options_.servers == 0) throw ConfigError("sparse::Trainer: servers must be at least 1");
    if (options_.batch_size == 0) throw ConfigError("sparse::Trainer: batch_size must be at least 1");
    if (options_.tower_row == 0) throw ConfigError("sparse::Trainer: tower_row must be at least 1");
    options_.checkpoints.validate();
    if (options_.tower == TowerUpdates::servers) (void)detail::tower_row_optimizer(model_.tower_optimizer);
    initial_tower_.assign(network::parameter_count, 0.0f);
    network{}.initialize(std::span<float>(initial_tower_), options_.seed);
    tower_ = initial_tower_;
  }

  const TrainerOptions& options() const noexcept { return options_; }

  /// Trains `epochs` epochs on `train` (in memory), evaluating on `test` after each (when not
  /// empty). Every process of a job passes the same data. A second call goes on where the first
  /// stopped (the rows stay on the servers this trainer hosts). With checkpoints.resume and a
  /// complete set in checkpoints.directory, the run starts from it and `epochs` is the length of
  /// the whole run: a restarted program passes the same arguments and trains what is left.
  History fit(std::span<const data::CtrExample> train, std::span<const data::CtrExample> test, std::size_t epochs) {
    check_examples(train, "training");
    if (train.size() < options_.workers * options_.batch_size)
      throw ConfigError("sparse::Trainer: " + std::to_string(train.size()) + " training examples are fewer than one global batch (" +
                        std::to_string(options_.workers) + " workers x " + std::to_string(options_.batch_size) + ")");
    return run(test, epochs, [&](std::size_t worker) {
      return detail::MemorySource(train, worker, options_.workers, options_.batch_size, options_.seed);
    });
  }

  /// The same, streaming the training file at `path` (plain or gzip; Format data::CriteoFormat or
  /// data::LibsvmFormat): each worker reads its shard of the lines (reader.worker and
  /// reader.workers are set by the trainer), through reader.shuffle_buffer when given.
  template <class Format = data::CriteoFormat>
  History fit_file(const std::string& path, data::ReaderOptions reader, std::span<const data::CtrExample> test,
                   std::size_t epochs) {
    return run(test, epochs, [&](std::size_t worker) {
      return detail::FileSource<Format>(path, reader, worker, options_.workers, options_.batch_size);
    });
  }

  /// The tower's parameters (worker 0's after fit; every worker holds the same).
  std::span<const float> tower_parameters() const noexcept { return tower_; }
  /// Updates applied so far (by worker 0), and epochs completed.
  std::uint64_t steps() const noexcept { return steps_; }
  std::uint64_t epoch() const noexcept { return epoch_; }

  /// The rows of table `table` held by the servers this process hosts, by key: for comparing runs.
  std::map<std::uint64_t, std::vector<float>> rows(std::size_t table = embedding_table) const {
    std::lock_guard lock(mutex_);
    std::map<std::uint64_t, std::vector<float>> out;
    for (const auto& [shard, server] : servers_)
      if (table < server->tables())
        server->table(table).for_each_row([&](std::uint64_t key, std::span<const float> row, std::span<const float>, std::uint64_t) {
          out[key] = std::vector<float>(row.begin(), row.end());
        });
    return out;
  }

  /// Rows of table `table` held by the servers this process hosts, and their bytes.
  std::size_t rows_held(std::size_t table = embedding_table) const {
    return sum_over_servers(table, [](const auto& server, std::size_t t) { return server.rows(t); });
  }
  std::size_t bytes_held(std::size_t table = embedding_table) const {
    return sum_over_servers(table, [](const auto& server, std::size_t t) { return server.bytes(t); });
  }

  /// What each server this process hosts has done (keys pulled and pushed: a hot server shows as a
  /// large share), by server index.
  std::map<std::size_t, RowServerCounters> server_counters() const {
    std::lock_guard lock(mutex_);
    std::map<std::size_t, RowServerCounters> out;
    for (const auto& [shard, server] : servers_) out[shard] = server->counters();
    return out;
  }

  /// Traffic per step in the last fit (worker 0's).
  const SparseTraffic& traffic() const noexcept { return traffic_; }

  /// Predicted click probabilities of the last epoch's test set, in its order (worker 0's process).
  const std::vector<float>& last_test_probabilities() const noexcept { return last_probabilities_; }

 private:
  struct Position {
    std::uint64_t step = 0, epoch = 0, batch = 0;  // updates done; epoch and batch where the next one is
  };

  template <class F>
  std::size_t sum_over_servers(std::size_t table, F&& of) const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [shard, server] : servers_)
      if (table < server->tables()) n += of(*server, table);
    return n;
  }

  static void check_examples(std::span<const data::CtrExample> examples, const char* what) {
    for (std::size_t i = 0; i < examples.size(); ++i) {
      const auto& x = examples[i];
      if (x.fields() != fields || x.dense.size() != numeric)
        throw ShapeError(std::string("sparse::Trainer: ") + what + " example " + std::to_string(i) + " (line " +
                         std::to_string(x.line) + ") has " + std::to_string(x.fields()) + " categorical fields and " +
                         std::to_string(x.dense.size()) + " numeric features; the model takes " + std::to_string(fields) +
                         " and " + std::to_string(numeric));
    }
  }

  static constexpr std::size_t tower_rows(std::size_t row) { return (network::parameter_count + row - 1) / row; }

  std::vector<TableSpec> tables() const {
    std::vector<TableSpec> t;
    auto spec = [&](const char* name, std::size_t d, float scale, std::uint32_t id) {
      TableSpec s;
      s.name = name;
      s.dim = d;
      s.init_scale = scale;
      s.seed = options_.seed;
      s.id = id;
      s.max_bytes_per_shard = options_.max_bytes_per_shard;
      return s;
    };
    t.push_back(spec("embeddings", dim,
                     row_optimizer_needs_zero_rows<typename Model::row_optimizer_type> ? 0.0f : model_.init_scale,
                     embedding_table));
    if constexpr (Model::has_wide) t.push_back(spec("wide weights", 1, 0.0f, wide_table));
    // The tower's rows hold its change from the initial parameters, which every worker computes
    // from the seed: they start at zero.
    if (options_.tower == TowerUpdates::servers) t.push_back(spec("tower", options_.tower_row, 0.0f, tower_table));
    return t;
  }

  /// The job: every rank of it this process hosts.
  template <class MakeSource>
  History run(std::span<const data::CtrExample> test, std::size_t epochs, const MakeSource& make_source) {
    check_examples(test, "test");
    const std::size_t W = options_.workers, S = options_.servers;
    const auto& cp = options_.checkpoints;
    Position start{steps_, epoch_, batch_};
    std::uint64_t end_epoch = epoch_ + epochs;
    std::optional<detail::FoundSet> resume;
    if (cp.enabled() && cp.resume) {
      resume = detail::newest_complete_set(cp.directory);
      if (resume) {
        start = load_worker_file(resume->worker);
        end_epoch = epochs;
        log_message(LogLevel::info, "checkpoint",
                    "resuming from step " + std::to_string(start.step) + " (epoch " + std::to_string(start.epoch + 1) +
                        ", batch " + std::to_string(start.batch) + ") in " + resume->directory.string());
      } else {
        log_message(LogLevel::info, "checkpoint",
                    "no complete checkpoint set in " + cp.directory.string() + "; starting from the beginning");
      }
    }
    History history;
    const std::vector<float> tower = tower_;
    const tower_state state = tower_state_;
    Backend::run(transport_, W + S, [&](typename Backend::endpoint& e) {
      if (e.rank() >= W) {
        serve(e, resume ? std::optional<std::filesystem::path>(resume->directory) : std::nullopt);
      } else {
        auto source = make_source(e.rank());
        auto h = work(e, source, test, start, end_epoch, tower, state);
        if (e.rank() == 0) history = std::move(h);
      }
    });
    return history;
  }

  RowServer<codec_type>& server_for(std::size_t shard) {
    std::lock_guard lock(mutex_);
    auto& s = servers_[shard];
    if (!s) {
      s = std::make_unique<RowServer<codec_type>>(shard, options_.servers);
      const auto specs = tables();
      s->add_table(specs[embedding_table], model_.row_optimizer);
      if constexpr (Model::has_wide) s->add_table(specs[wide_table], model_.wide_optimizer);
      if (options_.tower == TowerUpdates::servers)
        s->add_table(specs[tower_table], detail::tower_row_optimizer(model_.tower_optimizer));
    }
    return *s;
  }

  template <class E>
  void serve(E& e, const std::optional<std::filesystem::path>& resume) {
    auto& server = server_for(e.rank() - options_.workers);
    if (resume) server.restore(resume->string());
    server.serve(e, options_.workers, Policy::aggregate, Policy::staleness_bound);
  }

  // ---- worker 0's checkpoint file ------------------------------------------------------------

  std::string fingerprint() const {
    return "ctr fields=" + std::to_string(fields) + " dim=" + std::to_string(dim) + " numeric=" + std::to_string(numeric) +
           " wide=" + std::to_string(Model::has_wide) + " tower=" + std::to_string(network::parameter_count) +
           " tower_updates=" + (options_.tower == TowerUpdates::ring ? "ring" : "servers") +
           " tower_row=" + std::to_string(options_.tower_row);
  }

  void write_worker_file(const std::filesystem::path& set, const Position& at, std::span<const float> tower,
                         tower_state& state) const {
    checkpoint::Writer w;
    w.add_string("model", fingerprint());
    w.add_u64("servers", options_.servers);
    w.add_u64("seed", options_.seed);
    w.add_u64("step", at.step);
    w.add_u64("epoch", at.epoch);
    w.add_u64("batch", at.batch);
    w.add_array<float>("tower", tower);
    auto buffers = state.buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i)
      w.add_array<float>("tower_state_" + std::to_string(i), std::span<const float>(buffers[i]));
    w.commit(detail::worker_file(set));
  }

  Position load_worker_file(const checkpoint::Reader& r) {
    auto mismatch = [&](const std::string& what) {
      return CheckpointError(r.source() + ": " + what + "; it cannot resume this job");
    };
    if (r.string("model") != fingerprint())
      throw mismatch("saved by a different model (" + r.string("model") + ", this one is " + fingerprint() + ")");
    if (r.u64("servers") != options_.servers)
      throw mismatch("saved by a job with " + std::to_string(r.u64("servers")) + " servers, this one has " +
                     std::to_string(options_.servers));
    if (r.u64("seed") != options_.seed)
      throw mismatch("saved with seed " + std::to_string(r.u64("seed")) + ", this job's is " + std::to_string(options_.seed));
    r.array_into<float>("tower", std::span<float>(tower_));
    auto buffers = tower_state_.buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) r.array_into<float>("tower_state_" + std::to_string(i), buffers[i]);
    Position p{r.u64("step"), r.u64("epoch"), r.u64("batch")};
    steps_ = p.step;
    epoch_ = p.epoch;
    batch_ = p.batch;
    return p;
  }

  // ---- one worker ----------------------------------------------------------------------------

  struct Batch {
    EmbeddingLookup lookup, wide_lookup;
    std::vector<float> rows, row_grads, wide_rows, wide_grads;
    Matrix<float> x, logits, dlogits, dx, wide;
    std::vector<float> labels;
  };

  /// Logits of `examples` (pulling their rows as of `step`; without `create`, rows not yet
  /// created are read as they would start, and not created) into b.logits.
  template <class E, class Examples>
  void forward(E& e, RowClient<codec_type>& client, std::uint64_t step, const Examples& examples, Batch& b, network& net,
               std::span<const float> params, const RunInfo& info, bool create = true) {
    const auto n = static_cast<Eigen::Index>(examples.size());
    b.lookup.build(examples, 0, fields, Model::embedding::buckets);
    b.rows.resize(b.lookup.keys.size() * dim);
    client.pull(e, embedding_table, step, std::span<const std::uint64_t>(b.lookup.keys), std::span<float>(b.rows), create);
    b.x.resize(static_cast<Eigen::Index>(Model::tower_inputs), n);
    embedding_forward<float>(b.lookup, std::span<const float>(b.rows), dim, Model::embedding::pooling,
                             MatrixView<float>(b.x.data(), b.x.rows(), b.x.cols()), 0);
    for (Eigen::Index i = 0; i < n; ++i) {
      const data::CtrExample& x = example_at(examples, static_cast<std::size_t>(i));
      for (std::size_t j = 0; j < numeric; ++j) b.x(static_cast<Eigen::Index>(fields * dim + j), i) = x.dense[j];
    }
    b.logits = net.forward(ConstMatrixView<float>(b.x.data(), b.x.rows(), n), params, info);
    if constexpr (Model::has_wide) {
      b.wide_lookup.build(examples, 0, fields, Model::wide::buckets);
      b.wide_rows.resize(b.wide_lookup.keys.size());
      client.pull(e, wide_table, step, std::span<const std::uint64_t>(b.wide_lookup.keys), std::span<float>(b.wide_rows),
                  create);
      // One pooled weight per field, summed into the logit.
      b.wide.resize(static_cast<Eigen::Index>(fields), n);
      embedding_forward<float>(b.wide_lookup, std::span<const float>(b.wide_rows), 1, Pooling::sum,
                               MatrixView<float>(b.wide.data(), b.wide.rows(), n), 0);
      b.logits += b.wide.colwise().sum();
    }
  }

  static const data::CtrExample& example_at(std::span<const data::CtrExample> xs, std::size_t i) { return xs[i]; }
  static const data::CtrExample& example_at(std::span<const data::CtrExample* const> xs, std::size_t i) { return *xs[i]; }

  /// The tower's parameters on the servers: the initial ones plus the change the rows hold.
  template <class E>
  void pull_tower(E& e, RowClient<codec_type>& client, std::uint64_t step, Buffer<float>& params,
                  std::vector<float>& rows) {
    const std::size_t R = tower_rows(options_.tower_row);
    std::vector<std::uint64_t> keys(R);
    std::iota(keys.begin(), keys.end(), std::uint64_t{0});
    rows.resize(R * options_.tower_row);
    client.pull(e, tower_table, step, std::span<const std::uint64_t>(keys), std::span<float>(rows));
    for (std::size_t i = 0; i < params.size(); ++i) params[i] = initial_tower_[i] + rows[i];
  }

  template <class E>
  void push_tower(E& e, RowClient<codec_type>& client, std::uint64_t step, std::span<const float> grads,
                  std::vector<float>& rows) {
    const std::size_t R = tower_rows(options_.tower_row);
    std::vector<std::uint64_t> keys(R);
    std::iota(keys.begin(), keys.end(), std::uint64_t{0});
    rows.assign(R * options_.tower_row, 0.0f);
    std::copy(grads.begin(), grads.end(), rows.begin());
    client.push(e, tower_table, step, std::span<const std::uint64_t>(keys), std::span<const float>(rows));
  }

  template <class E, class Source>
  History work(E& e, Source& source, std::span<const data::CtrExample> test, Position at, std::uint64_t end_epoch,
               const std::vector<float>& initial, const tower_state& initial_state) {
    const std::size_t W = options_.workers, rank = e.rank(), B = options_.batch_size;
    const bool tower_on_servers = options_.tower == TowerUpdates::servers;
    std::vector<std::size_t> members(W);
    std::iota(members.begin(), members.end(), std::size_t{0});
    transport::Group<E> workers(e, members, detail::trainer_tag(0));
    std::vector<std::size_t> dims{dim};
    if constexpr (Model::has_wide) dims.push_back(1);
    if (tower_on_servers) dims.push_back(options_.tower_row);
    RowClient<codec_type> client(dims, W, options_.servers);
    network net;
    // Each worker's replica, the same on all. Cache-aligned, as the optimizer's state is: an
    // element rule's vectorised loop then covers the same elements on every worker and in every
    // run (a misaligned start moves a few into scalar code, which rounds differently).
    Buffer<float> params(initial.begin(), initial.end()), grads(network::parameter_count);
    std::vector<float> tower_rows_buffer;
    tower_state opt_state = initial_state;
    const std::span<const TensorInfo> tensors(network::tensors);
    Batch b;
    std::vector<const data::CtrExample*> batch;
    std::optional<MetricsLog> log;
    const auto& cp = options_.checkpoints;
    if (rank == 0 && !options_.metrics_file.empty())
      log.emplace(options_.metrics_file, MetricsLog::Format::from_extension,
                  at.step > 0 ? MetricsLog::OpenMode::append : MetricsLog::OpenMode::truncate);
    History history;
    const float scale = 1.0f / static_cast<float>(W * B);
    const std::uint64_t first_step = at.step;
    double keys_total = 0;
    TrafficCounters moved{};  // by the training steps alone (not the evaluations)
    auto last_save = std::chrono::steady_clock::now();
    std::vector<std::uint64_t> unsaved;

    // Saves a set at update `p.step`, recording `p` as where a resumed run goes on.
    auto save = [&](const Position& p) {
      if (rank != 0 || !cp.enabled()) return;
      const auto set = detail::set_directory(cp.directory, p.step);
      if (std::filesystem::exists(detail::worker_file(set))) return;  // saved at this step already
      const bool servers_saved = client.checkpoint(e, p.step, set.string());
      if (!servers_saved) {
        log_message(LogLevel::warning, "checkpoint",
                    "the set of step " + std::to_string(p.step) +
                        " is incomplete: a server could not save its rows (it says why)");
        unsaved.push_back(p.step);
        return;
      }
      try {
        if (tower_on_servers) pull_tower(e, client, p.step, params, tower_rows_buffer);
        write_worker_file(set, p, params, opt_state);
        detail::rotate_sets(cp.directory, cp.keep);
      } catch (const CheckpointError& err) {
        log_message(LogLevel::warning, "checkpoint",
                    "the set of step " + std::to_string(p.step) + " is incomplete: " + err.what());
        unsaved.push_back(p.step);
      }
      last_save = std::chrono::steady_clock::now();
    };
    auto due = [&] {
      if (!cp.enabled()) return false;
      if (cp.every_steps > 0 && at.step % cp.every_steps == 0) return true;
      return cp.every_seconds > 0 &&
             std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save).count() >= cp.every_seconds;
    };

    for (; at.epoch < end_epoch; ++at.epoch, at.batch = 0) {
      const auto t0 = std::chrono::steady_clock::now();
      source.begin_epoch(at.epoch);
      source.skip(at.batch);
      double loss_sum = 0, samples = 0;
      const auto known = source.steps_per_epoch();
      const TrafficCounters before = e.counters();
      for (;;) {
        bool full = known ? at.batch < *known && source.next_batch(batch) : source.next_batch(batch);
        if (!known && W > 1) {  // the epoch ends for all at the first step one worker cannot fill
          std::array<double, 1> missing{full ? 0.0 : 1.0};
          collective::allreduce_sum(workers, std::span<double>(missing), detail::trainer_tag(5));
          full = missing[0] == 0;
        }
        if (!full) break;
        const std::span<const data::CtrExample* const> ex(batch);
        if (tower_on_servers) pull_tower(e, client, at.step, params, tower_rows_buffer);
        forward(e, client, at.step, ex, b, net, std::span<const float>(params), RunInfo{Mode::train, {}, options_.seed, at.epoch});
        b.labels.resize(B);
        for (std::size_t i = 0; i < B; ++i) b.labels[i] = ex[i]->label;
        const auto cols = static_cast<Eigen::Index>(B);
        const Targets<float> targets{{}, ConstMatrixView<float>(b.labels.data(), 1, cols)};
        b.dlogits.resize(1, cols);
        loss_sum += static_cast<double>(Loss::value_and_gradient(ConstMatrixView<float>(b.logits.data(), 1, cols), targets,
                                                                 MatrixView<float>(b.dlogits.data(), 1, cols), scale));
        samples += static_cast<double>(B);
        std::fill(grads.begin(), grads.end(), 0.0f);
        b.dx.resize(static_cast<Eigen::Index>(Model::tower_inputs), cols);
        MatrixView<float> dx(b.dx.data(), b.dx.rows(), b.dx.cols());
        net.backward(ConstMatrixView<float>(b.dlogits.data(), 1, cols), std::span<const float>(params), std::span<float>(grads),
                     NoHook{}, &dx);
        b.row_grads.assign(b.lookup.keys.size() * dim, 0.0f);
        embedding_backward<float>(b.lookup, ConstMatrixView<float>(b.dx.data(), b.dx.rows(), b.dx.cols()), 0, dim,
                                  Model::embedding::pooling, std::span<float>(b.row_grads));
        client.push(e, embedding_table, at.step, std::span<const std::uint64_t>(b.lookup.keys), std::span<const float>(b.row_grads));
        keys_total += static_cast<double>(b.lookup.keys.size());
        if constexpr (Model::has_wide) {
          // Every field's pooled weight receives the logit's gradient.
          b.wide = b.dlogits.replicate(static_cast<Eigen::Index>(fields), 1);
          b.wide_grads.assign(b.wide_lookup.keys.size(), 0.0f);
          embedding_backward<float>(b.wide_lookup, ConstMatrixView<float>(b.wide.data(), b.wide.rows(), b.wide.cols()), 0, 1,
                                    Pooling::sum, std::span<float>(b.wide_grads));
          client.push(e, wide_table, at.step, std::span<const std::uint64_t>(b.wide_lookup.keys),
                      std::span<const float>(b.wide_grads));
          keys_total += static_cast<double>(b.wide_lookup.keys.size());
        }
        if (tower_on_servers) {
          push_tower(e, client, at.step, std::span<const float>(grads), tower_rows_buffer);
        } else {
          if (W > 1) {
            collective::RingOptions ro;
            ro.tag = detail::trainer_tag(1);
            collective::ring_allreduce<codec::Fp32>(workers, std::span<float>(grads), ro);
          }
          model_.tower_optimizer.update(std::span<float>(params), std::span<const float>(grads), opt_state, tensors,
                                        StepInfo{at.step + 1, model_.tower_optimizer.learning_rate});
        }
        ++at.step;
        ++at.batch;
        if (due()) save(at);
      }
      moved += e.counters() - before;
      // The epoch's training loss, over all workers.
      std::array<double, 3> sums{loss_sum, samples, static_cast<double>(source.skipped())};
      if (W > 1) collective::allreduce_sum(workers, std::span<double>(sums), detail::trainer_tag(2));
      const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EpochRecord r;
      r.epoch = at.epoch + 1;
      r.step = at.step;
      r.train_loss = sums[1] > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN();
      r.train_accuracy = std::numeric_limits<double>::quiet_NaN();
      r.samples_per_second = sums[1] / train_seconds;
      r.learning_rate = model_.tower_optimizer.learning_rate;
      if (!test.empty()) {
        if (tower_on_servers) pull_tower(e, client, at.step, params, tower_rows_buffer);
        const BinaryMetrics m = evaluate_share(e, workers, client, at.step, test, b, net, std::span<const float>(params));
        r.val_loss = m.log_loss;
        r.extra = {{"auc", m.auc}, {"log_loss", m.log_loss}, {"average_precision", m.average_precision},
                   {"mean_predicted", m.mean_predicted}, {"observed_rate", m.observed_rate}};
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double steps_run = static_cast<double>(std::max<std::uint64_t>(at.step - first_step, 1));
      const SparseTraffic traffic{keys_total / steps_run,
                                  static_cast<double>(moved.payload_bytes_sent + moved.payload_bytes_received) / steps_run};
      r.extra.push_back({"rows_per_step", traffic.distinct_keys_per_step});
      r.extra.push_back({"malformed_lines_skipped", sums[2]});
      r.extra.push_back({"bytes_per_step", traffic.bytes_per_step});
      if (rank == 0) {
        traffic_ = traffic;
        if (log) log->write(r);
        if (!options_.plot_file.empty()) {
          History so_far = history;
          so_far.push_back(r);
          write_svg_plot(options_.plot_file, so_far, options_.plot_title);
        }
        if (options_.verbose) {
          std::printf("epoch %llu/%llu: %s\n", static_cast<unsigned long long>(at.epoch + 1),
                      static_cast<unsigned long long>(end_epoch), flotilla::detail::epoch_summary(r).c_str());
          std::fflush(stdout);
        }
      }
      history.push_back(std::move(r));
      if (at.epoch + 1 < end_epoch && cp.enabled() && cp.every_steps == 0 && cp.every_seconds == 0)
        save(Position{at.step, at.epoch + 1, 0});
    }
    at.batch = 0;
    if (cp.enabled() && cp.at_exit) save(at);
    if (tower_on_servers) pull_tower(e, client, at.step, params, tower_rows_buffer);
    client.done(e);
    if (rank == 0) {
      // Every worker's replica is the same; worker 0's is the trainer's.
      tower_.assign(params.begin(), params.end());
      tower_state_ = opt_state;
      steps_ = at.step;
      epoch_ = at.epoch;
      batch_ = 0;
      if (!unsaved.empty() && cp.fail_at_end_on_save_failure) {
        std::string steps;
        for (const auto s : unsaved) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
        throw UnsavedCheckpointsError("sparse::Trainer: the checkpoint sets of steps " + steps + " in " +
                                          cp.directory.string() + " could not be saved (the log says why)",
                                      unsaved);
      }
    }
    return history;
  }

  /// Each worker predicts its contiguous share of `test`; worker 0 gathers the probabilities in
  /// order and computes the metrics (AUC needs every score), then every worker gets them.
  template <class E, class G>
  BinaryMetrics evaluate_share(E& e, G& workers, RowClient<codec_type>& client, std::uint64_t step,
                               std::span<const data::CtrExample> test, Batch& b, network& net, std::span<const float> params) {
    const std::size_t W = workers.size(), rank = workers.rank();
    auto share = [&](std::size_t w) {
      const std::size_t base = test.size() / W, extra = test.size() % W;
      const std::size_t begin = w * base + std::min(w, extra);
      return std::pair{begin, begin + base + (w < extra ? 1 : 0)};
    };
    const auto [begin, end] = share(rank);
    std::vector<float> probabilities;
    probabilities.reserve(end - begin);
    for (std::size_t i = begin; i < end; i += options_.batch_size) {
      const std::size_t n = std::min(options_.batch_size, end - i);
      forward(e, client, step, test.subspan(i, n), b, net, params, RunInfo{Mode::eval, {}, options_.seed, 0}, /*create=*/false);
      for (std::size_t k = 0; k < n; ++k) {
        const float z = b.logits(0, static_cast<Eigen::Index>(k));
        probabilities.push_back(z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z)));
      }
    }
    std::array<double, 7> out{};
    if (rank == 0) {
      std::vector<float> all(test.size());
      std::copy(probabilities.begin(), probabilities.end(), all.begin());
      for (std::size_t w = 1; w < W; ++w) {
        const auto [wb, we] = share(w);
        if (we > wb) workers.recv(w, detail::trainer_tag(3), std::as_writable_bytes(std::span<float>(all).subspan(wb, we - wb)));
      }
      std::vector<float> labels(test.size());
      for (std::size_t i = 0; i < test.size(); ++i) labels[i] = test[i].label;
      const BinaryMetrics m = binary_metrics(std::span<const float>(all), std::span<const float>(labels));
      out = {m.auc, m.log_loss, m.average_precision, m.mean_predicted, m.observed_rate,
             static_cast<double>(m.count), static_cast<double>(m.positives)};
      last_probabilities_ = std::move(all);
    } else if (end > begin) {
      workers.send(0, detail::trainer_tag(3), std::as_bytes(std::span<const float>(probabilities)));
    }
    if (W > 1) collective::allreduce_sum(workers, std::span<double>(out), detail::trainer_tag(4));
    BinaryMetrics m;
    m.auc = out[0];
    m.log_loss = out[1];
    m.average_precision = out[2];
    m.mean_predicted = out[3];
    m.observed_rate = out[4];
    m.count = static_cast<std::size_t>(out[5]);
    m.positives = static_cast<std::size_t>(out[6]);
    return m;
  }

  Model model_;
  TrainerOptions options_;
  typename Backend::options transport_;
  std::vector<float> initial_tower_, tower_;
  tower_state tower_state_;
  std::uint64_t steps_ = 0, epoch_ = 0, batch_ = 0;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::unique_ptr<RowServer<codec_type>>> servers_;
  SparseTraffic traffic_;
  std::vector<float> last_probabilities_;
};

}  // namespace flotilla::sparse
#endif  // FLOTILLA_SPARSE_TRAINER_HPP_INCLUDED
