// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_TRAINER_HPP_INCLUDED
#define FLOTILLA_PIPELINE_TRAINER_HPP_INCLUDED
// pipeline::Trainer<Model, Backend>: the whole training loop of a pipelined model in one call, as
// flotilla::Trainer has it for data parallelism.
//
//   pipeline::TrainerOptions<Model> o;            // optimizer, schedule, batch_size, seed as Trainer's,
//   o.micro_batches = 8;                          // and the pipeline's own settings
//   pipeline::Trainer<Model> t(pipeline::Plan::automatic<Net>(3), o);
//   History h = t.fit(train, &test, fit_options);   // flotilla::FitOptions
//   std::span<const float> w = t.parameters();     // the unsplit model's flat layout
//
// fit() runs every rank of a D x P job (layout.hpp): in-process, each rank on a thread of this
// process; over TCP or MPI, this process's rank (every process calls fit() with the same plan and
// options). Each rank builds a Runner for its stage and reads its replica's shard of every global
// batch from its own Loader, so every stage of a replica sees the same batches in the same order:
// with one replica a step is one worker's step of the unsplit model on the same batch (the Trainer
// with the same batch_size and seed), to float rounding.
//
// Reporting (progress, epoch summaries, the metrics file and the plot) is done by the rank that
// has the loss: the last stage of replica 0. Every rank returns the same History: the epoch's
// numbers are summed over the job. After fit(), parameters() holds the whole model's parameters,
// gathered from replica 0's stages, in the layout of flotilla::Trainer<Model>::parameters(), so an
// ordinary Trainer can load, evaluate or save them; setting them before fit() starts the stages
// from them. The optimizer state is gathered the same way, so save() writes the checkpoint
// flotilla::Trainer<Model>::save() would, and load() reads one that it wrote. Checkpoint sets
// (FitOptions::checkpoints) need no gathering: each stage's rank of replica 0 writes its slice.
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
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/model.hpp"
#include "flotilla/optim/schedule.hpp"
#include "flotilla/pipeline/layout.hpp"
#include "flotilla/pipeline/plan.hpp"
#include "flotilla/pipeline/runner.hpp"
#include "flotilla/pipeline/schedule.hpp"
#include "flotilla/pipeline/stage_network.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/detail/checkpoint_saving.hpp"
#include "flotilla/train/detail/dataset_check.hpp"
#include "flotilla/train/detail/divergence.hpp"
#include "flotilla/train/detail/epoch_metrics.hpp"
#include "flotilla/train/evaluation.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/detail/model_checkpoint.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/train/progress.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/training_options.hpp"
#include "flotilla/transport/in_process.hpp"

namespace flotilla::pipeline {

/// How a pipeline::Trainer is set up; the fields it shares with flotilla::TrainerOptions mean the same.
template <ModelType M>
struct TrainerOptions : flotilla::TrainingOptions<M> {
  /// Micro-batches per step (M) and their order.
  std::size_t micro_batches = 4;
  Schedule pipeline_schedule = Schedule::one_forward_one_backward;
  /// Pipeline replicas (D), data parallel; the job has plan.stages() * replicas ranks. Other
  /// backends than in-process take the job from the launcher; it must have that many ranks.
  std::size_t replicas = 1;
};

namespace detail {

/// What one rank of a pipeline measured over an epoch, by name: the loss and counts (on the last
/// stages, where they are known), steps and times add up over the job; the wall time and the
/// activation memory take the largest.
struct EpochMetrics : flotilla::detail::ReducedMetrics<EpochMetrics> {
  double loss_sum = 0, correct = 0, samples = 0, steps = 0;
  double compute_seconds = 0, wait_seconds = 0, send_seconds = 0, allreduce_seconds = 0, update_seconds = 0;
  double seconds = 0, peak_activation_bytes = 0;
  static constexpr std::array<double EpochMetrics::*, 9> summed_fields{
      &EpochMetrics::loss_sum,       &EpochMetrics::correct,           &EpochMetrics::samples,
      &EpochMetrics::steps,          &EpochMetrics::compute_seconds,   &EpochMetrics::wait_seconds,
      &EpochMetrics::send_seconds,   &EpochMetrics::allreduce_seconds, &EpochMetrics::update_seconds};
  static constexpr std::array<double EpochMetrics::*, 2> maximised_fields{&EpochMetrics::seconds,
                                                                          &EpochMetrics::peak_activation_bytes};
};

}  // namespace detail

template <class M, class Backend = transport::InProcess>
class Trainer {
  static_assert(ModelType<M>, "pipeline::Trainer<Model, Backend>: Model must be flotilla::Model<Net, Loss, Optimizer, T>");
  static_assert(TransportBackend<Backend>,
                "pipeline::Trainer<Model, Backend>: Backend is not a transport backend (see docs/concepts/transport.md); "
                "built-in: transport::InProcess, transport::Tcp, transport::Mpi");

 public:
  using model_type = M;
  using backend_type = Backend;
  using T = typename M::scalar_type;
  using scalar_type = T;
  using architecture = typename M::architecture;
  using optimizer_type = typename M::optimizer;
  using optimizer_state = typename optimizer_type::template state<T>;
  using endpoint_type = typename Backend::endpoint;
  using runner_type = Runner<M, endpoint_type>;
  static constexpr std::size_t parameter_count = M::parameter_count;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;

  explicit Trainer(Plan plan, TrainerOptions<M> options = {}, typename Backend::options transport = {})
      : plan_(std::move(plan)),
        options_(std::move(options)),
        transport_(std::move(transport)),
        params_(parameter_count),
        opt_(parameter_count) {
    if (plan_.depth() != architecture::depth)
      throw ConfigError("pipeline::Trainer: the plan covers " + std::to_string(plan_.depth()) + " layers, the model has " +
                        std::to_string(architecture::depth));
    options_.validate("pipeline::TrainerOptions");
    if (options_.micro_batches == 0) throw ConfigError("pipeline::TrainerOptions::micro_batches must be > 0");
    if (options_.replicas == 0) throw ConfigError("pipeline::TrainerOptions::replicas must be > 0");
    // The unsplit model's initial values, stage by stage (Runner gives each stage the same).
    for (std::size_t s = 0; s < plan_.stages(); ++s) {
      StageNetwork<architecture, T> net(plan_.first_layer(s), plan_.end_layer(s), 1);
      net.initialize(std::span<T>(params_).subspan(net.parameter_offset(), net.parameter_count()), options_.seed);
    }
  }

  // ---- training ---------------------------------------------------------------------------

  /// Trains for `fit.epochs` epochs over `train`, evaluating on `validation` after each epoch when
  /// given. Every rank of the job calls it. Returns one record per epoch, the same on every rank,
  /// also written to the metrics file when set, with a checkpoint after each epoch when
  /// fit.checkpoint_file is set (by rank 0).
  ///
  /// fit.checkpoints: checkpoint sets in a directory, one file per stage, each written by its rank
  /// of replica 0 (train/checkpoint_dir.hpp), every_steps updates, every_seconds (the ranks agree
  /// on the earliest clock: a one-value allreduce a step while it is set) and at the end; with
  /// `resume`, fit() starts from the newest complete set (resume_from()) and fit.epochs counts the
  /// whole run. A set is not saved when fit() leaves by an exception: the stage that failed cannot
  /// save its part, so the set would not be complete.
  ///
  /// fit.trace_file: a timeline of every rank (each forward and backward by micro-batch, each wait
  /// for a neighbour, each send, the replicas' allreduce, the update), where the schedule and its
  /// bubble can be seen. fit.step_log_file: a JSON line per rank and step with its stage, replica,
  /// times (compute, wait, send, allreduce, update) and traffic. In-process every rank writes to
  /// the one file; over processes each process writes its own, rank k's at the path + ".rank<k>".
  History fit(const data::Dataset<T>& train, const data::Dataset<T>* validation = nullptr, const FitOptions& fit = {}) {
    flotilla::detail::check_dataset<M>(train, "pipeline::Trainer::fit: training set");
    if (validation) flotilla::detail::check_dataset<M>(*validation, "pipeline::Trainer::fit: validation set");
    const std::size_t failures_before = checkpoint_failures_.size();
    const std::size_t epochs =
        flotilla::detail::prepare_checkpoint_sets(fit.checkpoints, fit.epochs, "pipeline::Trainer::fit", [&] {
          resume_from(fit.checkpoints.directory, fit.log);
          return epoch_;
        });
    Shared shared(*this, fit);
    shared.epochs = epochs;
    const std::size_t ranks = layout().ranks();
    stats_.assign(Backend::in_process ? ranks : 1, StageStats{});
    Backend::run(transport_, Backend::in_process ? ranks : 0,
                 [&](endpoint_type& e) { run_rank(e, train, validation, fit, shared); });
    flotilla::detail::write_fit_trace(shared.timeline, fit.trace_file, Backend::in_process, shared.rank);
    flotilla::detail::report_unsaved_sets(checkpoint_failures_, failures_before, fit.checkpoints, fit.log);
    return shared.history;
  }

  // ---- evaluation -------------------------------------------------------------------------

  /// Mean loss, accuracy and confusion matrix over the whole data set, through the pipeline with
  /// parameters(); the replicas share the samples. Every rank of the job calls it.
  Evaluation evaluate(const data::Dataset<T>& data) {
    flotilla::detail::check_dataset<M>(data, "pipeline::Trainer::evaluate: data set");
    flotilla::detail::EvaluationPart total;
    RunnerOptions ro = runner_options();
    ro.micro_batches = 1;
    ro.max_batch = options_.eval_batch_size;
    Backend::run(transport_, Backend::in_process ? layout().ranks() : 0, [&](endpoint_type& e) {
      runner_type runner(e, plan_, ro);
      load_stage(runner);
      const flotilla::detail::EvaluationPart part = evaluate_share(e, runner, data);
      if (owns_state(e)) total = part;
    });
    return flotilla::detail::to_evaluation<M>(total);
  }

  // ---- checkpoints ------------------------------------------------------------------------

  /// Writes what flotilla::Trainer<Model>::save() writes (parameters, optimizer state, step, seed,
  /// data position; the unsplit layout), atomically; either trainer can load() it.
  void save(const std::filesystem::path& path) const {
    const auto buffers = const_cast<optimizer_state&>(opt_).buffers();
    const std::vector<std::span<const T>> spans(buffers.begin(), buffers.end());
    flotilla::detail::write_checkpoint<M>(path, params_, &spans, {step_, epoch_, batch_in_epoch_, options_.seed});
  }

  /// Restores a checkpoint of this model and optimizer written by either trainer, seed included;
  /// nothing changes unless the whole checkpoint verifies and matches.
  void load(const std::filesystem::path& path) {
    flotilla::detail::LoadedCheckpoint<M> c = flotilla::detail::read_checkpoint<M>(path);
    params_ = std::move(c.parameters);
    opt_ = std::move(c.optimizer);
    step_ = c.at.step;
    epoch_ = c.at.epoch;
    batch_in_epoch_ = c.at.batch_in_epoch;
    // The seed keys the data order and the dropout masks: the run continues the saved one's.
    options_.seed = c.at.seed;
  }

  /// What resume_from() did: the step it resumed from (none: no complete set, nothing changed),
  /// the files it read, and every newer file or set it passed over, with the reason.
  using ResumeReport = checkpoint::ResumeReport;

  /// Restores the newest complete checkpoint set in `dir` that fit() saved for this plan: every
  /// stage's file must verify, be of this model and optimizer, and hold the stage of this plan's
  /// split (the same layers). The stages' slices make up parameters() and the optimizer state, and
  /// the set's position (step, epoch, batch, seed) is where the next fit() goes on. Each newer set
  /// passed over is reported on `log` and in the result. FitOptions::checkpoints.resume calls this
  /// at the start of fit().
  ResumeReport resume_from(const std::filesystem::path& dir, std::ostream* log = nullptr) {
    const std::size_t stages = plan_.stages();
    std::vector<std::string> parts;
    for (std::size_t s = 0; s < stages; ++s) parts.push_back(checkpoint::stage_part(s, stages));
    auto found = checkpoint::find_resume_point(dir, parts, [&](const std::string& part, const checkpoint::Reader& r) {
      check_stage_file(r, static_cast<std::size_t>(std::find(parts.begin(), parts.end(), part) - parts.begin()));
    });
    ResumeReport report = checkpoint::start_report(found, dir, log);
    if (!found.point) return report;
    // Put the slices together first: this trainer changes only when every stage agrees on the run's position.
    std::vector<T> params(parameter_count);
    optimizer_state opt(parameter_count);
    auto whole = opt.buffers();
    flotilla::detail::RunPosition at;
    for (std::size_t s = 0; s < stages; ++s) {
      const checkpoint::Reader& r = found.point->parts.at(parts[s]);
      const flotilla::detail::RunPosition here = flotilla::detail::read_position(r);
      if (s == 0) {
        at = here;
      } else if (here.epoch != at.epoch || here.batch_in_epoch != at.batch_in_epoch || here.seed != at.seed) {
        throw CheckpointError(r.source() + ": stage " + std::to_string(s) + " stands at epoch " + std::to_string(here.epoch) +
                              ", batch " + std::to_string(here.batch_in_epoch) + ", seed " + std::to_string(here.seed) +
                              ", stage 0 at epoch " + std::to_string(at.epoch) + ", batch " + std::to_string(at.batch_in_epoch) +
                              ", seed " + std::to_string(at.seed) + ": the set mixes files of different runs");
      }
      const auto [begin, count] = stage_parameters(s);
      r.array_into<T>("parameters", std::span<T>(params).subspan(begin, count));
      for (std::size_t i = 0; i < whole.size(); ++i) r.array_into<T>("optimizer." + std::to_string(i), whole[i].subspan(begin, count));
    }
    params_ = std::move(params);
    opt_ = std::move(opt);
    step_ = at.step;
    epoch_ = at.epoch;
    batch_in_epoch_ = at.batch_in_epoch;
    options_.seed = at.seed;  // the seed keys the data order and the dropout masks
    checkpoint::finish_report(report, dir, found.point->step, parts, epoch_, batch_in_epoch_, log);
    return report;
  }

  /// Checkpoint-set saves that failed: each message names the stage, the file and the reason.
  /// Training goes on after a failed save (a full disk first loses this stage's files older than
  /// the newest complete set); the sets saved before are kept. fit() reports a call's failures
  /// when it ends (CheckpointPolicy::fail_at_end_on_save_failure).
  std::vector<std::string> checkpoint_failures() const { return checkpoint_failures_.list(); }

  // ---- state ------------------------------------------------------------------------------

  /// The whole model's parameters, in the unsplit model's layout (after fit(): gathered from the
  /// stages). Written here, they are what the next fit() or evaluate() starts from.
  std::span<T> parameters() noexcept { return params_; }
  std::span<const T> parameters() const noexcept { return params_; }
  static constexpr std::span<const TensorInfo> tensors() noexcept { return M::network::tensors; }
  /// Updates taken so far.
  std::uint64_t step() const noexcept { return step_; }
  /// Epochs completed so far.
  std::uint64_t epoch() const noexcept { return epoch_; }
  const Plan& plan() const noexcept { return plan_; }
  Layout layout() const noexcept { return {plan_.stages(), options_.replicas}; }
  const TrainerOptions<M>& options() const noexcept { return options_; }
  /// Every epoch record of every fit() call on this trainer (what the plot shows).
  const History& history() const noexcept { return history_; }
  /// The learning rate of the next update.
  double learning_rate() const { return options_.learning_rate(step_); }
  /// Each rank's statistics over the last fit() call: in-process every rank's, by rank; otherwise
  /// this process's rank's alone.
  const std::vector<StageStats>& stage_stats() const noexcept { return stats_; }

 private:
  /// What the ranks of one fit() call share: where the call starts, what it returns, and where
  /// they record what they do.
  struct Shared {
    Shared(const Trainer& t, const FitOptions& fit)
        : start_epoch(t.epoch_),
          start_batch(t.batch_in_epoch_),
          start_step(t.step_),
          timeline(!fit.trace_file.empty()),
          step_log(fit.step_log_file, Backend::in_process, t.step_ > 0) {}
    std::uint64_t start_epoch = 0, start_batch = 0, start_step = 0;
    std::size_t epochs = 0;  // in this call
    History history;
    Timeline timeline;
    flotilla::detail::StepLog step_log;
    std::size_t rank = 0;  // over processes: this process's rank, whose files it writes
  };

  /// One rank writes this object's state: rank 0 in-process, every rank in its own process.
  static bool owns_state(const endpoint_type& e) { return !Backend::in_process || e.rank() == 0; }

  RunnerOptions runner_options() const {
    RunnerOptions ro;
    ro.schedule = options_.pipeline_schedule;
    ro.micro_batches = options_.micro_batches;
    ro.max_batch = options_.batch_size;
    ro.replicas = options_.replicas;
    ro.seed = options_.seed;
    return ro;
  }

  /// The stage starts from its slice of parameters() (read by every rank before any writes it:
  /// the gather that writes comes after every rank has contributed to it).
  void load_stage(runner_type& runner) const {
    const auto from = std::span<const T>(params_).subspan(runner.parameter_offset(), runner.parameters().size());
    std::copy(from.begin(), from.end(), runner.parameters().begin());
  }

  /// Loss sum, samples and confusion counts of the whole of `data`: replica d takes its share,
  /// counted on its last stage, and every rank gets the sum over the job.
  flotilla::detail::EvaluationPart evaluate_share(endpoint_type& e, runner_type& runner, const data::Dataset<T>& data) {
    const auto [first, last] = flotilla::detail::split_range(data.size(), runner.replicas(), runner.replica());
    const EvaluationCounts c = runner.evaluate(data, first, last - first);
    constexpr std::size_t k = classifier ? M::output_shape::size : 0;
    std::vector<double> v(2 + k * k, 0.0);
    v[0] = c.loss_sum;
    v[1] = static_cast<double>(c.samples);
    for (std::size_t i = 0; i < c.confusion.size(); ++i) v[2 + i] = static_cast<double>(c.confusion[i]);
    collective::allreduce_sum(e, std::span<double>(v), default_tags::trainer_metrics);
    flotilla::detail::EvaluationPart part;
    part.loss_sum = v[0];
    part.samples = static_cast<std::size_t>(v[1]);
    part.confusion.resize(k * k);
    for (std::size_t i = 0; i < k * k; ++i) part.confusion[i] = static_cast<std::uint64_t>(v[2 + i]);
    return part;
  }

  void run_rank(endpoint_type& e, const data::Dataset<T>& train, const data::Dataset<T>* validation, const FitOptions& fit,
                Shared& shared) {
    RunnerOptions ro = runner_options();
    if (shared.timeline.enabled()) ro.timeline = &shared.timeline;
    runner_type runner(e, plan_, ro);
    if (!Backend::in_process) shared.rank = e.rank();
    load_stage(runner);
    const std::size_t slot = Backend::in_process ? e.rank() : 0;
    // The stage's slice of the whole optimizer state (read, like parameters(), before any gather).
    optimizer_state state(runner.parameters().size());
    {
      auto mine = state.buffers();
      auto whole = opt_.buffers();
      for (std::size_t i = 0; i < mine.size(); ++i)
        std::copy_n(whole[i].begin() + static_cast<std::ptrdiff_t>(runner.parameter_offset()), mine[i].size(), mine[i].begin());
    }
    const bool reporter = runner.replica() == 0 && runner.last_stage();
    const bool owner = owns_state(e);

    data::LoaderOptions lo;
    lo.batch_size = options_.batch_size;
    lo.shuffle = options_.shuffle;
    lo.seed = options_.seed;
    lo.prefetch = options_.prefetch;
    lo.shard_index = runner.replica();
    lo.shard_count = runner.replicas();
    data::Loader<T> loader(train, lo);

    flotilla::detail::check_fit_outputs(
        fit, reporter, flotilla::detail::fit_trace_file(fit.trace_file, Backend::in_process, e.rank(), reporter));
    std::optional<MetricsLog> metrics;
    if (reporter && !fit.metrics_file.empty())
      metrics.emplace(fit.metrics_file, MetricsLog::Format::from_extension,
                      shared.start_step > 0 ? MetricsLog::OpenMode::append : MetricsLog::OpenMode::truncate);
    // The reporter's own copy of the run's records, for the plot: history_ is the owner's.
    History plotted = reporter ? history_ : History{};
    shared.step_log.open_rank(e.rank());

    flotilla::detail::DataPosition at{shared.start_epoch, shared.start_batch};
    std::uint64_t step = shared.start_step;
    std::uint64_t steps_this_call = 0;
    bool stop = false;
    StageStats whole;
    // Checkpoint sets: every rank takes part in the decision, replica 0's ranks write the files.
    const CheckpointPolicy& cp = fit.checkpoints;
    flotilla::detail::CheckpointClock checkpoint_clock(cp, step);
    // The position after the last completed update: what a set saved now records.
    flotilla::detail::RunPosition done{step, at.epoch, at.batch, options_.seed};
    auto save_set = [&] {
      if (runner.replica() == 0) save_stage(runner, state, done, fit);
      checkpoint_clock.mark_saved(step);
    };
    for (std::size_t epoch_index = 0; epoch_index < shared.epochs && !stop; ++epoch_index) {
      const auto started = std::chrono::steady_clock::now();
      runner.reset_stats();
      loader.start_epoch(at.epoch, at.batch);
      std::optional<ProgressBar> bar;
      if (reporter && fit.log)
        bar.emplace(*fit.log, loader.batches_per_epoch(), "epoch " + std::to_string(at.epoch + 1), fit.progress);
      double loss_sum = 0;
      std::size_t correct = 0, seen = 0, position = at.batch;
      while (const data::Batch<T>* batch = loader.next()) {
        const StageStats stats_before = runner.stats();
        const TrafficCounters traffic_before = e.counters();
        const StepResult r = runner.compute_gradients(*batch);
        // Only the last stages have a loss (samples > 0); a NaN there stops the job, and the other
        // stages with it (the transport ends a job one of whose ranks failed).
        if (r.samples > 0 && !std::isfinite(r.loss))
          throw flotilla::detail::divergence("stage " + std::to_string(runner.stage()) + " of replica " +
                                                 std::to_string(runner.replica()),
                                             r.loss, step + 1, at.epoch, position, loader.batches_per_epoch(),
                                             options_.learning_rate(step));
        runner.update(options_.optimizer, state,
                      options_.step_info(step));
        ++step;
        if (shared.step_log.enabled())
          write_step_log(shared.step_log, e.rank(), runner, step, stats_before, e.counters() - traffic_before);
        ++position;
        loss_sum += r.loss * static_cast<double>(r.samples);
        correct += r.correct;
        seen += r.samples;
        if (fit.max_steps && ++steps_this_call >= fit.max_steps) stop = true;
        // The bar shows the job's rate: every replica takes an equal share of each global batch.
        if (bar) flotilla::detail::show_running(*bar, position, seen * runner.replicas(), loss_sum, correct, seen, classifier);
        const flotilla::detail::DataPosition next = at.after_update(position, loader.batches_per_epoch());
        done = {step, next.epoch, next.batch, options_.seed};
        if (cp.enabled() && checkpoint_due(e, checkpoint_clock, step)) save_set();
        if (stop) break;
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      accumulate(whole, runner.stats());
      EpochRecord rec = epoch_record(e, runner, loss_sum, correct, seen, seconds, step, validation);
      at.end_epoch(stop && position < loader.batches_per_epoch(), position);
      rec.epoch = at.epoch;
      if (owner) {
        epoch_ = at.epoch;
        batch_in_epoch_ = at.batch;
        step_ = step;
        history_.push_back(rec);
        shared.history.push_back(rec);
      }
      if (!fit.checkpoint_file.empty()) {
        gather(e, runner, state);
        if (e.rank() == 0) save(fit.checkpoint_file);
      }
      if (reporter) {
        plotted.push_back(rec);
        if (bar) bar->finish(flotilla::detail::epoch_summary(rec));
        if (metrics) metrics->write(rec);
        if (!fit.plot_file.empty()) write_svg_plot(fit.plot_file, plotted, fit.plot_title);
      }
    }
    if (cp.enabled() && checkpoint_clock.due_at_exit(step)) save_set();
    stats_[slot] = whole;
    gather(e, runner, state);
  }

  /// Whether the job saves a set after update `step`. every_steps gives every rank the same
  /// answer; every_seconds reads each rank's clock, so the ranks take the earliest (the maximum of
  /// their flags) and all save together.
  static bool checkpoint_due(endpoint_type& e, const flotilla::detail::CheckpointClock& clock, std::uint64_t step) {
    if (clock.saved(step)) return false;
    if (clock.due_by_steps(step)) return true;
    if (!clock.timed()) return false;
    double due = clock.due_by_time() ? 1.0 : 0.0;
    collective::allreduce_max(e, std::span<double>(&due, 1), default_tags::trainer_metrics);
    return due > 0;
  }

  /// The parameters [offset, offset + count) of stage `s` in the whole model's flat buffer.
  std::pair<std::size_t, std::size_t> stage_parameters(std::size_t s) const {
    const StageNetwork<architecture, T> net(plan_.first_layer(s), plan_.end_layer(s), 1);
    return {net.parameter_offset(), net.parameter_count()};
  }

  /// Writes this stage's part of the set of `at.step` (its slice of the parameters and optimizer
  /// state, the run's position, the stage's layers) and rotates its older files. A failure is
  /// logged and kept (checkpoint_failures()), not thrown: training goes on, and that set stays
  /// incomplete.
  void save_stage(runner_type& runner, optimizer_state& state, const flotilla::detail::RunPosition& at, const FitOptions& fit) {
    const CheckpointPolicy& cp = fit.checkpoints;
    const std::size_t s = runner.stage();
    const std::string part = checkpoint::stage_part(s, runner.stages());
    flotilla::detail::save_set_file(cp, at.step, part, checkpoint::pipeline_parts(runner.stages()), "stage " + std::to_string(s),
                                    checkpoint_failures_, fit.log, [&] {
      checkpoint::Writer w;
      flotilla::detail::add_model_records<M>(w);
      flotilla::detail::add_position_records(w, at);
      w.add_u64("stage_index", s);
      w.add_u64("stage_count", runner.stages());
      w.add_u64("first_layer", plan_.first_layer(s));
      w.add_u64("end_layer", plan_.end_layer(s));
      w.add_u64("parameter_begin", runner.parameter_offset());
      w.add_u64("parameter_end", runner.parameter_offset() + runner.parameters().size());
      w.add_array<T>("parameters", std::span<const T>(runner.parameters()));
      auto buffers = state.buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i) w.add_array<T>("optimizer." + std::to_string(i), std::span<const T>(buffers[i]));
      w.commit(checkpoint::set_file(cp.directory, at.step, part));
    });
  }

  /// A stage file must be stage `s` of this plan (the same layers, the same slice) of this model
  /// and optimizer, and hold the step its name says.
  void check_stage_file(const checkpoint::Reader& r, std::size_t s) const {
    flotilla::detail::check_checkpoint<M>(r);
    const std::size_t stages = plan_.stages();
    const std::uint64_t index = r.u64("stage_index"), count = r.u64("stage_count");
    const std::uint64_t first = r.u64("first_layer"), end = r.u64("end_layer");
    if (index != s || count != stages || first != plan_.first_layer(s) || end != plan_.end_layer(s))
      throw CheckpointError(r.source() + ": holds stage " + std::to_string(index) + " of " + std::to_string(count) + " (layers " +
                            std::to_string(first) + ".." + std::to_string(end) + "), this plan's stage " + std::to_string(s) +
                            " of " + std::to_string(stages) + " has layers " + std::to_string(plan_.first_layer(s)) + ".." +
                            std::to_string(plan_.end_layer(s)));
    const auto [begin, size] = stage_parameters(s);
    if (r.u64("parameter_begin") != begin || r.u64("parameter_end") != begin + size || r.count("parameters") != size)
      throw CheckpointError(r.source() + ": stage " + std::to_string(s) + "'s parameters should be " + std::to_string(begin) +
                            ".." + std::to_string(begin + size) + ", the file has " + std::to_string(r.u64("parameter_begin")) +
                            ".." + std::to_string(r.u64("parameter_end")) + " (" + std::to_string(r.count("parameters")) + " values)");
    const auto named = checkpoint::detail::parse_set_name(std::filesystem::path(r.source()).filename().string());
    if (named && named->first != r.u64("step"))
      throw CheckpointError(r.source() + ": the file holds step " + std::to_string(r.u64("step")) + ", its name says " +
                            std::to_string(named->first));
  }

  /// parameters() and the optimizer state = replica 0's stages' slices put together, in every
  /// rank's process. Each rank adds its slice (replica 0) or nothing to zeros, and a sum of one
  /// value and zeros is exact. The owner writes them; every rank has read them before it gets here.
  void gather(endpoint_type& e, runner_type& runner, optimizer_state& state) {
    auto state_buffers = state.buffers();
    std::vector<std::span<const T>> slices{std::span<const T>(runner.parameters())};
    std::vector<std::span<T>> targets{std::span<T>(params_)};
    auto whole = opt_.buffers();
    for (std::size_t i = 0; i < state_buffers.size(); ++i) {
      slices.emplace_back(state_buffers[i]);
      targets.push_back(whole[i]);
    }
    std::vector<T> all(parameter_count);
    for (std::size_t k = 0; k < slices.size(); ++k) {
      std::fill(all.begin(), all.end(), T(0));
      if (runner.replica() == 0)
        std::copy(slices[k].begin(), slices[k].end(), all.begin() + static_cast<std::ptrdiff_t>(runner.parameter_offset()));
      collective::RingOptions ro;
      ro.tag = default_tags::trainer_gather;
      collective::ring_allreduce(e, std::span<T>(all), ro);
      if (owns_state(e)) std::copy(all.begin(), all.end(), targets[k].begin());
    }
  }

  /// One line of the step log: what rank `rank` did for update `step` (1 first, as in the
  /// data-parallel Trainer's log): the runner's statistics since `before`, and the step's traffic.
  static void write_step_log(flotilla::detail::StepLog& out, std::size_t rank, const runner_type& runner, std::uint64_t step,
                             const StageStats& before, const TrafficCounters& traffic) {
    const StageStats& now = runner.stats();
    char timing[320];
    std::snprintf(timing, sizeof timing,
                  "{\"rank\":%zu,\"stage\":%zu,\"replica\":%zu,\"step\":%llu,\"compute_ms\":%.4f,\"wait_ms\":%.4f,"
                  "\"send_ms\":%.4f,\"allreduce_ms\":%.4f,\"update_ms\":%.4f",
                  rank, runner.stage(), runner.replica(), static_cast<unsigned long long>(step),
                  1e3 * (now.compute_seconds - before.compute_seconds), 1e3 * (now.wait_seconds - before.wait_seconds),
                  1e3 * (now.send_seconds - before.send_seconds), 1e3 * (now.allreduce_seconds - before.allreduce_seconds),
                  1e3 * (now.update_seconds - before.update_seconds));
    std::string line = timing;
    flotilla::detail::append_traffic_fields(line, traffic);
    line += "}";
    out.write(std::move(line));
  }

  static void accumulate(StageStats& into, const StageStats& s) {
    into.steps += s.steps;
    into.compute_seconds += s.compute_seconds;
    into.wait_seconds += s.wait_seconds;
    into.send_seconds += s.send_seconds;
    into.allreduce_seconds += s.allreduce_seconds;
    into.update_seconds += s.update_seconds;
    into.step_seconds += s.step_seconds;
    into.peak_activation_bytes = std::max(into.peak_activation_bytes, s.peak_activation_bytes);
    into.allocated_activation_bytes = s.allocated_activation_bytes;
  }

  /// The epoch's record, summed (loss, samples, times) or maximised (wall time, memory) over the
  /// job; the loss and accuracy count on the last stages only, where they are known.
  EpochRecord epoch_record(endpoint_type& e, runner_type& runner, double loss_sum, std::size_t correct, std::size_t seen,
                           double seconds, std::uint64_t step, const data::Dataset<T>* validation) {
    const StageStats& st = runner.stats();
    const bool counts = runner.last_stage();
    detail::EpochMetrics m;
    m.loss_sum = counts ? loss_sum : 0.0;
    m.correct = counts ? static_cast<double>(correct) : 0.0;
    m.samples = counts ? static_cast<double>(seen) : 0.0;
    m.steps = static_cast<double>(st.steps);
    m.compute_seconds = st.compute_seconds;
    m.wait_seconds = st.wait_seconds;
    m.send_seconds = st.send_seconds;
    m.allreduce_seconds = st.allreduce_seconds;
    m.update_seconds = st.update_seconds;
    m.seconds = seconds;
    m.peak_activation_bytes = static_cast<double>(st.peak_activation_bytes);
    m.reduce([&](std::span<double> sums, std::span<double> maxima) {
      collective::allreduce_sum(e, sums, default_tags::trainer_metrics);
      collective::allreduce_max(e, maxima, default_tags::trainer_metrics);
    });
    EpochRecord rec;
    rec.step = step;
    const double samples = std::max(m.samples, 1.0);
    rec.train_loss = m.loss_sum / samples;
    rec.train_accuracy = classifier ? m.correct / samples : std::numeric_limits<double>::quiet_NaN();
    rec.seconds = m.seconds;
    rec.samples_per_second = m.samples / std::max(m.seconds, 1e-9);
    rec.learning_rate = options_.learning_rate(step);
    if (validation) {
      const Evaluation ev = flotilla::detail::to_evaluation<M>(evaluate_share(e, runner, *validation));
      rec.val_loss = ev.loss;
      if (classifier) rec.val_accuracy = ev.accuracy;
    }
    const double rank_steps = std::max(m.steps, 1.0);
    rec.extra = {{"stages", static_cast<double>(runner.stages())},
                 {"replicas", static_cast<double>(runner.replicas())},
                 {"micro_batches", static_cast<double>(options_.micro_batches)},
                 {"compute_ms_per_step", 1e3 * m.compute_seconds / rank_steps},
                 {"wait_ms_per_step", 1e3 * m.wait_seconds / rank_steps},
                 {"send_ms_per_step", 1e3 * m.send_seconds / rank_steps},
                 {"allreduce_ms_per_step", 1e3 * m.allreduce_seconds / rank_steps},
                 {"update_ms_per_step", 1e3 * m.update_seconds / rank_steps},
                 {"peak_activation_bytes", m.peak_activation_bytes}};
    return rec;
  }

  Plan plan_;
  TrainerOptions<M> options_;
  typename Backend::options transport_;
  std::vector<T> params_;
  /// The whole model's optimizer state, gathered from the stages after fit() as params_ is.
  optimizer_state opt_;
  std::vector<StageStats> stats_;
  History history_;
  flotilla::detail::CheckpointFailures checkpoint_failures_;
  std::uint64_t epoch_ = 0, batch_in_epoch_ = 0, step_ = 0;
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_TRAINER_HPP_INCLUDED
