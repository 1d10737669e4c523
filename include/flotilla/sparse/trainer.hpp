#pragma once
// sparse::Trainer<CtrModel, Policy, Backend>: trains a click-through model with its embedding rows
// on parameter servers. Ranks [0, W) are workers, [W, W + S) servers. A worker's step:
//
//   1. the batch's distinct row keys (EmbeddingLookup), pulled from the servers that own them;
//   2. pooled embeddings and numeric features -> the dense tower -> logits; binary cross-entropy;
//   3. backward through the tower to its input, then to one coalesced gradient per distinct key,
//      pushed back to the key's server, which applies the row optimizer (synchronous: once every
//      worker's push of the step is in, summed in worker order; asynchronous: as each arrives;
//      bounded staleness: a worker waits at the bound for the slowest);
//   4. the tower's gradients summed by the ring allreduce among the workers, and the tower's
//      optimizer applied on every worker alike (the hybrid that large recommendation systems use:
//      sparse rows on servers, the small dense part replicated).
//
// Only the rows a step touches move: distinct keys x row bytes each way, plus 8 bytes per key,
// where a dense push of the same table would move the whole table twice per worker and step.
//
// As in flotilla::Trainer, every worker draws the same permutation of the data from the seed and
// the epoch and takes its contiguous part of each global batch, and the loss is scaled by
// 1 / (global batch): synchronous training on W workers of batch B sees exactly the samples, and
// computes the gradients, of one worker with batch W x B.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/message_tags.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/exchange/policy_exchange.hpp"
#include "flotilla/loss/binary_cross_entropy.hpp"
#include "flotilla/nn/embedding.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/sparse/ctr_model.hpp"
#include "flotilla/sparse/row_client.hpp"
#include "flotilla/sparse/row_server.hpp"
#include "flotilla/train/binary_metrics.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/in_process.hpp"

namespace flotilla::sparse {

struct TrainerOptions {
  std::size_t workers = 1;
  std::size_t servers = 1;
  /// Examples per worker and step (the global batch is workers x batch_size).
  std::size_t batch_size = 256;
  std::uint64_t seed = 1;
  /// Bound on each server's share of a table, in bytes (0: none).
  std::size_t max_bytes_per_shard = 0;
  /// One line per epoch on standard output (worker 0).
  bool verbose = false;
  /// Metrics file, one record per epoch (.jsonl or .csv); empty: none.
  std::filesystem::path metrics_file;
};

/// What one step moved, averaged over a worker's steps: the figures the design is about.
struct SparseTraffic {
  double distinct_keys_per_step = 0;  ///< rows pulled and pushed per worker and step (all tables)
  double bytes_per_step = 0;          ///< payload bytes sent and received per worker and step
};

namespace detail {

inline constexpr Tag trainer_tag(Tag k) { return flotilla::detail::reserved_tag("sparse_trainer") + k; }

/// A deterministic permutation of [0, n) for (seed, epoch): the same on every worker.
inline std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Generator g(flotilla::detail::mix(seed, 0x5eed0000ULL + epoch));
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[g.below(i)]);
  return order;
}

}  // namespace detail

template <class Model, class Policy, class Backend = transport::InProcess>
class Trainer {
  static_assert(ParameterServerPolicy<Policy>,
                "sparse::Trainer: embedding rows live on parameter servers: the policy must be "
                "policy::Synchronous<topology::ParameterServer>, policy::Asynchronous or policy::BoundedStaleness<K>");
  static_assert(TransportBackend<Backend>, "sparse::Trainer: the third argument must be a transport backend");

 public:
  using model_type = Model;
  using network = typename Model::network;
  using codec_type = policy_codec_t<Policy, float>;
  using Loss = BinaryCrossEntropyWithLogits;
  static constexpr std::size_t fields = Model::fields, dim = Model::dim, numeric = Model::numeric;
  static constexpr std::size_t embedding_table = 0, wide_table = 1;

  explicit Trainer(Model model = {}, TrainerOptions options = {}, typename Backend::options transport = {})
      : model_(std::move(model)), options_(std::move(options)), transport_(std::move(transport)) {
    if (options_.workers == 0) throw ConfigError("sparse::Trainer: workers must be at least 1");
    if (options_.servers == 0) throw ConfigError("sparse::Trainer: servers must be at least 1");
    if (options_.batch_size == 0) throw ConfigError("sparse::Trainer: batch_size must be at least 1");
    tower_params_.assign(network::parameter_count, 0.0f);
    network{}.initialize(std::span<float>(tower_params_), options_.seed);
  }

  const TrainerOptions& options() const noexcept { return options_; }

  /// Trains for `epochs` over `train`, evaluating on `test` after each epoch (when not empty).
  /// Every process of a job passes the same data (a process reads only its workers' parts).
  History fit(std::span<const data::CtrExample> train, std::span<const data::CtrExample> test, std::size_t epochs) {
    check_examples(train, "training");
    check_examples(test, "test");
    const std::size_t W = options_.workers, S = options_.servers;
    const std::size_t global_batch = W * options_.batch_size;
    if (train.size() < global_batch)
      throw ConfigError("sparse::Trainer: " + std::to_string(train.size()) + " training examples are fewer than one global batch (" +
                        std::to_string(W) + " workers x " + std::to_string(options_.batch_size) + ")");
    History history;
    std::mutex mutex;
    const std::vector<float> initial = tower_params_;
    Backend::run(transport_, W + S, [&](typename Backend::endpoint& e) {
      if (e.rank() >= W) {
        serve(e);
      } else {
        auto h = work(e, initial, train, test, epochs);
        if (e.rank() == 0) {
          std::lock_guard lock(mutex);
          history = std::move(h);
        }
      }
    });
    return history;
  }

  /// The tower's parameters (worker 0's, after fit; every worker holds the same).
  std::span<const float> tower_parameters() const noexcept { return tower_params_; }

  /// The rows of table `table` held by the servers this process hosted, by key: for comparing runs.
  std::map<std::uint64_t, std::vector<float>> rows(std::size_t table = embedding_table) const {
    std::lock_guard lock(rows_mutex_);
    auto it = final_rows_.find(table);
    return it == final_rows_.end() ? std::map<std::uint64_t, std::vector<float>>{} : it->second;
  }

  /// Traffic per worker step in the last fit (worker 0's).
  const SparseTraffic& traffic() const noexcept { return traffic_; }

  /// Predicted click probabilities for `examples` with the model as it was left by fit. Needs the
  /// rows, so it is computed within the last fit's evaluation: the probabilities of the last
  /// epoch's test set (worker 0's gathered copy), in the test set's order.
  const std::vector<float>& last_test_probabilities() const noexcept { return last_probabilities_; }

 private:
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

  std::vector<TableSpec> tables() const {
    std::vector<TableSpec> t;
    TableSpec emb;
    emb.name = "embeddings";
    emb.dim = dim;
    emb.init_scale = row_optimizer_needs_zero_rows<typename Model::row_optimizer_type> ? 0.0f : model_.init_scale;
    emb.seed = options_.seed;
    emb.id = 0;
    emb.max_bytes_per_shard = options_.max_bytes_per_shard;
    t.push_back(emb);
    if constexpr (Model::has_wide) {
      TableSpec w;
      w.name = "wide weights";
      w.dim = 1;
      w.init_scale = 0;
      w.seed = options_.seed;
      w.id = 1;
      w.max_bytes_per_shard = options_.max_bytes_per_shard;
      t.push_back(w);
    }
    return t;
  }

  template <class E>
  void serve(E& e) {
    RowServer<codec_type> server(e.rank() - options_.workers, options_.servers);
    const auto specs = tables();
    server.add_table(specs[0], model_.row_optimizer);
    if constexpr (Model::has_wide) server.add_table(specs[1], model_.wide_optimizer);
    server.serve(e, options_.workers, Policy::aggregate, Policy::staleness_bound);
    std::lock_guard lock(rows_mutex_);
    for (std::size_t t = 0; t < specs.size(); ++t)
      server.table(t).for_each_row([&](std::uint64_t key, std::span<const float> row, std::span<const float>, std::uint64_t) {
        final_rows_[t][key] = std::vector<float>(row.begin(), row.end());
      });
  }

  struct Batch {
    EmbeddingLookup lookup, wide_lookup;
    std::vector<float> rows, row_grads, wide_rows, wide_grads;
    Matrix<float> x, logits, dlogits, dx, wide;
    std::vector<float> labels;
  };

  /// Forward over `examples`: the logits, pulling the rows at `step`. Returns the lookups' sizes.
  template <class E>
  void forward(E& e, RowClient<codec_type>& client, std::uint64_t step, std::span<const data::CtrExample> examples, Batch& b,
               network& net, std::span<const float> params, const RunInfo& info) {
    const auto n = static_cast<Eigen::Index>(examples.size());
    b.lookup.build(examples, 0, fields, Model::embedding::buckets);
    b.rows.resize(b.lookup.keys.size() * dim);
    client.pull(e, embedding_table, step, std::span<const std::uint64_t>(b.lookup.keys), std::span<float>(b.rows));
    b.x.resize(static_cast<Eigen::Index>(Model::tower_inputs), n);
    embedding_forward<float>(b.lookup, std::span<const float>(b.rows), dim, Model::embedding::pooling,
                             MatrixView<float>(b.x.data(), b.x.rows(), b.x.cols()), 0);
    for (Eigen::Index i = 0; i < n; ++i)
      for (std::size_t j = 0; j < numeric; ++j)
        b.x(static_cast<Eigen::Index>(fields * dim + j), i) = examples[static_cast<std::size_t>(i)].dense[j];
    auto out = net.forward(ConstMatrixView<float>(b.x.data(), b.x.rows(), n), params, info);
    b.logits = out;
    if constexpr (Model::has_wide) {
      b.wide_lookup.build(examples, 0, fields, Model::wide::buckets);
      b.wide_rows.resize(b.wide_lookup.keys.size());
      client.pull(e, wide_table, step, std::span<const std::uint64_t>(b.wide_lookup.keys), std::span<float>(b.wide_rows));
      // One pooled weight per field, summed into the logit.
      b.wide.resize(static_cast<Eigen::Index>(fields), n);
      embedding_forward<float>(b.wide_lookup, std::span<const float>(b.wide_rows), 1, Pooling::sum,
                               MatrixView<float>(b.wide.data(), b.wide.rows(), n), 0);
      b.logits += b.wide.colwise().sum();
    }
  }

  template <class E>
  History work(E& e, const std::vector<float>& initial, std::span<const data::CtrExample> train, std::span<const data::CtrExample> test, std::size_t epochs) {
    const std::size_t W = options_.workers, rank = e.rank(), B = options_.batch_size, global_batch = W * B;
    std::vector<std::size_t> members(W);
    std::iota(members.begin(), members.end(), std::size_t{0});
    transport::Group<E> workers(e, members, detail::trainer_tag(0));
    std::vector<std::size_t> dims{dim};
    if constexpr (Model::has_wide) dims.push_back(1);
    RowClient<codec_type> client(dims, W, options_.servers);
    network net;
    std::vector<float> params = initial;  // each worker's replica, identical on all
    std::vector<float> grads(network::parameter_count);
    typename Model::tower_optimizer_type::template state<float> opt_state(network::parameter_count);
    std::span<const TensorInfo> tensors(network::tensors);
    Batch b;
    std::vector<const data::CtrExample*> picked;
    std::vector<data::CtrExample> batch_examples;
    std::optional<MetricsLog> log;
    if (rank == 0 && !options_.metrics_file.empty()) log.emplace(options_.metrics_file);
    History history;
    const std::size_t steps_per_epoch = train.size() / global_batch;
    std::uint64_t step = 0;
    double keys_total = 0;
    const TrafficCounters start_traffic = e.counters();
    const float scale = 1.0f / static_cast<float>(global_batch);
    for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto order = detail::epoch_order(train.size(), options_.seed, epoch);
      double loss_sum = 0;
      for (std::size_t s = 0; s < steps_per_epoch; ++s, ++step) {
        batch_examples.clear();
        for (std::size_t i = 0; i < B; ++i) batch_examples.push_back(train[order[s * global_batch + rank * B + i]]);
        std::span<const data::CtrExample> ex(batch_examples);
        forward(e, client, step, ex, b, net, std::span<const float>(params), RunInfo{Mode::train, {}, options_.seed, epoch});
        b.labels.resize(B);
        for (std::size_t i = 0; i < B; ++i) b.labels[i] = ex[i].label;
        const Targets<float> targets{{}, ConstMatrixView<float>(b.labels.data(), 1, static_cast<Eigen::Index>(B))};
        b.dlogits.resize(1, static_cast<Eigen::Index>(B));
        loss_sum += static_cast<double>(Loss::value_and_gradient(
            ConstMatrixView<float>(b.logits.data(), 1, static_cast<Eigen::Index>(B)), targets,
            MatrixView<float>(b.dlogits.data(), 1, static_cast<Eigen::Index>(B)), scale));
        std::fill(grads.begin(), grads.end(), 0.0f);
        b.dx.resize(static_cast<Eigen::Index>(Model::tower_inputs), static_cast<Eigen::Index>(B));
        MatrixView<float> dx(b.dx.data(), b.dx.rows(), b.dx.cols());
        net.backward(ConstMatrixView<float>(b.dlogits.data(), 1, static_cast<Eigen::Index>(B)), std::span<const float>(params),
                     std::span<float>(grads), NoHook{}, &dx);
        b.row_grads.assign(b.lookup.keys.size() * dim, 0.0f);
        embedding_backward<float>(b.lookup, ConstMatrixView<float>(b.dx.data(), b.dx.rows(), b.dx.cols()), 0, dim,
                                  Model::embedding::pooling, std::span<float>(b.row_grads));
        client.push(e, embedding_table, step, std::span<const std::uint64_t>(b.lookup.keys), std::span<const float>(b.row_grads));
        keys_total += static_cast<double>(b.lookup.keys.size());
        if constexpr (Model::has_wide) {
          b.wide_grads.assign(b.wide_lookup.keys.size(), 0.0f);
          // Every field's pooled weight receives the logit's gradient.
          b.wide = b.dlogits.replicate(static_cast<Eigen::Index>(fields), 1);
          embedding_backward<float>(b.wide_lookup, ConstMatrixView<float>(b.wide.data(), b.wide.rows(), b.wide.cols()), 0, 1,
                                    Pooling::sum, std::span<float>(b.wide_grads));
          client.push(e, wide_table, step, std::span<const std::uint64_t>(b.wide_lookup.keys), std::span<const float>(b.wide_grads));
          keys_total += static_cast<double>(b.wide_lookup.keys.size());
        }
        if (W > 1) {
          collective::RingOptions ro;
          ro.tag = detail::trainer_tag(1);
          collective::ring_allreduce<codec::Fp32>(workers, std::span<float>(grads), ro);
        }
        model_.tower_optimizer.update(std::span<float>(params), std::span<const float>(grads), opt_state, tensors,
                                      StepInfo{step + 1, model_.tower_optimizer.learning_rate});
      }
      // The epoch's training loss, over all workers.
      std::array<double, 2> sums{loss_sum, static_cast<double>(steps_per_epoch * B)};
      if (W > 1) collective::allreduce_sum(workers, std::span<double>(sums), detail::trainer_tag(2));
      const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EpochRecord r;
      r.epoch = epoch + 1;
      r.step = step;
      r.train_loss = sums[0] / sums[1];
      r.train_accuracy = std::numeric_limits<double>::quiet_NaN();
      r.samples_per_second = sums[1] / train_seconds;
      r.learning_rate = model_.tower_optimizer.learning_rate;
      if (!test.empty()) {
        const BinaryMetrics m = evaluate_share(e, workers, client, step, test, b, net, std::span<const float>(params));
        r.val_loss = m.log_loss;
        r.extra = {{"auc", m.auc}, {"log_loss", m.log_loss}, {"average_precision", m.average_precision},
                   {"mean_predicted", m.mean_predicted}, {"observed_rate", m.observed_rate}};
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto moved = e.counters() - start_traffic;
      traffic_.distinct_keys_per_step = keys_total / static_cast<double>(step);
      traffic_.bytes_per_step =
          static_cast<double>(moved.payload_bytes_sent + moved.payload_bytes_received) / static_cast<double>(step);
      r.extra.push_back({"rows_per_step", traffic_.distinct_keys_per_step});
      r.extra.push_back({"bytes_per_step", traffic_.bytes_per_step});
      if (rank == 0) {
        if (log) log->write(r);
        if (options_.verbose) {
          std::printf("epoch %zu/%zu: %s\n", epoch + 1, epochs, flotilla::detail::epoch_summary(r).c_str());
          std::fflush(stdout);
        }
      }
      history.push_back(std::move(r));
    }
    client.done(e);
    if (rank == 0) tower_params_ = params;  // the other workers' replicas are the same
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
      forward(e, client, step, test.subspan(i, n), b, net, params, RunInfo{Mode::eval, {}, options_.seed, 0});
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
        if (we > wb)
          workers.recv(w, detail::trainer_tag(3),
                       std::as_writable_bytes(std::span<float>(all).subspan(wb, we - wb)));
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
  std::vector<float> tower_params_;
  mutable std::mutex rows_mutex_;
  std::map<std::size_t, std::map<std::uint64_t, std::vector<float>>> final_rows_;
  SparseTraffic traffic_;
  std::vector<float> last_probabilities_;
};

}  // namespace flotilla::sparse
