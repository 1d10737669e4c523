// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_TRAINER_HPP_INCLUDED
#define FLOTILLA_TRAIN_TRAINER_HPP_INCLUDED
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
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/exchange/policy_exchange.hpp"
#include "flotilla/model.hpp"
#include "flotilla/policy/synchronous.hpp"
#include "flotilla/topology/detail/parameter_server.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/checkpoint_format.hpp"
#include "flotilla/train/detail/checkpoint_saving.hpp"
#include "flotilla/train/detail/dataset_check.hpp"
#include "flotilla/train/evaluation.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/detail/hosted_servers.hpp"
#include "flotilla/train/detail/model_checkpoint.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/trainer_options.hpp"
#include "flotilla/train/detail/worker_loop.hpp"
#include "flotilla/train/worker_loss.hpp"
#include "flotilla/train/detail/worker_state.hpp"
#include "flotilla/transport/in_process.hpp"

namespace flotilla {

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
  using codec_type = policy_codec_t<Policy, T>;
  /// What each bucket of gradients goes through (concepts/gradient_exchange.hpp).
  using exchange_type = policy_exchange_t<Policy, T>;
  using engine_type = typename detail::engine_for<M>::type;  ///< cuda::Engine for device::Cuda models
  using endpoint_type = typename Backend::endpoint;
  static constexpr std::size_t parameter_count = M::parameter_count;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;
  static constexpr bool parameter_server = ParameterServerPolicy<Policy>;
  static constexpr std::size_t micro_batches = policy_micro_batches<Policy>;
  static_assert(Codec<codec_type, T>, "Trainer: the policy's codec cannot encode the model's scalar type");
  static_assert(!ReproduciblePolicy<Policy> || micro_batches == 1,
                "Trainer: a reproducible policy (policy::Reproducible) takes one batch per update: make the batch larger "
                "instead of accumulating micro-batches");
  static_assert(!ReproduciblePolicy<Policy> ||
                    requires(engine_type& e, const data::Batch<T>& b, const collective::SumTree& tree) {
                      e.compute_tree_gradients(b, std::size_t{1}, tree, std::size_t{0}, T(1));
                    },
                "Trainer: a reproducible policy (policy::Reproducible) needs an engine that computes gradients shard by "
                "shard: the CPU engine (device::Cpu)");

  explicit Trainer(TrainerOptions<M> options = {}, Policy policy = {}, typename Backend::options transport = {})
      : options_(std::move(options)), policy_(std::move(policy)), transport_(std::move(transport)) {
    options_.validate("TrainerOptions");
    if (Backend::in_process && options_.workers == 0) throw ConfigError("TrainerOptions::workers must be > 0");
    if (parameter_server && options_.servers == 0) throw ConfigError("TrainerOptions::servers must be > 0");
    if (options_.on_worker_loss == WorkerLoss::continue_with_survivors) check_worker_loss_supported();
    if (options_.on_non_finite_loss == NonFiniteLoss::skip_update) check_skipping_supported();
    workers_.push_back(std::make_unique<State>(options_));
    ledger_.write = [this](const std::filesystem::path& path, std::uint64_t epoch, std::uint64_t batch, bool with_optimizer,
                           const detail::ExchangeStates<T>& states) {
      write_worker_file(path, epoch, batch, with_optimizer, states);
    };
    ledger_.save = [this](const std::filesystem::path& path, const detail::ExchangeStates<T>& states) {
      save_with(path, states);
    };
  }
  // The ledger's writers refer to this trainer.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // ---- training ---------------------------------------------------------------------------

  /// Trains for `fit.epochs` epochs over `train`, evaluating on `validation` after each epoch when
  /// given. Every rank of the job calls it. Returns one record per epoch, the same on every worker
  /// (empty on servers), also written to the metrics file when set. When a checkpoint set could
  /// not be saved during the call, it throws CheckpointError at the end, after training and its
  /// outputs (CheckpointPolicy::fail_at_end_on_save_failure; the records are in history()).
  History fit(const data::Dataset<T>& train, const data::Dataset<T>* validation = nullptr, const FitOptions& fit = {}) {
    check_dataset(train, "fit: training set");
    if (validation) check_dataset(*validation, "fit: validation set");
    const std::size_t failures_before = ledger_.failures.size();
    const std::size_t servers = parameter_server ? options_.servers : 0;
    const std::size_t ranks = Backend::in_process ? options_.workers + servers : 0;
    const std::size_t epochs = detail::prepare_checkpoint_sets(fit.checkpoints, fit.epochs, "Trainer::fit", [&] {
      resume_from(fit.checkpoints.directory, fit.log);
      return ledger_.epoch;
    });
    detail::FitShared shared(fit, Backend::in_process, local().step > 0);
    shared.epochs = epochs;
    // Where this call starts; workers count from here on their own, and the position is written
    // back only by the worker that owns it (worker 0 in-process), so no thread reads a member
    // another writes.
    shared.start_epoch = ledger_.epoch;
    shared.start_batch = ledger_.batch_in_epoch;
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
        detail::WorkerLoop<M, Policy, codec_type, endpoint_type, State, Backend::in_process> loop(
            options_, policy_, e, worker_state(e.rank()), workers, train, validation, fit, shared, ledger_);
        loop.run();
      } else {
        run_server(e, workers, e.rank() - workers, fit);
      }
    });
    servers_.forget_shard_files();  // consumed by the servers hosted here
    ledger_.loaded_exchange.clear();  // taken by the workers
    // Servers record no events: a process of servers alone writes no trace.
    detail::write_fit_trace(shared.timeline, fit.trace_file, Backend::in_process, shared.worker_rank);
    detail::report_unsaved_sets(ledger_.failures, failures_before, fit.checkpoints, fit.log);
    return shared.history;
  }

  // ---- evaluation -------------------------------------------------------------------------

  /// Mean loss, accuracy and confusion matrix over the whole data set, with this process's model
  /// (worker 0's in-process), on all its cores.
  Evaluation evaluate(const data::Dataset<T>& data) {
    check_dataset(data, "evaluate: data set");
    return detail::to_evaluation<M>(local().engine.evaluate(data, 0, data.size()));
  }

  /// The model's outputs ((output size) x samples) for `inputs` ((input size) x samples).
  Matrix<T> predict(ConstMatrixView<T> inputs) {
    if (inputs.rows() != static_cast<Eigen::Index>(M::input_shape::size))
      throw ShapeError("Trainer::predict: inputs have " + std::to_string(inputs.rows()) + " rows, the model expects " +
                       std::to_string(M::input_shape::size));
    return local().engine.predict(inputs);
  }

  // ---- checkpoints ------------------------------------------------------------------------

  /// Writes parameters, optimizer state, step, seed and data position to `path` atomically, and
  /// the gradient exchange's state (error-feedback residuals) of the workers this process hosts.
  /// With parameter servers in another process, the optimizer state lives there and is not saved.
  /// A checkpoint directory (FitOptions::checkpoints) keeps what save() leaves out: the servers'
  /// optimizer state and update counts, in shard files each server process writes itself.
  void save(const std::filesystem::path& path) const {
    detail::ExchangeStates<T> states;
    if constexpr (State::stateful_exchange) {
      const std::lock_guard lock(states_mutex_);
      for (const auto& w : workers_) states.push_back(w ? w->exchange_state() : std::vector<std::vector<T>>{});
    }
    save_with(path, states);
  }

  /// Restores what save() wrote, seed included. The checkpoint must come from the same model and
  /// optimizer types; nothing is changed unless the whole checkpoint verifies and matches.
  void load(const std::filesystem::path& path) {
    const checkpoint::Reader r(path);
    detail::check_checkpoint<M>(r);
    load_worker_file(r);
    servers_.reset();
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
    const std::vector<std::string> parts = checkpoint::trainer_parts(servers);
    auto found = checkpoint::find_resume_point(dir, parts, [&](const std::string& part, const checkpoint::Reader& r) {
      if (part == checkpoint::worker_part()) {
        detail::check_checkpoint<M>(r);
      } else {
        const auto at = std::find(parts.begin(), parts.end(), part) - parts.begin();
        Servers::check_shard_file(r, static_cast<std::size_t>(at) - 1, servers);
      }
    });
    ResumeReport report = checkpoint::start_report(found, dir, log);
    if (!found.point) return report;
    auto& point = *found.point;
    load_worker_file(point.parts.at(checkpoint::worker_part()));
    std::vector<checkpoint::Reader> shard_files;
    for (std::size_t k = 0; k != servers; ++k) shard_files.push_back(point.parts.at(checkpoint::server_part(k, servers)));
    servers_.reset(std::move(shard_files));
    checkpoint::finish_report(report, dir, point.step, parts, ledger_.epoch, ledger_.batch_in_epoch, log);
    return report;
  }

  /// Checkpoint saves that failed (periodic and at exit, worker and server files): each message
  /// names the file and the reason. Training goes on after a failed save (a full disk first loses
  /// the writer's files older than the newest complete set); the sets saved before are kept.
  /// fit() reports a call's failures when it ends (CheckpointPolicy::fail_at_end_on_save_failure).
  std::vector<std::string> checkpoint_failures() const { return ledger_.failures.list(); }

  // ---- state ------------------------------------------------------------------------------

  std::span<T> parameters() noexcept { return local().engine.parameters(); }
  std::span<const T> parameters() const noexcept { return local().engine.parameters(); }
  std::span<const T> gradients() const noexcept { return local().engine.gradients(); }
  static constexpr std::span<const TensorInfo> tensors() noexcept { return network_type::tensors; }
  /// Updates this process's worker has taken part in.
  std::uint64_t step() const noexcept { return local().step; }
  /// Of those, the updates skipped because their gradient was not finite
  /// (TrainerOptions::on_non_finite_loss = NonFiniteLoss::skip_update).
  std::uint64_t skipped_updates() const noexcept { return local().skipped_updates; }
  /// Epochs completed so far.
  std::uint64_t epoch() const noexcept { return ledger_.epoch; }
  const TrainerOptions<M>& options() const noexcept { return options_; }
  const Policy& policy() const noexcept { return policy_; }
  /// Every epoch record of every fit() call on this trainer (what the plot shows).
  const History& history() const noexcept { return ledger_.history; }
  /// Worker 0's per-step counters of the last fit() call (this process's worker, out of process).
  const std::vector<StepCounters>& step_counters() const noexcept { return ledger_.counters; }
  /// The compute engine of worker `w` of this process (in-process workers are 0..workers-1; out of
  /// process, this process's worker whatever `w`): for what an engine reports of itself, such as
  /// cuda::Engine::transfers(). Empty before the first fit() for w > 0.
  const engine_type* engine(std::size_t w = 0) const {
    if (!Backend::in_process) return &local().engine;
    const std::lock_guard lock(states_mutex_);
    return w < workers_.size() && workers_[w] ? &workers_[w]->engine : nullptr;
  }
  /// The learning rate of the next update.
  double learning_rate() const { return options_.learning_rate(local().step); }

  /// A one-line description of the architecture's parameter tensors, stored in checkpoints.
  static std::string signature() { return detail::model_signature<M>(); }

 private:
  using State = detail::WorkerState<M, exchange_type>;
  using Servers = detail::HostedServers<M, codec_type>;

  State& local() noexcept { return *workers_[0]; }
  const State& local() const noexcept { return *workers_[0]; }

  /// The state of worker `w` hosted here, created as a copy of worker 0 when missing (by fit(),
  /// before the workers' threads start).
  State& worker_state(std::size_t w) {
    if (!Backend::in_process) return local();
    const std::lock_guard lock(states_mutex_);
    if (workers_.size() <= w) workers_.resize(w + 1);
    if (!workers_[w]) workers_[w] = std::make_unique<State>(options_, *workers_[0]);
    return *workers_[w];
  }

  void load_worker_file(const checkpoint::Reader& r) {
    detail::LoadedCheckpoint<M> c = detail::read_checkpoint<M>(r);
    // Verified: now change state. Every worker and server of this process starts from it.
    workers_.resize(1);
    State& s = *workers_[0];
    std::copy(c.parameters.begin(), c.parameters.end(), s.engine.parameters().begin());
    s.opt = std::move(c.optimizer);
    s.engine.optimizer_state_changed();
    s.step = c.at.step;
    // The seed keys the data order and the dropout masks: the resumed run continues the saved
    // run's sequence, whatever seed this trainer was built with.
    s.engine.set_seed(c.at.seed);
    options_.seed = c.at.seed;
    ledger_.epoch = c.at.epoch;
    ledger_.batch_in_epoch = c.at.batch_in_epoch;
    // Each worker takes its own exchange state when it starts; one the file does not hold starts afresh.
    s.restore_exchange(c.exchange.empty() ? std::vector<std::vector<T>>{} : c.exchange[0]);
    ledger_.loaded_exchange = std::move(c.exchange);
  }

  /// save() with the workers' exchange states given: the position reached, and the optimizer's
  /// state where this process has all of it (no servers, or the servers hosted here).
  void save_with(const std::filesystem::path& path, const detail::ExchangeStates<T>& states) const {
    write_worker_file(path, ledger_.epoch, ledger_.batch_in_epoch, !parameter_server || !servers_.empty(), states);
  }

  void write_worker_file(const std::filesystem::path& path, std::uint64_t epoch, std::uint64_t batch,
                         bool with_optimizer_state, const detail::ExchangeStates<T>& states) const {
    const State& s = local();
    const detail::RunPosition at{s.step, epoch, batch, s.engine.seed()};
    if (!with_optimizer_state) {
      detail::write_checkpoint<M>(path, s.engine.parameters(), nullptr, at, &states);
      return;
    }
    // The optimizer's buffers for the whole model: worker 0's, or assembled from the shards.
    std::vector<std::vector<T>> buffers;
    for (const auto& b : s.optimizer_buffers()) buffers.emplace_back(b.begin(), b.end());
    if (parameter_server) servers_.gather_optimizer_state(buffers);
    const std::vector<std::span<const T>> spans(buffers.begin(), buffers.end());
    detail::write_checkpoint<M>(path, s.engine.parameters(), &spans, at, &states);
  }

  /// Whether a worker can go on after a peer is lost (TrainerOptions::on_worker_loss): ring
  /// topologies over a transport that survives a lost peer, or servers over transport::Tcp.
  void check_worker_loss_supported() const {
    if constexpr (parameter_server) {
      if constexpr (Backend::in_process || !ContinuesWithoutLostPeers<endpoint_type>)
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
    } else if constexpr (!SurvivableEndpoint<endpoint_type>) {
      throw ConfigError("TrainerOptions::on_worker_loss = continue_with_survivors: the " + std::string(Backend::name) +
                        " transport cannot go on after a rank is lost (MPI without ULFM stops the job); use "
                        "transport::Tcp");
    }
  }

  /// Whether the workers can skip an update together (NonFiniteLoss::skip_update): they must all
  /// see the same gradient, which peer-to-peer policies that allreduce it in backward give.
  void check_skipping_supported() const {
    if (options_.max_consecutive_skips == 0)
      throw ConfigError("TrainerOptions::max_consecutive_skips is 0; with on_non_finite_loss = skip_update it must be "
                        "at least 1");
    if constexpr (parameter_server) {
      throw ConfigError("TrainerOptions::on_non_finite_loss = skip_update needs the workers to share one gradient "
                        "(a peer-to-peer policy such as policy::Synchronous<>); policy " + std::string(Policy::name) +
                        " sends each worker's to parameter servers, which apply them");
    } else if constexpr (!Policy::reduce_gradients_in_backward) {
      if (!Backend::in_process || options_.workers > 1)
        throw ConfigError("TrainerOptions::on_non_finite_loss = skip_update needs a policy whose workers allreduce "
                          "their gradients before updating (policy::Synchronous<>), not policy " +
                          std::string(Policy::name) + ", whose workers would decide apart");
    }
  }

  template <class E>
  void run_server(E& e, std::size_t workers, std::size_t index, const FitOptions& fit) {
    if constexpr (parameter_server) {
      auto& shard = servers_.get(index, options_.servers, local().engine.parameters(),
                                 [this] { return local().optimizer_buffers(); });
      shard.continue_without_lost_workers(detail::continues_without_lost_workers(options_.on_worker_loss, Policy::aggregate));
      shard.serve(e, workers, Policy::aggregate, Policy::staleness_bound, options_.optimizer, options_.schedule,
                  [&](std::uint64_t step) { return Servers::save(shard, index, options_.servers, step, fit, ledger_.failures); });
    } else {
      (void)e, (void)workers, (void)index, (void)fit;
    }
  }

  static void check_dataset(const data::Dataset<T>& d, const char* what) {
    detail::check_dataset<M>(d, std::string("Trainer::") + what);
  }

  TrainerOptions<M> options_;
  Policy policy_;
  typename Backend::options transport_;
  std::vector<std::unique_ptr<State>> workers_;
  Servers servers_;
  mutable std::mutex states_mutex_;
  detail::TrainerLedger<T> ledger_;
};

}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_TRAINER_HPP_INCLUDED
