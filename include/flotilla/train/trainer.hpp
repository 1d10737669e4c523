#pragma once
// Trainer<Model, Policy, Backend>: trains a Model on one worker or many.
//
//   Trainer<Model>                                                    one worker, this process
//   Trainer<Model, policy::Synchronous<>, transport::InProcess>       N workers as threads (options.workers)
//   Trainer<Model, policy::Synchronous<>, transport::Tcp>             one process per worker (flotilla-launch)
//   Trainer<Model, policy::Asynchronous<topology::ParameterServer>, transport::Mpi>   ... under mpirun
//
// The same network trains everywhere; only the two template arguments change. Every rank of a job
// runs fit(): ranks [0, workers) are workers, the rest (parameter-server topologies) servers.
// Each worker trains on its shard of every global batch (batch_size samples of batch_size x workers),
// and what the workers' gradients become is the policy's business (see concepts/update_policy.hpp).
// Worker 0 reports: progress, metrics, plots, checkpoints; every worker returns the same history.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/codec/error_feedback.hpp"
#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/model.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/policy/synchronous.hpp"
#include "flotilla/topology/parameter_server.hpp"
#include "flotilla/topology/ring.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/checkpoint_saving.hpp"
#include "flotilla/train/confusion.hpp"
#include "flotilla/train/dataset_check.hpp"
#include "flotilla/train/engine.hpp"
#include "flotilla/train/evaluation.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/model_checkpoint.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/train/progress.hpp"
#include "flotilla/train/overlap.hpp"
#include "flotilla/train/ready_runner.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/live_workers.hpp"
#include "flotilla/train/ring_recovery.hpp"
#include "flotilla/train/worker_loss.hpp"
#include "flotilla/transport/group.hpp"
#include "flotilla/transport/in_process.hpp"

namespace flotilla {

/// A worker made artificially slow, to study stragglers: after computing each step's gradients it
/// sleeps (factor - 1) times as long as the computation took.
struct Straggler {
  std::size_t worker = std::numeric_limits<std::size_t>::max();
  double factor = 1.0;
};

/// How a Trainer is set up: optimizer settings, schedule, batch, threads, seed, workers.
template <ModelType M>
struct TrainerOptions {
  typename M::optimizer optimizer{};
  /// Factor on the optimizer's learning rate as a function of the update index (0 first).
  std::function<double(std::uint64_t)> schedule = schedule::Constant{};
  /// Samples per worker per step; a step of W workers consumes batch_size * W samples.
  std::size_t batch_size = 64;
  /// Cores of each worker that share its batch. Results are the same for any value up to float
  /// rounding of the gradient sum (and bit for bit for a fixed value).
  std::size_t threads = 1;
  /// Fixes the initial parameters, the data order and the dropout masks.
  std::uint64_t seed = 1;
  bool shuffle = true;
  /// Batches gathered ahead on a background thread (0: gather on the training thread).
  std::size_t prefetch = 2;
  /// Batch size used by evaluate() and predict(); larger is faster, memory permitting.
  std::size_t eval_batch_size = 1000;
  /// In-process jobs: the number of worker threads. Other backends take the number of workers from
  /// the launched job (its size less the servers); a non-zero value here must then agree with it.
  std::size_t workers = 1;
  /// Parameter-server topologies: the number of server ranks (each holds one shard).
  std::size_t servers = 1;
  /// Layers that can (Dense: StreamsGradients) report parts of their gradient while backward is
  /// still computing the rest, so that a large layer's first buckets go on the wire early. It pays
  /// where the gradients go over sockets and the communication thread has a core to itself (1.12x
  /// on 16 cores); over shared memory it gained nothing, and with no spare core (two single-thread
  /// ranks on two cores) it cost 8% (docs/benchmarks.md), hence off.
  bool stream_gradients = false;
  /// Whether gradient buckets (ring) or shard pushes (parameter servers) go out during backward, on
  /// a thread of the worker's own, or all after it, on the training thread (train/overlap.hpp).
  /// Overlap hides communication where that thread has a core to itself; where every core
  /// computes, it takes turns with backward and costs more than it hides: two single-thread ranks
  /// on 2 cores trained 1.1-1.2x faster without it (docs/benchmarks.md). `automatic` overlaps when
  /// the cores this process may use outnumber the compute threads of the ranks on this host.
  Overlap overlap = Overlap::automatic;
  /// For experiments with slow workers.
  Straggler straggler{};
  /// When a worker dies or stalls (train/worker_loss.hpp): by default asynchronous and
  /// bounded-staleness training go on without it, synchronous training stops with an error naming
  /// it; continue_with_survivors makes synchronous training go on too (transport::Tcp only).
  WorkerLoss on_worker_loss = WorkerLoss::by_policy;
};

template <class M, class Policy = policy::Synchronous<>, class Backend = transport::InProcess>
class Trainer {
  static_assert(ModelType<M>, "Trainer<Model, Policy, Backend>: Model must be flotilla::Model<Net, Loss, Optimizer, T, Device>");
  static_assert(UpdatePolicy<Policy>,
                "Trainer<Model, Policy, Backend>: Policy is not an update policy (see docs/concepts/update_policy.md); "
                "built-in: policy::Synchronous<>, policy::Asynchronous<topology::ParameterServer>, "
                "policy::BoundedStaleness<S>, policy::Accumulate<K, P>, policy::Compressed<Codec, P>");
  static_assert(TransportBackend<Backend>,
                "Trainer<Model, Policy, Backend>: Backend is not a transport backend (see docs/concepts/transport.md); "
                "built-in: transport::InProcess, transport::Tcp, transport::Mpi");

 public:
  using model_type = M;
  using policy_type = Policy;
  using backend_type = Backend;
  using T = typename M::scalar_type;
  using scalar_type = T;
  using network_type = typename M::network;
  using optimizer_type = typename M::optimizer;
  using optimizer_state = typename optimizer_type::template state<T>;
  using codec_type = codec::for_value_t<typename policy_codec<Policy>::type, T>;
  using engine_type = typename detail::engine_for<M>::type;  ///< cuda::Engine for device::Cuda models
  using endpoint_type = typename Backend::endpoint;
  static constexpr std::size_t parameter_count = M::parameter_count;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;
  static constexpr bool parameter_server = ParameterServerPolicy<Policy>;
  static constexpr std::size_t micro_batches = policy_micro_batches<Policy>;
  static_assert(Codec<codec_type, T>, "Trainer: the policy's codec cannot encode the model's scalar type");
  /// Whether the engine forms the parameter-server traffic's codes itself (a GPU: the push's
  /// gradients and the pull's parameters cross to and from the host encoded, never as fp32).
  static constexpr bool engine_encodes = [] {
    if constexpr (requires { engine_type::template encodes_on_device<codec_type>; })
      return parameter_server && engine_type::template encodes_on_device<codec_type>;
    else
      return false;
  }();

  explicit Trainer(TrainerOptions<M> options = {}, Policy policy = {}, typename Backend::options transport = {})
      : options_(std::move(options)), policy_(std::move(policy)), transport_(std::move(transport)) {
    if (options_.batch_size == 0) throw ConfigError("TrainerOptions::batch_size must be > 0");
    if (options_.eval_batch_size == 0) throw ConfigError("TrainerOptions::eval_batch_size must be > 0");
    if (Backend::in_process && options_.workers == 0) throw ConfigError("TrainerOptions::workers must be > 0");
    if (parameter_server && options_.servers == 0) throw ConfigError("TrainerOptions::servers must be > 0");
    if (options_.on_worker_loss == WorkerLoss::continue_with_survivors) check_worker_loss_supported();
    workers_.push_back(std::make_unique<WorkerState>(options_));
  }

  // ---- training ---------------------------------------------------------------------------

  /// Trains for `fit.epochs` epochs over `train`, evaluating on `validation` after each epoch when
  /// given. Every rank of the job calls it. Returns one record per epoch, the same on every worker
  /// (empty on servers), also written to the metrics file when set.
  History fit(const data::Dataset<T>& train, const data::Dataset<T>* validation = nullptr, const FitOptions& fit = {}) {
    check_dataset(train, "fit: training set");
    if (validation) check_dataset(*validation, "fit: validation set");
    const std::size_t servers = parameter_server ? options_.servers : 0;
    const std::size_t ranks = Backend::in_process ? options_.workers + servers : 0;
    const std::size_t epochs = detail::prepare_checkpoint_sets(fit.checkpoints, fit.epochs, "Trainer::fit", [&] {
      resume_from(fit.checkpoints.directory, fit.log);
      return epoch_;
    });
    Shared shared(fit, Backend::in_process, local().step > 0);
    shared.epochs = epochs;
    // Where this call starts; workers count from here on their own, and the position is written
    // back only by the worker that owns it (worker 0 in-process), so no thread reads a member
    // another writes.
    shared.start_epoch = epoch_;
    shared.start_batch = batch_in_epoch_;
    // In-process workers' states are made here, before their threads start: each is a copy of
    // worker 0's, which worker 0's thread starts to change as soon as it runs.
    if (Backend::in_process)
      for (std::size_t w = 1; w < options_.workers; ++w) worker_state(w);
    Backend::run(transport_, ranks, [&](endpoint_type& e) {
      const std::size_t world = e.size();
      if (world <= servers)
        throw ConfigError("Trainer: a job of " + std::to_string(world) + " ranks has no room for workers besides " +
                          std::to_string(servers) + " parameter server(s)");
      const std::size_t workers = world - servers;
      if (!Backend::in_process && options_.workers > 1 && options_.workers != workers)
        throw ConfigError("Trainer: TrainerOptions::workers is " + std::to_string(options_.workers) + " but the job has " +
                          std::to_string(workers) + " workers (" + std::to_string(world) + " ranks, " +
                          std::to_string(servers) + " servers)");
      if (e.rank() < workers) {
        run_worker(e, workers, train, validation, fit, shared);
      } else {
        run_server(e, workers, e.rank() - workers, fit);
      }
    });
    pending_shards_.clear();  // consumed by the servers hosted here
    // Servers record no events: a process of servers alone writes no trace.
    detail::write_fit_trace(shared.timeline, fit.trace_file, Backend::in_process, shared.worker_rank);
    return shared.history;
  }

  // ---- evaluation -------------------------------------------------------------------------

  /// Mean loss, accuracy and confusion matrix over the whole data set, with this process's model
  /// (worker 0's in-process), on all its cores.
  Evaluation evaluate(const data::Dataset<T>& data) {
    check_dataset(data, "evaluate: data set");
    return to_evaluation(local().engine.evaluate(data, 0, data.size()));
  }

  /// The model's outputs ((output size) x samples) for `inputs` ((input size) x samples).
  Matrix<T> predict(ConstMatrixView<T> inputs) {
    if (inputs.rows() != static_cast<Eigen::Index>(M::input_shape::size))
      throw ShapeError("Trainer::predict: inputs have " + std::to_string(inputs.rows()) + " rows, the model expects " +
                       std::to_string(M::input_shape::size));
    return local().engine.predict(inputs);
  }

  // ---- checkpoints ------------------------------------------------------------------------

  /// Writes parameters, optimizer state, step, seed and data position to `path` atomically.
  /// With parameter servers in another process, the optimizer state lives there and is not saved.
  /// A checkpoint directory (FitOptions::checkpoints) keeps what save() leaves out: the servers'
  /// optimizer state and update counts, in shard files each server process writes itself.
  void save(const std::filesystem::path& path) const {
    write_worker_file(path, epoch_, batch_in_epoch_, !parameter_server || !servers_.empty());
  }

  /// Restores what save() wrote, seed included. The checkpoint must come from the same model and
  /// optimizer types; nothing is changed unless the whole checkpoint verifies and matches.
  void load(const std::filesystem::path& path) {
    const checkpoint::Reader r(path);
    check_worker_file(r);
    load_worker_file(r);
    pending_shards_.clear();
  }

  /// What resume_from() did: the step it resumed from (none: no complete set, nothing changed),
  /// the files it read, and every newer file or set it passed over, with the reason.
  using ResumeReport = checkpoint::ResumeReport;

  /// Restores the newest complete checkpoint set in `dir` (see train/checkpoint_dir.hpp): worker
  /// 0's file and, with parameter servers, every server's shard file (a server process takes its
  /// own shard when fit() starts). A set is used only when every file verifies and fits this
  /// trainer (model, optimizer, shard layout); each newer one passed over is reported on `log`
  /// and in the result. FitOptions::checkpoints.resume calls this at the start of fit().
  ResumeReport resume_from(const std::filesystem::path& dir, std::ostream* log = nullptr) {
    const std::size_t servers = parameter_server ? options_.servers : 0;
    std::vector<std::string> parts = {checkpoint::worker_part()};
    // `!=`, not `<`: nvcc warns of a comparison with zero when `servers` is the constant 0.
    for (std::size_t k = 0; k != servers; ++k) parts.push_back(checkpoint::server_part(k, servers));
    auto found = checkpoint::find_resume_point(dir, parts, [&](const std::string& part, const checkpoint::Reader& r) {
      if (part == checkpoint::worker_part()) {
        check_worker_file(r);
      } else {
        const auto at = std::find(parts.begin(), parts.end(), part) - parts.begin();
        check_shard_file(r, static_cast<std::size_t>(at) - 1, servers);
      }
    });
    ResumeReport report = checkpoint::start_report(found, dir, log);
    if (!found.point) return report;
    auto& point = *found.point;
    load_worker_file(point.parts.at(checkpoint::worker_part()));
    pending_shards_.clear();
    for (std::size_t k = 0; k != servers; ++k) pending_shards_.push_back(point.parts.at(checkpoint::server_part(k, servers)));
    checkpoint::finish_report(report, dir, point.step, parts, epoch_, batch_in_epoch_, log);
    return report;
  }

  /// Checkpoint saves that failed (periodic and at exit, worker and server files): each message
  /// names the file and the reason. Training goes on after a failed save; the sets saved before
  /// are kept.
  std::vector<std::string> checkpoint_failures() const { return checkpoint_failures_.list(); }

 private:
  void check_worker_file(const checkpoint::Reader& r) const { detail::check_checkpoint<M>(r); }

  void load_worker_file(const checkpoint::Reader& r) {
    detail::LoadedCheckpoint<M> c = detail::read_checkpoint<M>(r);
    // Verified: now change state. Every worker and server of this process starts from it.
    workers_.resize(1);
    WorkerState& s = *workers_[0];
    std::copy(c.parameters.begin(), c.parameters.end(), s.engine.parameters().begin());
    s.opt = std::move(c.optimizer);
    s.engine.optimizer_state_changed();
    s.step = c.at.step;
    // The seed keys the data order and the dropout masks: the resumed run continues the saved
    // run's sequence, whatever seed this trainer was built with.
    s.engine.set_seed(c.at.seed);
    options_.seed = c.at.seed;
    epoch_ = c.at.epoch;
    batch_in_epoch_ = c.at.batch_in_epoch;
    servers_.clear();
    server_rebuild_ = true;
  }

  void write_worker_file(const std::filesystem::path& path, std::uint64_t epoch, std::uint64_t batch,
                         bool with_optimizer_state) const {
    const WorkerState& s = local();
    const detail::RunPosition at{s.step, epoch, batch, s.engine.seed()};
    if (!with_optimizer_state) {
      detail::write_checkpoint<M>(path, s.engine.parameters(), nullptr, at);
      return;
    }
    const auto buffers = optimizer_buffers_copy();
    const std::vector<std::span<const T>> spans(buffers.begin(), buffers.end());
    detail::write_checkpoint<M>(path, s.engine.parameters(), &spans, at);
  }

  /// A shard file must be shard `index` of `servers` of this model's parameters.
  void check_shard_file(const checkpoint::Reader& r, std::size_t index, std::size_t servers) const {
    check_worker_file(r);
    const auto shards = detail::balanced_shards(parameter_count, servers);
    const std::uint64_t got_index = r.u64("shard_index"), got_count = r.u64("shard_count");
    const std::uint64_t begin = r.u64("shard_begin"), end = r.u64("shard_end");
    if (got_index != index || got_count != servers || begin != shards[index].begin || end != shards[index].end)
      throw CheckpointError(r.source() + ": holds shard " + std::to_string(got_index) + " of " + std::to_string(got_count) +
                            " (parameters " + std::to_string(begin) + ".." + std::to_string(end) + "), this job needs shard " +
                            std::to_string(index) + " of " + std::to_string(servers) + " (parameters " +
                            std::to_string(shards[index].begin) + ".." + std::to_string(shards[index].end) + ")");
    if (r.count("parameters") != end - begin)
      throw CheckpointError(r.source() + ": record 'parameters' has " + std::to_string(r.count("parameters")) +
                            " elements for a shard of " + std::to_string(end - begin));
  }

  /// Writes server `index`'s shard as part of the set of `step`, rotates its older files, and
  /// says whether it worked; a failure is logged and kept (checkpoint_failures()), not thrown:
  /// the server goes on serving and the set of that step stays incomplete.
  template <class S>  // S: Shard, declared below
  bool save_shard(S& shard, std::size_t index, std::size_t servers, std::uint64_t step, const FitOptions& fit) {
    const auto& cp = fit.checkpoints;
    if (!cp.enabled()) return false;
    const std::string part = checkpoint::server_part(index, servers);
    const auto path = checkpoint::set_file(cp.directory, step, part);
    try {
      checkpoint::Writer w;
      detail::add_model_records<M>(w);
      w.add_u64("step", step);
      w.add_u64("updates", shard.updates());
      w.add_u64("shard_index", index);
      w.add_u64("shard_count", servers);
      w.add_u64("shard_begin", shard.shard().begin);
      w.add_u64("shard_end", shard.shard().end);
      w.add_array<T>("parameters", std::span<const T>(shard.parameters()));
      auto buffers = shard.optimizer_buffers().buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        w.add_array<T>("optimizer." + std::to_string(i), std::span<const T>(buffers[i]));
      w.commit(path);
    } catch (const CheckpointError& e) {
      checkpoint_failures_.note(std::string("parameter server ") + std::to_string(index) + ": " + e.what(), fit.log);
      return false;
    }
    checkpoint::rotate(cp.directory, part, cp.keep);
    return true;
  }

 public:

  // ---- state ------------------------------------------------------------------------------

  std::span<T> parameters() noexcept { return local().engine.parameters(); }
  std::span<const T> parameters() const noexcept { return local().engine.parameters(); }
  std::span<const T> gradients() const noexcept { return local().engine.gradients(); }
  static constexpr std::span<const TensorInfo> tensors() noexcept { return network_type::tensors; }
  /// Updates this process's worker has taken part in.
  std::uint64_t step() const noexcept { return local().step; }
  /// Epochs completed so far.
  std::uint64_t epoch() const noexcept { return epoch_; }
  const TrainerOptions<M>& options() const noexcept { return options_; }
  const Policy& policy() const noexcept { return policy_; }
  /// Every epoch record of every fit() call on this trainer (what the plot shows).
  const History& history() const noexcept { return history_; }
  /// Worker 0's per-step counters of the last fit() call (this process's worker, out of process).
  const std::vector<StepCounters>& step_counters() const noexcept { return counters_; }
  /// The compute engine of worker `w` of this process (in-process workers are 0..workers-1; out of
  /// process, this process's worker whatever `w`): for what an engine reports of itself, such as
  /// cuda::Engine::transfers(). Empty before the first fit() for w > 0.
  const engine_type* engine(std::size_t w = 0) const {
    if (!Backend::in_process) return &local().engine;
    const std::lock_guard lock(states_mutex_);
    return w < workers_.size() && workers_[w] ? &workers_[w]->engine : nullptr;
  }
  /// The learning rate of the next update.
  double learning_rate() const { return options_.optimizer.learning_rate * options_.schedule(local().step); }

  /// A one-line description of the architecture's parameter tensors, stored in checkpoints.
  static std::string signature() { return detail::model_signature<M>(); }

 private:
  /// Everything one worker rank owns.
  struct WorkerState {
    explicit WorkerState(const TrainerOptions<M>& o)
        : engine(o.threads, o.eval_batch_size, o.seed), opt(parameter_count) {
      if constexpr (requires { engine.set_stream_gradients(true); }) engine.set_stream_gradients(o.stream_gradients);
    }
    WorkerState(const TrainerOptions<M>& o, const WorkerState& from) : WorkerState(o) {
      std::copy(from.engine.parameters().begin(), from.engine.parameters().end(), engine.parameters().begin());
      auto dst = opt.buffers();
      from.engine.optimizer_state_to_host(const_cast<optimizer_state&>(from.opt));
      auto src = const_cast<optimizer_state&>(from.opt).buffers();
      for (std::size_t i = 0; i < dst.size(); ++i) std::copy(src[i].begin(), src[i].end(), dst[i].begin());
      step = from.step;
      engine.set_seed(from.engine.seed());
    }
    typename detail::engine_for<M>::type engine;
    optimizer_state opt;
    std::uint64_t step = 0;
    /// Error feedback: what the codec's rounding left out, one stream per bucket or shard.
    std::vector<codec::ErrorFeedback<T>> feedback;
    codec::ErrorFeedback<T>& feedback_for(std::size_t stream) {
      if (feedback.size() <= stream) feedback.resize(stream + 1);
      return feedback[stream];
    }
  };
  using Shard = detail::ParameterServerShard<T, optimizer_type, codec_type>;

  /// What the ranks of one fit() call share in this process.
  struct Shared {
    Shared(const FitOptions& f, bool in_process, bool resumed)
        : timeline(!f.trace_file.empty()), step_log(f.step_log_file, in_process, resumed) {}
    Timeline timeline;
    History history;
    detail::StepLog step_log;
    std::optional<std::size_t> worker_rank;  // a process of one worker: its rank
    std::uint64_t start_epoch = 0, start_batch = 0;
    std::size_t epochs = 0;  // to run in this call
  };

  WorkerState& local() noexcept { return *workers_[0]; }
  const WorkerState& local() const noexcept { return *workers_[0]; }

  /// The state of worker `w` hosted here, created as a copy of worker 0 when missing (by fit(),
  /// before the workers' threads start).
  WorkerState& worker_state(std::size_t w) {
    if (!Backend::in_process) return local();
    const std::lock_guard lock(states_mutex_);
    if (workers_.size() <= w) workers_.resize(w + 1);
    if (!workers_[w]) workers_[w] = std::make_unique<WorkerState>(options_, *workers_[0]);
    return *workers_[w];
  }

  Shard& server_state(std::size_t s, std::size_t servers) {
    const std::lock_guard lock(states_mutex_);
    if (server_rebuild_ || servers_.size() != servers) {
      servers_.clear();
      server_rebuild_ = false;
    }
    if (servers_.empty()) servers_.resize(servers);
    if (!servers_[s]) {
      const auto shards = detail::balanced_shards(parameter_count, servers);
      const auto all = workers_[0]->engine.parameters();
      servers_[s] = std::make_unique<Shard>(shards[s], all.subspan(shards[s].begin, shards[s].size()),
                                            detail::tensors_within(network_type::tensors, shards[s]));
      auto dst = servers_[s]->optimizer_buffers().buffers();
      if (s < pending_shards_.size()) {
        // resume_from() verified it: this shard's parameters, optimizer state and update count.
        const checkpoint::Reader& r = pending_shards_[s];
        r.array_into<T>("parameters", servers_[s]->parameters());
        for (std::size_t i = 0; i < dst.size(); ++i) r.array_into<T>("optimizer." + std::to_string(i), dst[i]);
        servers_[s]->set_updates(r.u64("updates"));
      } else {
        // A restored single-file checkpoint's optimizer state belongs on the shards that serve it.
        workers_[0]->engine.optimizer_state_to_host(workers_[0]->opt);
        auto src = workers_[0]->opt.buffers();
        for (std::size_t i = 0; i < dst.size(); ++i)
          std::copy_n(src[i].begin() + static_cast<std::ptrdiff_t>(shards[s].begin), shards[s].size(), dst[i].begin());
      }
    }
    return *servers_[s];
  }

  /// The optimizer's buffers for the whole model: worker 0's, or assembled from the shards.
  std::vector<std::vector<T>> optimizer_buffers_copy() const {
    std::vector<std::vector<T>> out;
    local().engine.optimizer_state_to_host(const_cast<optimizer_state&>(local().opt));
    auto own = const_cast<optimizer_state&>(local().opt).buffers();
    for (const auto& b : own) out.emplace_back(b.begin(), b.end());
    if (parameter_server && !servers_.empty()) {
      for (const auto& shard : servers_) {
        if (!shard) continue;
        auto buffers = shard->optimizer_buffers().buffers();
        for (std::size_t i = 0; i < buffers.size(); ++i)
          std::copy(buffers[i].begin(), buffers[i].end(), out[i].begin() + static_cast<std::ptrdiff_t>(shard->shard().begin));
      }
    }
    return out;
  }

  // ---- going on without a lost worker (train/worker_loss.hpp) --------------------------------

  /// Whether a worker of endpoint type E can go on after a peer is lost: ring topologies over a
  /// transport that survives a lost peer.
  template <class E>
  static constexpr bool survives_worker_loss = !parameter_server && detail::SurvivableEndpoint<E>;

  void check_worker_loss_supported() const {
    if constexpr (parameter_server) {
      if constexpr (Backend::in_process || !requires(endpoint_type& e) { e.continue_without_lost_peers(true); })
        throw ConfigError("TrainerOptions::on_worker_loss = continue_with_survivors needs worker and server "
                          "processes over transport::Tcp; the " + std::string(Backend::name) +
                          " transport stops the job when a rank is lost");
    } else if constexpr (!Policy::reduce_gradients_in_backward) {
      throw ConfigError("TrainerOptions::on_worker_loss = continue_with_survivors needs a policy whose workers "
                        "allreduce their gradients and update alone (policy::Synchronous<>), not policy " +
                        std::string(Policy::name));
    } else if constexpr (Backend::in_process) {
      throw ConfigError("TrainerOptions::on_worker_loss = continue_with_survivors needs worker processes "
                        "(transport::Tcp): threads of one process cannot be lost on their own");
    } else if constexpr (!detail::SurvivableEndpoint<endpoint_type>) {
      throw ConfigError("TrainerOptions::on_worker_loss = continue_with_survivors: the " + std::string(Backend::name) +
                        " transport cannot go on after a rank is lost (MPI without ULFM stops the job); use "
                        "transport::Tcp");
    }
  }

  /// Where a survivor goes on from once the ring has re-formed: the data position of the survivor
  /// that got furthest (epoch, and samples of it trained on), its update count in this call, and
  /// its last epoch record when it has one more than this worker.
  struct Resumed {
    std::uint64_t epoch = 0, samples = 0, steps_this_call = 0;
    std::optional<EpochRecord> record;
  };

  /// After `lost` was lost during `during` (nullopt: the check-in at the end of training), agrees
  /// with the other survivors on who is left, re-forms `group`, logs each loss once, and takes the
  /// state of the survivor that got furthest. nullopt when nobody was lost (a quiet check-in).
  /// Losses during this start it over; a rank that cannot go on throws.
  template <class E, class G, class R>
  std::optional<Resumed> survive_loss(E& e, G& group, R& recovery, WorkerState& s, std::optional<std::size_t> lost,
                                      const std::string& during, bool in_update, std::uint64_t records, std::uint64_t done_epoch,
                                      std::uint64_t done_batch, std::uint64_t steps_this_call, const FitOptions& fit) {
    // The position in samples: batch indices count global batches, which the re-formed ring makes smaller.
    const std::uint64_t done_samples = done_batch * options_.batch_size * group.size();
    for (;;) {
      const detail::LossDecision d = recovery.agree(lost, detail::LossProgress{s.step, records});
      if (!d.changed()) return std::nullopt;
      if (fit.log)
        for (const std::size_t r : d.lost)
          *fit.log << "worker " << r << " (host " << e.address(r) << ") lost during " << during << " at step "
                   << s.step + (in_update ? 1 : 0) << "; continuing with " << group.size() << " workers, effective batch "
                   << options_.batch_size * group.size() << "\n"
                   << std::flush;
      try {
        // Into copies: a loss in the middle of this leaves this worker's own state whole.
        std::vector<std::uint64_t> head = {s.step, done_epoch, done_samples, records, steps_this_call, 0};
        std::vector<std::byte> rec;
        const bool leader = group.rank() == d.leader;
        if (leader && records > 0 && !history_.empty()) rec = detail::record_bytes(history_.back());
        head[5] = rec.size();
        const Tag tag = detail::protocol_tags::broadcast;
        collective::broadcast(group, std::span<std::uint64_t>(head), d.leader, tag);
        std::vector<T> parameters(s.engine.parameters().begin(), s.engine.parameters().end());
        collective::broadcast(group, std::span<T>(parameters), d.leader, tag);
        s.engine.optimizer_state_to_host(s.opt);
        std::vector<std::vector<T>> buffers;
        for (auto b : s.opt.buffers()) {
          buffers.emplace_back(b.begin(), b.end());
          collective::broadcast(group, std::span<T>(buffers.back()), d.leader, tag);
        }
        rec.resize(static_cast<std::size_t>(head[5]));
        if (!rec.empty())
          collective::broadcast(group, std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(rec.data()), rec.size()),
                                d.leader, tag);
        std::copy(parameters.begin(), parameters.end(), s.engine.parameters().begin());
        auto own = s.opt.buffers();
        for (std::size_t i = 0; i < buffers.size(); ++i) std::copy(buffers[i].begin(), buffers[i].end(), own[i].begin());
        s.engine.optimizer_state_changed();
        s.step = head[0];
        Resumed back{head[1], head[2], head[4], std::nullopt};
        if (head[3] > records) {
          if (head[3] != records + 1 || rec.empty())
            throw TransportError("worker " + std::to_string(e.rank()) + ": the leading survivor has recorded " +
                                 std::to_string(head[3]) + " epochs, this one " + std::to_string(records) +
                                 "; survivors can be one epoch apart at most");
          back.record = detail::record_from_bytes(rec);
        }
        return back;
      } catch (const PeerLostError& x) {
        lost = x.peer();
      }
    }
  }

  // ---- a worker's fit ------------------------------------------------------------------------

  template <class E>
  void run_worker(E& e, std::size_t workers, const data::Dataset<T>& train, const data::Dataset<T>* validation,
                  const FitOptions& fit, Shared& shared) {
    const std::size_t w = e.rank();
    WorkerState& s = worker_state(w);
    const bool reporter = w == 0;
    if (!Backend::in_process) shared.worker_rank = w;
    std::vector<std::size_t> members(workers);
    for (std::size_t i = 0; i < workers; ++i) members[i] = i;
    detail::worker_group_t<E, parameter_server> group(e, members, detail::protocol_tags::group_barrier);
    Timeline& timeline = shared.timeline;

    // Every worker starts from worker 0's state (in case only rank 0 loaded a checkpoint).
    std::optional<detail::ParameterServerClient<T, codec_type>> client;
    std::optional<detail::LiveWorkers> live;
    // A worker process that was lost and started again rejoins the running job (TcpOptions::rejoin).
    bool rejoining = false;
    if constexpr (parameter_server && requires { e.rejoined(); }) rejoining = e.rejoined();
    if constexpr (parameter_server) {
      client.emplace(detail::balanced_shards(parameter_count, options_.servers), workers);
      if constexpr (engine_encodes) s.engine.template encode_gradients_for_push<codec_type>(policy_error_feedback<Policy>);
      live.emplace(workers, w, options_.batch_size, Policy::aggregate, fit.log);
      // Another worker's death must not break this one's endpoint (its servers decide who is left).
      if constexpr (requires { e.continue_without_lost_peers(true); })
        if (detail::continues_without_lost_workers(options_.on_worker_loss, Policy::aggregate))
          e.continue_without_lost_peers(true);
      if (!rejoining) client->exchange_full(e, detail::PsHeader::hello, s.engine.parameters());
    } else if (workers > 1) {
      collective::broadcast(group, s.engine.parameters(), 0, detail::protocol_tags::broadcast);
      s.engine.optimizer_state_to_host(s.opt);
      for (auto b : s.opt.buffers()) collective::broadcast(group, b, 0, detail::protocol_tags::broadcast);
      s.engine.optimizer_state_changed();
      std::uint64_t step = s.step;
      collective::broadcast(group, std::span<std::uint64_t>(&step, 1), 0, detail::protocol_tags::broadcast);
      s.step = step;
    }

    data::LoaderOptions lo;
    lo.batch_size = options_.batch_size;
    lo.shuffle = options_.shuffle;
    lo.seed = options_.seed;
    lo.prefetch = options_.prefetch;
    lo.shard_index = w;
    lo.shard_count = workers;
    std::optional<data::Loader<T>> loader;  // made again, re-sharded, when the ring re-forms
    loader.emplace(train, lo);
    std::optional<flotilla::detail::DataPosition> rejoined_at;
    if constexpr (parameter_server) {
      if (rejoining) {
        const std::uint64_t per_epoch = loader->batches_per_epoch();
        const auto point = client->rejoin(e, per_epoch, s.engine.parameters());
        if (!point) {
          if (fit.log) *fit.log << "flotilla: worker " << w << ": the job is finishing, nothing left to rejoin\n";
          return;
        }
        s.step = point->position;
        live->rejoined(e);
        rejoined_at = flotilla::detail::DataPosition{point->position / per_epoch, point->position % per_epoch};
        if (fit.log)
          *fit.log << "flotilla: worker " << w << " rejoined the job at epoch " << rejoined_at->epoch + 1 << ", batch "
                   << rejoined_at->batch << " (step " << point->position << ", reduction round " << point->round << ")\n";
      }
    }

    // What runs during backward, or after it (overlaps()): bucket allreduces (ring) or shard
    // pushes (parameter server).
    std::unique_ptr<detail::ReadyRunner> runner;
    const bool background = overlaps(e);
    if constexpr (parameter_server) {
      std::vector<detail::Range> order(client->shards().rbegin(), client->shards().rend());
      runner = std::make_unique<detail::ReadyRunner>(
          order,
          [&, servers = order.size()](std::size_t i, detail::Range) {
            const auto t0 = Timeline::clock::now();
            push_shard(e, *client, servers - 1 - i, s);
            timeline.record("push shard " + std::to_string(servers - 1 - i), "communication", w, 1, t0, Timeline::clock::now());
          },
          background);
    } else if (workers > 1 && Policy::reduce_gradients_in_backward) {
      runner = std::make_unique<detail::ReadyRunner>(
          detail::make_buckets(network_type::parameter_offsets, network_type::parameter_counts,
                               std::max<std::size_t>(bucket_bytes() / sizeof(T), 1)),
          [&](std::size_t i, detail::Range r) {
            const auto t0 = Timeline::clock::now();
            reduce_bucket(group, s, i, r, detail::protocol_tags::bucket_base + static_cast<Tag>(i));
            timeline.record("allreduce bucket " + std::to_string(i), "communication", w, 1, t0, Timeline::clock::now());
          },
          background);
    }

    std::optional<MetricsLog> metrics;
    if (reporter && !fit.metrics_file.empty())
      metrics.emplace(fit.metrics_file, MetricsLog::Format::from_extension,
                      s.step > 0 ? MetricsLog::OpenMode::append : MetricsLog::OpenMode::truncate);
    shared.step_log.open_rank(w);
    if (reporter) counters_.clear();

    // Worker 0 in-process, and every worker out of process, owns this process's position.
    const bool owns_position = reporter || !Backend::in_process;
    flotilla::detail::DataPosition at{shared.start_epoch, shared.start_batch};
    std::size_t epochs_to_run = shared.epochs;
    if (rejoined_at) {
      // The epochs of this call that the others are still to finish, from the one they are in.
      const std::uint64_t behind = rejoined_at->epoch - std::min(rejoined_at->epoch, at.epoch);
      epochs_to_run = shared.epochs > behind ? static_cast<std::size_t>(shared.epochs - behind) : 0;
      at = *rejoined_at;
    }
    std::uint64_t steps_this_call = 0;
    bool stop = false;
    // Checkpoint sets are worker 0's decision alone (its state is the job's in synchronous
    // training; servers save on its request), so no other worker waits for them.
    const CheckpointPolicy& cp = fit.checkpoints;
    const bool saves_sets = reporter && cp.enabled();
    detail::CheckpointClock checkpoint_clock(cp, s.step);
    // The position after the last completed update: what a checkpoint taken now must record.
    std::uint64_t done_step = s.step, done_epoch = at.epoch, done_batch = at.batch;
    auto save_set = [&] {
      if constexpr (parameter_server) {
        for (const std::size_t k : client->checkpoint(e, s.step))
          checkpoint_failures_.note("parameter server " + std::to_string(k) + " could not save its shard of step " +
                                        std::to_string(s.step) + " (its log says why); that set is incomplete",
                                    fit.log);
      }
      const auto path = checkpoint::set_file(cp.directory, s.step, checkpoint::worker_part());
      try {
        write_worker_file(path, done_epoch, done_batch, !parameter_server);
        checkpoint::rotate(cp.directory, checkpoint::worker_part(), cp.keep);
      } catch (const CheckpointError& err) {
        checkpoint_failures_.note(err.what(), fit.log);
      }
      checkpoint_clock.mark_saved(s.step);
    };
    // Going on without a lost worker (TrainerOptions::on_worker_loss): the survivors' agreement.
    std::optional<typename detail::ring_recovery_for<E, survives_worker_loss<E>>::type> recovery;
    if constexpr (survives_worker_loss<E>)
      if (options_.on_worker_loss == WorkerLoss::continue_with_survivors) recovery.emplace(group);
    std::uint64_t records = 0;                // epochs recorded in this call
    std::optional<EpochRecord> adopted;       // the end of an epoch this worker missed
    // Rethrows the current PeerLostError unless the survivors go on; then where they go on from.
    const std::string update_op = "the gradient allreduce";
    auto survive = [&](std::optional<std::size_t> peer, const std::string& during) -> std::optional<Resumed> {
      if constexpr (survives_worker_loss<E>) {
        if (recovery) {
          auto back = survive_loss(e, group, *recovery, s, peer, during, peer && during == update_op, records, done_epoch, done_batch, steps_this_call, fit);
          if (back) {
            lo.shard_index = group.rank();
            lo.shard_count = group.size();
            loader.emplace(train, lo);
            steps_this_call = back->steps_this_call;
            stop = fit.max_steps && steps_this_call >= fit.max_steps;
            done_step = s.step;
          }
          return back;
        }
      }
      throw;
    };

    try {
      for (std::size_t epoch_index = 0; epoch_index < epochs_to_run && !stop; ++epoch_index) {
        const auto started = std::chrono::steady_clock::now();
        loader->start_epoch(at.epoch, at.batch);
        std::optional<ProgressBar> bar;
        if (reporter && fit.log)
          bar.emplace(*fit.log, loader->batches_per_epoch(), "epoch " + std::to_string(at.epoch + 1), fit.progress);
        double loss_sum = 0;
        std::size_t correct = 0, seen = 0, micro = 0, position = at.batch;
        CounterTotals totals;
        StepCounters counters;
        TrafficCounters before = e.counters();
        while (const data::Batch<T>* batch = loader->next()) {
          // Micro-batches of one update: K, or what is left of the epoch.
          const std::size_t remaining = loader->batches_per_epoch() - (batch->index - micro);
          const std::size_t group_size = std::min(micro_batches, remaining);
          const bool last = micro + 1 == group_size;
          StepResult r;
          try {
            r = worker_step(e, group, s, *batch, micro, group_size, last, runner.get(), client, counters, timeline, w);
          } catch (const PeerLostError& x) {
            // The survivors redo the interrupted update from the furthest one's state, re-sharded.
            const std::optional<Resumed> back = survive(x.peer(), update_op);
            micro = 0;
            if (back && back->epoch > at.epoch) {  // it finished this epoch's updates
              position = loader->batches_per_epoch();
              adopted = back->record;
              done_epoch = back->epoch;
              done_batch = 0;
              break;
            }
            position = back ? back->samples / (options_.batch_size * group.size()) : done_batch;
            done_batch = position;
            loader->start_epoch(at.epoch, position);
            if (stop) break;
            continue;
          }
          loss_sum += r.loss * static_cast<double>(r.samples);
          correct += r.correct;
          seen += r.samples;
          ++position;
          micro = last ? 0 : micro + 1;
          if (last) {
            const TrafficCounters now = e.counters();
            counters.traffic = now - before;
            before = now;
            counters.step = s.step;
            totals.add(counters);
            if (reporter) counters_.push_back(counters);
            if (shared.step_log.enabled()) write_step_log(w, counters, shared);
            if constexpr (parameter_server) live->watch(e);
            counters = {};
            if (fit.max_steps && ++steps_this_call >= fit.max_steps) stop = true;
            const flotilla::detail::DataPosition done = at.after_update(position, loader->batches_per_epoch());
            done_step = s.step;
            done_epoch = done.epoch;
            done_batch = done.batch;
            if (saves_sets && checkpoint_clock.due(s.step)) save_set();
          }
          // The bar shows the job's rate: every worker takes an equal share of each global batch.
          if (bar) detail::show_running(*bar, position, seen * group.size(), loss_sum, correct, seen, classifier);
          if (stop && last) break;
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        EpochRecord rec;
        while (!adopted) {
          try {
            rec = epoch_record(group, loss_sum, correct, seen, seconds, totals, group.size(), validation, s,
                               client ? &*client : nullptr, live ? &*live : nullptr);
            break;
          } catch (const PeerLostError& x) {
            const std::optional<Resumed> back = survive(x.peer(), "the epoch's metrics");
            if (back) {
              adopted = back->record;
              position = back->epoch > at.epoch ? loader->batches_per_epoch()
                                                : back->samples / (options_.batch_size * group.size());
            }
          }
        }
        if (adopted) rec = *std::exchange(adopted, std::nullopt);
        ++records;
        at.end_epoch(stop && position < loader->batches_per_epoch(), position);
        rec.epoch = at.epoch;
        if (owns_position) {
          epoch_ = at.epoch;
          batch_in_epoch_ = at.batch;
          history_.push_back(rec);
          shared.history.push_back(rec);
        }
        if (reporter) {
          if (bar) bar->finish(detail::epoch_summary(rec));
          if (metrics) metrics->write(rec);
          if (!fit.plot_file.empty()) write_svg_plot(fit.plot_file, history_, fit.plot_title);
        }
        if (!fit.checkpoint_file.empty()) {
          // Servers are idle while every worker waits here.
          auto barrier = [&] {
            if constexpr (parameter_server) {
              if (workers > 1) detail::barrier_through_server(e, *client, *live);
            } else {
              group.barrier();
            }
          };
          bool saved = false;
          try {
            barrier();
            if (reporter) save(fit.checkpoint_file);
            saved = true;
            barrier();
          } catch (const PeerLostError& x) {
            // The survivors go on at once: some may have left the barriers already.
            survive(x.peer(), "a checkpoint barrier");
            if (reporter && !saved) save(fit.checkpoint_file);
          }
        }
      }
      // No survivor leaves while another may still need it: they check in, and when one was lost
      // meanwhile, those still training take the state of those that finished.
      if (recovery)
        while (survive(std::nullopt, "the end of training")) {
        }
      if (saves_sets && checkpoint_clock.due_at_exit(s.step)) save_set();
    } catch (...) {
      // Leaving by an exception (a peer died, a transport timed out): worker 0 saves what it has
      // if that is the state of a completed update. Parameters and optimizer state change only
      // together with the step counter, so an unchanged counter means nothing is half applied.
      // Not with parameter servers: they hold the state, and may be what failed.
      if (saves_sets && !parameter_server && s.step == done_step && checkpoint_clock.due_at_exit(s.step)) {
        const auto path = checkpoint::set_file(cp.directory, s.step, checkpoint::worker_part());
        try {
          write_worker_file(path, done_epoch, done_batch, true);
          checkpoint::rotate(cp.directory, checkpoint::worker_part(), cp.keep);
          if (fit.log) *fit.log << "checkpoint: saved step " << s.step << " to " << path.string() << " before stopping\n";
        } catch (const CheckpointError& err) {
          checkpoint_failures_.note(err.what(), fit.log);
        }
      }
      throw;
    }
    if constexpr (parameter_server) client->exchange_full(e, detail::PsHeader::done, s.engine.parameters());
  }

  /// One micro-batch: gradients, and on the last micro-batch of an update, the policy's update.
  template <class E, class G>
  StepResult worker_step(E& e, G& group, WorkerState& s, const data::Batch<T>& batch, std::size_t micro,
                         std::size_t group_size, bool last, detail::ReadyRunner* runner,
                         std::optional<detail::ParameterServerClient<T, codec_type>>& client, StepCounters& counters,
                         Timeline& timeline, std::size_t w) {
    // Sum of scaled gradients = mean over the update's samples: of all workers' when the trainer
    // sums them (servers that aggregate, rings that reduce in backward), else of this worker's own
    // (asynchronous servers; a peer-to-peer policy that combines gradients itself averages them).
    bool summed_by_trainer = false;
    if constexpr (parameter_server) {
      summed_by_trainer = Policy::aggregate;
    } else {
      summed_by_trainer = Policy::reduce_gradients_in_backward;
    }
    const std::size_t denominator = summed_by_trainer && batch.global_size ? batch.global_size : batch.size();
    const T scale = denominator ? T(1) / static_cast<T>(denominator * group_size) : T(0);
    const bool communicates = last && runner != nullptr;
    const auto t0 = Timeline::clock::now();
    if (communicates) runner->start(parameter_count);
    const StepResult r = communicates && runner->background()
                             ? s.engine.compute_gradients(batch, scale, micro > 0,
                                                          [runner](std::size_t offset) { runner->ready(offset); })
                             : s.engine.compute_gradients(batch, scale, micro > 0);
    const auto t1 = Timeline::clock::now();
    timeline.record("forward+backward", "compute", w, 0, t0, t1);
    const double compute = std::chrono::duration<double>(t1 - t0).count();
    counters.compute_seconds += compute;
    if (w == options_.straggler.worker && options_.straggler.factor > 1)
      std::this_thread::sleep_for(std::chrono::duration<double>(compute * (options_.straggler.factor - 1)));
    if (!last) return r;

    const auto t2 = Timeline::clock::now();
    if (communicates) counters.exposed_comm_seconds += runner->finish();
    const auto t3 = Timeline::clock::now();
    if (communicates) timeline.record("wait for communication", "wait", w, 0, t2, t3);
    if constexpr (parameter_server) {
      for (std::size_t k = 0; k < client->shards().size(); ++k) {
        const auto info = pull_shard(e, *client, k, s);
        counters.steps_ahead = std::max(counters.steps_ahead, info.steps_ahead);
        counters.staleness = std::max(counters.staleness, info.staleness);
      }
      ++s.step;
      const auto t4 = Timeline::clock::now();
      timeline.record("pull parameters", "communication", w, 0, t3, t4);
      counters.exposed_comm_seconds += std::chrono::duration<double>(t4 - t3).count();
    } else {
      PeerContext<G> ctx{*this, group, s};  // (named: nvcc cannot deduce a member template's arguments)
      policy_.step(ctx);
      const auto t4 = Timeline::clock::now();
      timeline.record("update", "update", w, 0, t3, t4);
      counters.update_seconds += std::chrono::duration<double>(t4 - t3).count();
    }
    return r;
  }

  template <class E>
  void push_shard(E& e, detail::ParameterServerClient<T, codec_type>& client, std::size_t k, WorkerState& s) {
    if constexpr (engine_encodes) {
      client.push_encoded(e, k, s.engine.pushed_gradient_codes());  // error feedback included there
      return;
    } else if constexpr (policy_error_feedback<Policy> && !codec_type::lossless) {
      // Send the gradient plus what rounding dropped last step; keep what it drops now.
      const detail::Range r = client.shards()[k];
      s.feedback_for(k).round_trip(codec_type{}, s.engine.gradients().subspan(r.begin, r.size()));
    }
    client.push(e, k, std::span<const T>(s.engine.gradients()));
  }

  template <class E>
  auto pull_shard(E& e, detail::ParameterServerClient<T, codec_type>& client, std::size_t k, WorkerState& s) {
    if constexpr (engine_encodes) {
      return client.pull_encoded(e, k, [&s](std::size_t begin, std::span<const std::byte> codes) {
        s.engine.template decode_pulled_parameters<codec_type>(begin, codes);
      });
    } else {
      return client.pull(e, k, s.engine.parameters());
    }
  }

  template <class G>
  void reduce_bucket(G& group, WorkerState& s, std::size_t bucket, detail::Range r, Tag tag) {
    auto g = s.engine.gradients().subspan(r.begin, r.size());
    if constexpr (policy_error_feedback<Policy> && !codec_type::lossless) {
      // This worker's contribution is rounded once on its way out; carry that rounding forward.
      s.feedback_for(bucket).round_trip(codec_type{}, g);
    }
    collective::RingOptions o;
    o.tag = tag;
    collective::ring_allreduce<codec_type>(group, g, o);
  }

  /// TrainerOptions::overlap for this worker (train/overlap.hpp).
  template <class E>
  bool overlaps(const E& e) const {
    if (options_.overlap != Overlap::automatic) return options_.overlap == Overlap::always;
    if constexpr (!std::is_same_v<typename M::device, device::Cpu>) {
      return true;
    } else {
      std::size_t ranks_on_host = 1;
      if constexpr (KnowsRanksOnHost<E>) ranks_on_host = std::max<std::size_t>(1, e.ranks_on_this_host());
      return detail::overlap_pays(detail::usable_cores(), ranks_on_host, std::max<std::size_t>(1, options_.threads));
    }
  }

  std::size_t bucket_bytes() const {
    if constexpr (requires { policy_.bucket_bytes; }) {
      return policy_.bucket_bytes;
    } else {
      return std::size_t{256} * 1024;
    }
  }

  /// The context a peer-to-peer policy's step() works with (see concepts/update_policy.hpp).
  template <class G>
  class PeerContext {
   public:
    PeerContext(Trainer& t, G& group, WorkerState& s) : t_(t), g_(group), s_(s) {}
    std::size_t rank() const { return g_.rank(); }
    std::size_t workers() const { return g_.size(); }
    std::uint64_t step() const { return s_.step; }
    std::span<T> parameters() { return s_.engine.parameters(); }
    std::span<T> gradients() { return s_.engine.gradients(); }
    /// Sums (or averages) `values` over the workers, with the policy's codec on the wire.
    void allreduce(std::span<T> values, bool average = false) {
      if (g_.size() == 1) return;
      collective::RingOptions o;
      o.tag = detail::protocol_tags::policy_collective;
      o.average = average;
      collective::ring_allreduce<codec_type>(g_, values, o);
    }
    void broadcast(std::span<T> values, std::size_t root = 0) {
      if (g_.size() > 1) collective::broadcast(g_, values, root, detail::protocol_tags::policy_collective);
    }
    /// One optimizer step on this worker with gradients(), at the scheduled learning rate.
    void apply_optimizer() {
      const auto& o = t_.options_;
      s_.engine.apply_optimizer(o.optimizer, s_.opt, std::span<const TensorInfo>(network_type::tensors),
                                StepInfo{s_.step + 1, o.optimizer.learning_rate * o.schedule(s_.step)});
      ++s_.step;
    }

   private:
    Trainer& t_;
    G& g_;
    WorkerState& s_;
  };

  // ---- a server's fit ----------------------------------------------------------------------

  template <class E>
  void run_server(E& e, std::size_t workers, std::size_t index, const FitOptions& fit) {
    if constexpr (parameter_server) {
      Shard& shard = server_state(index, options_.servers);
      shard.continue_without_lost_workers(detail::continues_without_lost_workers(options_.on_worker_loss, Policy::aggregate));
      shard.serve(e, workers, Policy::aggregate, Policy::staleness_bound, options_.optimizer, options_.schedule,
                  [&](std::uint64_t step) { return save_shard(shard, index, options_.servers, step, fit); });
    } else {
      (void)e, (void)workers, (void)index, (void)fit;
    }
  }

  // ---- epoch bookkeeping --------------------------------------------------------------------

  /// The epoch's record, with every number summed or maximised over the workers (parameter
  /// servers: over the workers still training, through server 0; `client` and `live` are null
  /// otherwise).
  template <class G>
  EpochRecord epoch_record(G& group, double loss_sum, std::size_t correct, std::size_t seen, double seconds,
                           const CounterTotals& totals, std::size_t workers, const data::Dataset<T>* validation,
                           WorkerState& s, detail::ParameterServerClient<T, codec_type>* client,
                           detail::LiveWorkers* live) {
    // The first entries are named by position below; the traffic counters follow, in the order of
    // traffic_counter_fields.
    std::vector<double> sums = {loss_sum,
                                static_cast<double>(correct),
                                static_cast<double>(seen),
                                static_cast<double>(totals.steps),
                                totals.compute_seconds,
                                totals.exposed_comm_seconds,
                                totals.update_seconds};
    const std::size_t traffic_at = sums.size();
    for (const auto& f : traffic_counter_fields) sums.push_back(static_cast<double>(totals.traffic.*f.member));
    std::vector<double> maxima = {seconds, static_cast<double>(totals.max_steps_ahead),
                                  static_cast<double>(totals.max_staleness)};
    if (workers > 1) {
      if constexpr (parameter_server) {
        detail::reduce_epoch_metrics(group.endpoint(), *client, *live, std::span<double>(sums), std::span<double>(maxima));
      } else {
        collective::allreduce_sum(group, std::span<double>(sums), detail::protocol_tags::metrics);
        collective::allreduce_max(group, std::span<double>(maxima), detail::protocol_tags::metrics);
      }
    }
    const std::size_t contributors = live ? live->members().size() : workers;
    EpochRecord rec;
    rec.step = s.step;
    const double samples = std::max(sums[2], 1.0);
    rec.train_loss = sums[0] / samples;
    rec.train_accuracy = classifier ? sums[1] / samples : std::numeric_limits<double>::quiet_NaN();
    rec.seconds = maxima[0];
    rec.samples_per_second = sums[2] / std::max(maxima[0], 1e-9);
    rec.learning_rate = options_.optimizer.learning_rate * options_.schedule(s.step);
    if (validation) {
      detail::EvaluationPart part;
      bool shared_through_server = false;
      if constexpr (parameter_server) {
        if (workers > 1) {
          part = detail::reduce_evaluation(group.endpoint(), *client, *live, validation->size(),
                                           [&](std::size_t first, std::size_t count) {
                                             return s.engine.evaluate(*validation, first, count);
                                           });
          shared_through_server = true;
        }
      }
      if (!shared_through_server) {
        const auto [first, last] = detail::split_range(validation->size(), workers, group.rank());
        part = s.engine.evaluate(*validation, first, last - first);
      }
      if (workers > 1 && !shared_through_server) {
        std::vector<double> v(2 + part.confusion.size());
        v[0] = part.loss_sum;
        v[1] = static_cast<double>(part.samples);
        for (std::size_t i = 0; i < part.confusion.size(); ++i) v[2 + i] = static_cast<double>(part.confusion[i]);
        collective::allreduce_sum(group, std::span<double>(v), detail::protocol_tags::metrics);
        part.loss_sum = v[0];
        part.samples = static_cast<std::size_t>(v[1]);
        for (std::size_t i = 0; i < part.confusion.size(); ++i) part.confusion[i] = static_cast<std::uint64_t>(v[2 + i]);
      }
      const Evaluation ev = to_evaluation(part);
      rec.val_loss = ev.loss;
      if (classifier) rec.val_accuracy = ev.accuracy;
    }
    const double steps = std::max(sums[3], 1.0);  // worker-steps
    rec.extra = {{"workers", static_cast<double>(contributors)},
                 {"compute_ms_per_step", 1e3 * sums[4] / steps},
                 {"exposed_comm_ms_per_step", 1e3 * sums[5] / steps},
                 {"update_ms_per_step", 1e3 * sums[6] / steps}};
    for (std::size_t i = 0; i < traffic_counter_fields.size(); ++i) {
      rec.extra.emplace_back(std::string(traffic_counter_fields[i].name) + "_per_step", sums[traffic_at + i] / steps);
    }
    rec.extra.emplace_back("max_steps_ahead", maxima[1]);
    rec.extra.emplace_back("max_staleness", maxima[2]);
    return rec;
  }

  static void write_step_log(std::size_t rank, const StepCounters& c, Shared& shared) {
    char timing[256];
    std::snprintf(timing, sizeof timing,
                  "{\"rank\":%zu,\"step\":%llu,\"compute_ms\":%.4f,\"exposed_comm_ms\":%.4f,\"update_ms\":%.4f", rank,
                  static_cast<unsigned long long>(c.step), 1e3 * c.compute_seconds, 1e3 * c.exposed_comm_seconds,
                  1e3 * c.update_seconds);
    std::string line = timing;
    detail::append_traffic_fields(line, c.traffic);
    line += ",\"steps_ahead\":" + std::to_string(c.steps_ahead) + ",\"staleness\":" + std::to_string(c.staleness) + "}";
    shared.step_log.write(std::move(line));
  }

  static Evaluation to_evaluation(const detail::EvaluationPart& part) { return detail::to_evaluation<M>(part); }

  static void check_dataset(const data::Dataset<T>& d, const char* what) {
    detail::check_dataset<M>(d, std::string("Trainer::") + what);
  }

  TrainerOptions<M> options_;
  Policy policy_;
  typename Backend::options transport_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  std::vector<std::unique_ptr<Shard>> servers_;
  bool server_rebuild_ = false;
  mutable std::mutex states_mutex_;
  History history_;
  std::vector<StepCounters> counters_;
  std::uint64_t epoch_ = 0;
  std::uint64_t batch_in_epoch_ = 0;
  /// The shard files of the set resume_from() chose, for the servers this process hosts.
  std::vector<checkpoint::Reader> pending_shards_;
  detail::CheckpointFailures checkpoint_failures_;
};

}  // namespace flotilla
