// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_WORKERLOOP_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_WORKERLOOP_HPP_INCLUDED
// One worker rank's part of Trainer::fit(): its epochs and steps, the epoch's metrics and
// evaluation, checkpoint sets, and, when a peer is lost, going on with the survivors.
//
// A step goes one way through the worker's gradient path (train/detail/peer_path.hpp on a ring,
// train/detail/server_path.hpp to parameter servers):
//
//   engine: forward, backward ──(a bucket is final)──> ReadyRunner ──> the policy's exchange
//   after backward: the path's update ──> policy.step(ctx) and the optimizer (ring), or the pull
//
// Each worker trains on its contiguous part of every global batch; every worker draws the same
// data order from the seed, so W workers of batch B see the samples one worker of batch W*B would.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/core/log.hpp"
#include "flotilla/collective/allreduce_small.hpp"
#include "flotilla/collective/broadcast.hpp"
#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/collective/tree_allreduce.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/model.hpp"
#include "flotilla/train/checkpoint_dir.hpp"
#include "flotilla/train/detail/checkpoint_saving.hpp"
#include "flotilla/train/detail/divergence.hpp"
#include "flotilla/train/detail/epoch_metrics.hpp"
#include "flotilla/train/evaluation.hpp"
#include "flotilla/train/fit_options.hpp"
#include "flotilla/train/history.hpp"
#include "flotilla/train/detail/live_workers.hpp"
#include "flotilla/train/metrics_log.hpp"
#include "flotilla/train/detail/model_checkpoint.hpp"
#include "flotilla/train/overlap.hpp"
#include "flotilla/train/detail/peer_path.hpp"
#include "flotilla/train/plot.hpp"
#include "flotilla/train/progress.hpp"
#include "flotilla/train/detail/ring_recovery.hpp"
#include "flotilla/train/detail/server_path.hpp"
#include "flotilla/train/detail/survivors.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/train/trainer_options.hpp"

namespace flotilla::detail {

/// What the ranks of one fit() call share in this process.
struct FitShared {
  FitShared(const FitOptions& f, bool in_process, bool resumed)
      : timeline(!f.trace_file.empty()), step_log(f.step_log_file, in_process, resumed) {}
  Timeline timeline;
  History history;
  StepLog step_log;
  std::optional<std::size_t> worker_rank;  // a process of one worker: its rank
  std::uint64_t start_epoch = 0, start_batch = 0;
  std::size_t epochs = 0;  // to run in this call
};

/// What a Trainer keeps between fit() calls and its workers report into (the position and the
/// records by the worker that owns them: worker 0 in-process), and how it writes its files.
template <class T>
struct TrainerLedger {
  History history;                      ///< every epoch record of every fit() call
  std::vector<StepCounters> counters;   ///< worker 0's steps in the last fit() call
  std::uint64_t epoch = 0, batch_in_epoch = 0;
  CheckpointFailures failures;
  /// The workers' exchange states of a loaded checkpoint, for each worker to take when it starts.
  ExchangeStates<T> loaded_exchange;
  /// Writes worker 0's checkpoint file at a position (with the optimizer's state or not), with
  /// the workers' exchange states.
  std::function<void(const std::filesystem::path&, std::uint64_t epoch, std::uint64_t batch, bool with_optimizer,
                     const ExchangeStates<T>&)>
      write;
  /// Trainer::save(), with the workers' exchange states.
  std::function<void(const std::filesystem::path&, const ExchangeStates<T>&)> save;
};

template <class M, class Policy, class Codec, class E, class State, bool InProcess>
class WorkerLoop {
 public:
  using T = typename M::scalar_type;
  static constexpr bool parameter_server = ParameterServerPolicy<Policy>;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;
  /// Whether the workers' gradients are summed for one update (servers that aggregate, rings that
  /// reduce in backward): workers in step. Otherwise each update is one worker's own (asynchronous
  /// servers; a policy that combines gradients itself averages them).
  static constexpr bool summed_over_workers = [] {
    if constexpr (parameter_server) {
      return Policy::aggregate;
    } else {
      return Policy::reduce_gradients_in_backward || ReproduciblePolicy<Policy>;
    }
  }();
  static constexpr std::size_t micro_batches = policy_micro_batches<Policy>;
  /// Virtual shards summed in a fixed tree order (policy::Reproducible): see step().
  static constexpr bool reproducible = ReproduciblePolicy<Policy>;
  using Group = worker_group_t<E, parameter_server>;
  using Path = std::conditional_t<parameter_server, ServerPath<M, Policy, Codec, E, State>,
                                  PeerPath<M, Policy, Codec, Group, State>>;
  /// Ring workers over a transport that survives a lost peer can go on without it.
  static constexpr bool survives_worker_loss = !parameter_server && SurvivableEndpoint<E>;
  /// Ring workers whose exchange carries state hand it to worker 0 for each checkpoint, so every
  /// worker takes part in each save. (Parameter-server workers are not in step with each other:
  /// their sets keep worker 0's state alone.)
  static constexpr bool gathers_exchange_state = State::stateful_exchange && !parameter_server;

  WorkerLoop(const TrainerOptions<M>& options, Policy& policy, E& e, State& s, std::size_t workers,
             const data::Dataset<T>& train, const data::Dataset<T>* validation, const FitOptions& fit, FitShared& shared,
             TrainerLedger<T>& ledger)
      : options_(options), policy_(policy), e_(e), s_(s), workers_(workers), train_(train), validation_(validation),
        fit_(fit), shared_(shared), ledger_(ledger), w_(e.rank()), reporter_(w_ == 0),
        group_(e, all_workers(workers), protocol_tags::group_barrier) {}

  void run() {
    // The statistics' way to the other workers refers to this loop's group: it ends with the loop.
    struct ForgetGroup {
      State& s;
      ~ForgetGroup() {
        if constexpr (requires { s.engine.set_statistics_across_workers(nullptr); }) s.engine.set_statistics_across_workers(nullptr);
      }
    } forget{s_};
    if (!InProcess) shared_.worker_rank = w_;
    if (!start()) return;
    check_fit_outputs(fit_, reporter_, fit_trace_file(fit_.trace_file, InProcess, w_, reporter_));
    if (reporter_ && !fit_.metrics_file.empty())
      metrics_.emplace(fit_.metrics_file, MetricsLog::Format::from_extension,
                       s_.step > 0 ? MetricsLog::OpenMode::append : MetricsLog::OpenMode::truncate);
    shared_.step_log.open_rank(w_);
    if (reporter_) ledger_.counters.clear();
    if constexpr (survives_worker_loss)
      if (options_.on_worker_loss == WorkerLoss::continue_with_survivors) recovery_.emplace(group_);
    try {
      for (std::size_t i = 0; i < epochs_to_run_ && !stop_; ++i) epoch();
      // No survivor leaves while another may still need it: they check in, and when one was lost
      // meanwhile, those still training take the state of those that finished.
      if (recovery_)
        while (survive(std::nullopt, "the end of training")) {
        }
      if (takes_part_in_sets() && clock_->due_at_exit(s_.step)) save_set();
    } catch (...) {
      save_before_stopping();
      throw;
    }
    if constexpr (parameter_server) path_->finish();
  }

 private:
  static std::vector<std::size_t> all_workers(std::size_t workers) {
    std::vector<std::size_t> members(workers);
    std::iota(members.begin(), members.end(), std::size_t{0});
    return members;
  }

  /// Normalisation statistics over the global batch (SyncBatchNorm) are summed over the workers'
  /// group. Only workers in step, whose gradients are summed for one update, can meet at every
  /// layer: under any other policy such a layer stops training with an error that says so.
  void share_normalization_statistics() {
    if constexpr (requires { s_.engine.set_statistics_across_workers(nullptr); }) {
      if (workers_ == 1) {
        s_.engine.set_statistics_across_workers(nullptr);
        return;
      }
      if (!summed_over_workers) {
        s_.engine.set_statistics_across_workers([](std::span<double>) {
          throw ConfigError("a normalisation layer with statistics over the global batch (SyncBatchNorm2D, "
                            "SyncBatchNorm1D) needs workers that update in step (policy::Synchronous<>, "
                            "policy::Synchronous<topology::ParameterServer>), not policy " +
                            std::string(Policy::name) + ": use BatchNorm2D / BatchNorm1D (each worker's batch)");
        });
        return;
      }
      s_.engine.set_statistics_across_workers(
          [this](std::span<double> values) { collective::allreduce_sum(group_, values, protocol_tags::normalization_statistics); });
    }
  }

  /// Every worker starts from worker 0's state (in case only rank 0 loaded a checkpoint): on a
  /// ring by broadcast, with servers by their hello. Then the data. False: nothing left to do (a
  /// rejoining worker whose job is finishing).
  bool start() {
    bool rejoining = false;
    if constexpr (parameter_server && Rejoinable<E>) rejoining = e_.rejoined();
    if constexpr (parameter_server) {
      path_.emplace(options_, e_, s_, shared_.timeline, workers_, fit_.log, rejoining);
    } else {
      if (workers_ > 1) {
        const Tag tag = protocol_tags::broadcast;
        collective::broadcast(group_, s_.engine.parameters(), 0, tag);
        s_.engine.optimizer_state_to_host(s_.opt);
        for (auto b : s_.opt.buffers()) collective::broadcast(group_, b, 0, tag);
        s_.engine.optimizer_state_changed();
        std::uint64_t step = s_.step;
        collective::broadcast(group_, std::span<std::uint64_t>(&step, 1), 0, tag);
        s_.step = step;
      }
      path_.emplace(options_, policy_, group_, s_, shared_.timeline, w_, workers_, overlaps());
    }
    share_normalization_statistics();
    lo_.batch_size = options_.batch_size;
    lo_.shuffle = options_.shuffle;
    lo_.seed = options_.seed;
    lo_.prefetch = options_.prefetch;
    lo_.shard_index = w_;
    lo_.shard_count = workers_;
    if constexpr (reproducible) {
      if (policy_.shard_samples == 0 || options_.batch_size % policy_.shard_samples != 0)
        throw ConfigError("policy " + std::string(Policy::name) + ": batch_size (" + std::to_string(options_.batch_size) +
                          ") must be a multiple of shard_samples (" + std::to_string(policy_.shard_samples) +
                          "), so that no virtual shard straddles two workers");
      lo_.unit_size = policy_.shard_samples;
    }
    loader_.emplace(train_, lo_);
    at_ = DataPosition{shared_.start_epoch, shared_.start_batch};
    epochs_to_run_ = shared_.epochs;
    if constexpr (parameter_server) {
      if (rejoining && !rejoin()) return false;
      path_->start(overlaps());
    }
    // A loaded checkpoint's exchange state: each worker its own (by its rank).
    if (!ledger_.loaded_exchange.empty())
      s_.restore_exchange(group_.rank() < ledger_.loaded_exchange.size() ? ledger_.loaded_exchange[group_.rank()]
                                                                        : std::vector<std::vector<T>>{});
    // From the step this worker starts at, after the broadcast or the rejoin.
    clock_.emplace(fit_.checkpoints, s_.step);
    done_step_ = s_.step;
    done_epoch_ = at_.epoch;
    done_batch_ = at_.batch;
    return true;
  }

  /// A worker process that was lost and started again takes up the running job where the servers
  /// are (TcpOptions::rejoin).
  bool rejoin() {
    const std::uint64_t per_epoch = loader_->batches_per_epoch();
    const auto point = path_->client().rejoin(e_, per_epoch, s_.engine.parameters());
    if (!point) {
      flotilla::detail::log_to(fit_.log, LogLevel::info, "worker " + std::to_string(w_), "the job is finishing, nothing left to rejoin");
      return false;
    }
    s_.step = point->position;
    path_->live().rejoined(e_);
    const DataPosition rejoined_at{point->position / per_epoch, point->position % per_epoch};
    // The epochs of this call that the others are still to finish, from the one they are in.
    const std::uint64_t behind = rejoined_at.epoch - std::min(rejoined_at.epoch, at_.epoch);
    epochs_to_run_ = shared_.epochs > behind ? static_cast<std::size_t>(shared_.epochs - behind) : 0;
    at_ = rejoined_at;
    flotilla::detail::log_to(fit_.log, LogLevel::info, "",
                             "worker " + std::to_string(w_) + " rejoined the job at epoch " + std::to_string(rejoined_at.epoch + 1) +
                                 ", batch " + std::to_string(rejoined_at.batch) + " (step " + std::to_string(point->position) +
                                 ", reduction round " + std::to_string(point->round) + ")");
    return true;
  }

  void epoch() {
    const auto started = std::chrono::steady_clock::now();
    loader_->start_epoch(at_.epoch, at_.batch);
    std::optional<ProgressBar> bar;
    if (reporter_ && fit_.log)
      bar.emplace(*fit_.log, loader_->batches_per_epoch(), "epoch " + std::to_string(at_.epoch + 1), fit_.progress);
    double loss_sum = 0;
    std::size_t correct = 0, seen = 0, micro = 0, position = at_.batch;
    CounterTotals totals;
    StepCounters counters;
    TrafficCounters before = e_.counters();
    const std::string update_op = "the gradient allreduce";
    while (const data::Batch<T>* batch = loader_->next()) {
      // Micro-batches of one update: K, or what is left of the epoch.
      const std::size_t remaining = loader_->batches_per_epoch() - (batch->index - micro);
      const std::size_t group_size = std::min(micro_batches, remaining);
      const bool last = micro + 1 == group_size;
      StepResult r;
      const std::uint64_t update = s_.step + 1;  // the update this batch is part of
      try {
        r = step(*batch, micro, group_size, last, counters);
      } catch (const PeerLostError& x) {
        // The survivors redo the interrupted update from the furthest one's state, re-sharded.
        const std::optional<SurvivorPosition> back = survive(x.peer(), update_op);
        micro = 0;
        if (back && back->epoch > at_.epoch) {  // it finished this epoch's updates
          position = loader_->batches_per_epoch();
          adopted_ = back->record;
          done_epoch_ = back->epoch;
          done_batch_ = 0;
          break;
        }
        position = back ? back->samples / (options_.batch_size * group_.size()) : done_batch_;
        done_batch_ = position;
        loader_->start_epoch(at_.epoch, position);
        if (stop_) break;
        continue;
      }
      // Every worker of a synchronous job sees a non-finite loss by the next update: the exchanged
      // gradients carry it to all.
      const bool skipping = options_.on_non_finite_loss == NonFiniteLoss::skip_update;
      if (!std::isfinite(r.loss) && !skipping)
        throw divergence("worker " + std::to_string(w_), r.loss, update, at_.epoch, position,
                         loader_->batches_per_epoch(), options_.learning_rate(update - 1));
      if constexpr (!parameter_server) {
        if (last && path_->skipped()) {
          skipped_update(update, position, r.loss);
        } else if (last) {
          skipped_in_a_row_ = 0;
        }
      }
      if (std::isfinite(r.loss)) {  // a batch skipped for its loss has no place in the epoch's means
        loss_sum += r.loss * static_cast<double>(r.samples);
        correct += r.correct;
        seen += r.samples;
      }
      ++position;
      micro = last ? 0 : micro + 1;
      if (last) {
        const TrafficCounters now = e_.counters();
        counters.traffic = now - before;
        before = now;
        counters.step = s_.step;
        totals.add(counters);
        if (reporter_) ledger_.counters.push_back(counters);
        if (shared_.step_log.enabled()) write_step_log(counters);
        if constexpr (parameter_server) path_->live().watch(e_);
        counters = {};
        if (fit_.max_steps && ++steps_this_call_ >= fit_.max_steps) stop_ = true;
        const DataPosition done = at_.after_update(position, loader_->batches_per_epoch());
        done_step_ = s_.step;
        done_epoch_ = done.epoch;
        done_batch_ = done.batch;
        if (set_due()) save_set();
      }
      // The bar shows the job's rate: every worker takes an equal share of each global batch.
      if (bar) show_running(*bar, position, seen * group_.size(), loss_sum, correct, seen, classifier);
      if (stop_ && last) break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EpochRecord rec;
    while (!adopted_) {
      try {
        rec = epoch_record(EpochMetrics::of(loss_sum, correct, seen, seconds, totals));
        break;
      } catch (const PeerLostError& x) {
        const std::optional<SurvivorPosition> back = survive(x.peer(), "the epoch's metrics");
        if (back) {
          adopted_ = back->record;
          position = back->epoch > at_.epoch ? loader_->batches_per_epoch()
                                             : back->samples / (options_.batch_size * group_.size());
        }
      }
    }
    if (adopted_) rec = *std::exchange(adopted_, std::nullopt);
    ++records_;
    at_.end_epoch(stop_ && position < loader_->batches_per_epoch(), position);
    rec.epoch = at_.epoch;
    if (options_.on_non_finite_loss == NonFiniteLoss::skip_update)
      rec.extra.emplace_back("skipped_updates", static_cast<double>(std::exchange(skipped_this_epoch_, 0)));
    report(rec, bar);
  }

  /// An update skipped for its gradient (NonFiniteLoss::skip_update): counted, logged by the
  /// reporting worker, and the end of training once too many come in a row.
  void skipped_update(std::uint64_t update, std::size_t position, double loss) {
    ++s_.skipped_updates;
    ++skipped_this_epoch_;
    ++skipped_in_a_row_;
    if (reporter_)
      flotilla::detail::log_to(fit_.log, LogLevel::warning, "worker " + std::to_string(w_),
                               "skipped update " + std::to_string(update) + " (epoch " + std::to_string(at_.epoch + 1) +
                                   ", batch " + std::to_string(position + 1) + " of " +
                                   std::to_string(loader_->batches_per_epoch()) + "): its gradient is not finite" +
                                   (std::isfinite(loss) ? "" : " (this worker's loss was not finite)") + "; " +
                                   std::to_string(s_.skipped_updates) + " skipped so far");
    if (skipped_in_a_row_ >= options_.max_consecutive_skips)
      throw divergence_after_skips("worker " + std::to_string(w_), skipped_in_a_row_, update, at_.epoch,
                                   options_.learning_rate(update - 1));
  }

  /// One micro-batch: gradients, and on the last micro-batch of an update, the exchange and the
  /// update.
  StepResult step(const data::Batch<T>& batch, std::size_t micro, std::size_t group_size, bool last,
                  StepCounters& counters) {
    // Sum of scaled gradients = mean over the update's samples: of all workers' when they are
    // summed for the update, else of this worker's own.
    const std::size_t denominator = summed_over_workers && batch.global_size ? batch.global_size : batch.size();
    const T scale = denominator ? T(1) / static_cast<T>(denominator * group_size) : T(0);
    ReadyRunner* runner = path_->runner();
    const bool communicates = last && runner != nullptr;
    // A reproducible policy: the global batch's virtual shards, of which this worker holds the
    // leaves SumTree::leaves_of(rank, workers) (the loader's unit_size made them its part).
    [[maybe_unused]] const collective::SumTree tree = [&] {
      if constexpr (reproducible) {
        return collective::SumTree((denominator + policy_.shard_samples - 1) / policy_.shard_samples);
      } else {
        return collective::SumTree(0);
      }
    }();
    Timeline& timeline = shared_.timeline;
    const auto t0 = Timeline::clock::now();
    if (communicates) runner->start(M::parameter_count);
    const StepResult r = [&] {
      if constexpr (reproducible) {
        return s_.engine.compute_tree_gradients(batch, policy_.shard_samples, tree,
                                                tree.leaves_of(group_.rank(), group_.size()).begin, scale);
      } else {
        return communicates && runner->background()
                   ? s_.engine.compute_gradients(batch, scale, micro > 0, [runner](std::size_t offset) { runner->ready(offset); })
                   : s_.engine.compute_gradients(batch, scale, micro > 0);
      }
    }();
    const auto t1 = Timeline::clock::now();
    timeline.record("forward+backward", "compute", w_, 0, t0, t1);
    const double compute = std::chrono::duration<double>(t1 - t0).count();
    counters.compute_seconds += compute;
    if (w_ == options_.straggler.worker && options_.straggler.factor > 1)
      std::this_thread::sleep_for(std::chrono::duration<double>(compute * (options_.straggler.factor - 1)));
    if (!last) return r;

    const auto t2 = Timeline::clock::now();
    if constexpr (reproducible) {
      // The shards added in the tree's order over every worker, after backward.
      collective::tree_allreduce(group_, tree, s_.engine.tree_nodes(), s_.engine.gradients());
      const auto t3 = Timeline::clock::now();
      timeline.record("tree sum", "communication", w_, 0, t2, t3);
      counters.exposed_comm_seconds += std::chrono::duration<double>(t3 - t2).count();
    }
    if (communicates) counters.exposed_comm_seconds += runner->finish();
    if (communicates) timeline.record("wait for communication", "wait", w_, 0, t2, Timeline::clock::now());
    if constexpr (parameter_server) {
      counters.exposed_comm_seconds += path_->update(counters);  // the pull: waiting for the servers
    } else {
      counters.update_seconds += path_->update();
    }
    return r;
  }

  /// The epoch's record, with every number summed or maximised over the workers (parameter
  /// servers: over the workers still training, through server 0).
  EpochRecord epoch_record(EpochMetrics m) {
    const std::size_t workers = group_.size();
    if (workers > 1) {
      m.reduce([&](std::span<double> sums, std::span<double> maxima) {
        if constexpr (parameter_server) {
          reduce_epoch_metrics(group_.endpoint(), path_->client(), path_->live(), sums, maxima);
        } else {
          collective::allreduce_sum(group_, sums, protocol_tags::metrics);
          collective::allreduce_max(group_, maxima, protocol_tags::metrics);
        }
      });
    }
    std::size_t contributors = workers;
    if constexpr (parameter_server) contributors = path_->live().members().size();
    EpochRecord rec;
    rec.step = s_.step;
    m.fill(rec, classifier, contributors);
    rec.learning_rate = options_.learning_rate(s_.step);
    if (validation_) {
      const Evaluation ev = to_evaluation<M>(evaluate_share(workers));
      rec.val_loss = ev.loss;
      if (classifier) rec.val_accuracy = ev.accuracy;
    }
    return rec;
  }

  /// The validation set evaluated by the workers together, each on its share.
  EvaluationPart evaluate_share(std::size_t workers) {
    const data::Dataset<T>& validation = *validation_;
    if constexpr (parameter_server) {
      if (workers > 1)
        return reduce_evaluation(group_.endpoint(), path_->client(), path_->live(), validation.size(),
                                 [&](std::size_t first, std::size_t count) { return s_.engine.evaluate(validation, first, count); });
    }
    const auto [first, last] = split_range(validation.size(), workers, group_.rank());
    EvaluationPart part = s_.engine.evaluate(validation, first, last - first);
    if (workers > 1) {
      std::vector<double> v(2 + part.confusion.size());
      v[0] = part.loss_sum;
      v[1] = static_cast<double>(part.samples);
      for (std::size_t i = 0; i < part.confusion.size(); ++i) v[2 + i] = static_cast<double>(part.confusion[i]);
      collective::allreduce_sum(group_, std::span<double>(v), protocol_tags::metrics);
      part.loss_sum = v[0];
      part.samples = static_cast<std::size_t>(v[1]);
      for (std::size_t i = 0; i < part.confusion.size(); ++i) part.confusion[i] = static_cast<std::uint64_t>(v[2 + i]);
    }
    return part;
  }

  /// The end of an epoch: the records, the reporter's outputs, and the per-epoch checkpoint file.
  void report(const EpochRecord& rec, std::optional<ProgressBar>& bar) {
    // Worker 0 in-process, and every worker out of process, owns this process's position.
    if (reporter_ || !InProcess) {
      ledger_.epoch = at_.epoch;
      ledger_.batch_in_epoch = at_.batch;
      ledger_.history.push_back(rec);
      shared_.history.push_back(rec);
    }
    if (reporter_) {
      if (bar) bar->finish(epoch_summary(rec));
      if (metrics_) metrics_->write(rec);
      if (!fit_.plot_file.empty()) write_svg_plot(fit_.plot_file, ledger_.history, fit_.plot_title);
    }
    if (fit_.checkpoint_file.empty()) return;
    // Servers are idle while every worker waits here.
    auto barrier = [&] {
      if constexpr (parameter_server) {
        if (workers_ > 1) barrier_through_server(e_, path_->client(), path_->live());
      } else {
        group_.barrier();
      }
    };
    bool saved = false;
    try {
      barrier();
      const ExchangeStates<T> states = exchange_states();
      if (reporter_) ledger_.save(fit_.checkpoint_file, states);
      saved = true;
      barrier();
    } catch (const PeerLostError& x) {
      // The survivors go on at once: some may have left the barriers already.
      survive(x.peer(), "a checkpoint barrier");
      if (reporter_ && !saved) ledger_.save(fit_.checkpoint_file, own_exchange_state());
    }
  }

  /// Checkpoint sets are worker 0's decision alone (its state is the job's in synchronous
  /// training; servers save on its request), so no other worker waits for them; unless the other
  /// workers' exchange states go into the set too.
  bool saves_sets() const noexcept { return reporter_ && fit_.checkpoints.enabled(); }
  bool takes_part_in_sets() const noexcept { return fit_.checkpoints.enabled() && (reporter_ || gathers_exchange_state); }

  /// Whether a set is due after this update. Where every worker takes part, every worker must
  /// agree: steps are the same on all of them; time is worker 0's, whose verdict they share.
  bool set_due() {
    if (!takes_part_in_sets()) return false;
    if (!gathers_exchange_state || group_.size() == 1) return clock_->due(s_.step);
    if (clock_->saved(s_.step)) return false;
    double due = clock_->due_by_steps(s_.step) || (reporter_ && clock_->due_by_time()) ? 1.0 : 0.0;
    if (clock_->timed()) collective::allreduce_max(group_, std::span<double>(&due, 1), protocol_tags::metrics);
    return due > 0;
  }

  ExchangeStates<T> own_exchange_state() const {
    ExchangeStates<T> states;
    if constexpr (State::stateful_exchange) states.push_back(s_.exchange_state());
    return states;
  }

  /// Every worker's exchange state, at worker 0 (empty elsewhere, and where the exchange keeps
  /// none); every worker of a ring calls it at the same point.
  ExchangeStates<T> exchange_states() {
    if constexpr (!gathers_exchange_state) {
      return own_exchange_state();
    } else {
      const Tag tag = protocol_tags::exchange_state;
      const std::size_t workers = group_.size();
      auto as_bytes = [](auto&& v) { return std::as_writable_bytes(std::span(v)); };
      if (group_.rank() != 0) {
        std::vector<std::vector<T>> mine = s_.exchange_state();
        std::vector<std::uint64_t> sizes{mine.size()};
        for (const auto& b : mine) sizes.push_back(b.size());
        std::uint64_t count = sizes.size();
        group_.send(0, tag, as_bytes(std::span(&count, 1)));
        group_.send(0, tag, as_bytes(sizes));
        for (auto& b : mine)
          if (!b.empty()) group_.send(0, tag, as_bytes(b));
        return {};
      }
      ExchangeStates<T> all(workers);
      all[0] = s_.exchange_state();
      for (std::size_t w = 1; w < workers; ++w) {
        // Bounded before use: a residual never holds more values than the model has parameters,
        // nor an exchange more buffers than that.
        std::uint64_t count = 0;
        group_.recv(w, tag, as_bytes(std::span(&count, 1)));
        if (count == 0 || count > M::parameter_count + 1)
          throw TransportError("worker " + std::to_string(w) + " announced " + std::to_string(count) +
                               " exchange-state sizes; at most " + std::to_string(M::parameter_count + 1) + " fit");
        std::vector<std::uint64_t> sizes(static_cast<std::size_t>(count));
        group_.recv(w, tag, as_bytes(sizes));
        if (sizes[0] != count - 1)
          throw TransportError("worker " + std::to_string(w) + " sent an exchange state of inconsistent sizes");
        for (std::size_t i = 1; i < sizes.size(); ++i) {
          if (sizes[i] > M::parameter_count)
            throw TransportError("worker " + std::to_string(w) + " announced an exchange-state buffer of " +
                                 std::to_string(sizes[i]) + " values, more than the model's " +
                                 std::to_string(M::parameter_count) + " parameters");
          all[w].emplace_back(static_cast<std::size_t>(sizes[i]));
          if (sizes[i] > 0) group_.recv(w, tag, as_bytes(all[w].back()));
        }
      }
      return all;
    }
  }

  void save_set() {
    const CheckpointPolicy& cp = fit_.checkpoints;
    const ExchangeStates<T> states = exchange_states();
    if (!reporter_) {
      clock_->mark_saved(s_.step);
      return;
    }
    if constexpr (parameter_server) {
      for (const std::size_t k : path_->client().checkpoint(e_, s_.step))
        ledger_.failures.note(s_.step,
                              "parameter server " + std::to_string(k) + " could not save its shard of step " +
                                  std::to_string(s_.step) + " (its log says why); that set is incomplete",
                              fit_.log);
    }
    const auto path = checkpoint::set_file(cp.directory, s_.step, checkpoint::worker_part());
    save_set_file(cp, s_.step, checkpoint::worker_part(), set_parts(), "", ledger_.failures, fit_.log,
                  [&] { ledger_.write(path, done_epoch_, done_batch_, !parameter_server, states); });
    clock_->mark_saved(s_.step);
  }

  std::vector<std::string> set_parts() const {
    return checkpoint::trainer_parts(parameter_server ? options_.servers : 0);
  }

  /// Leaving by an exception (a peer died, a transport timed out): worker 0 saves what it has if
  /// that is the state of a completed update. Parameters and optimizer state change only together
  /// with the step counter, so an unchanged counter means nothing is half applied. Not with
  /// parameter servers: they hold the state, and may be what failed. The other workers may be
  /// gone: the set holds this worker's exchange state alone.
  void save_before_stopping() {
    if (!saves_sets() || parameter_server || s_.step != done_step_ || !clock_->due_at_exit(s_.step)) return;
    const CheckpointPolicy& cp = fit_.checkpoints;
    const auto path = checkpoint::set_file(cp.directory, s_.step, checkpoint::worker_part());
    const auto exchange = own_exchange_state();
    if (save_set_file(cp, s_.step, checkpoint::worker_part(), set_parts(), "", ledger_.failures, fit_.log,
                      [&] { ledger_.write(path, done_epoch_, done_batch_, true, exchange); }))
      flotilla::detail::log_to(fit_.log, LogLevel::info, "checkpoint",
                               "saved step " + std::to_string(s_.step) + " to " + path.string() + " before stopping");
  }

  /// Rethrows the current PeerLostError unless the survivors go on; then where they go on from.
  std::optional<SurvivorPosition> survive(std::optional<std::size_t> peer, const std::string& during) {
    if constexpr (survives_worker_loss) {
      if (recovery_) {
        const SurvivorProgress progress{records_, done_epoch_, done_batch_, steps_this_call_, options_.batch_size,
                                        &ledger_.history};
        auto back = survive_loss(e_, group_, *recovery_, s_, peer, during, peer && during == "the gradient allreduce",
                                 progress, fit_.log);
        if (back) {
          lo_.shard_index = group_.rank();
          lo_.shard_count = group_.size();
          loader_.emplace(train_, lo_);
          steps_this_call_ = back->steps_this_call;
          stop_ = fit_.max_steps && steps_this_call_ >= fit_.max_steps;
          done_step_ = s_.step;
        }
        return back;
      }
    }
    throw;
  }

  /// TrainerOptions::overlap for this worker (train/overlap.hpp).
  bool overlaps() const {
    if (options_.overlap != Overlap::automatic) return options_.overlap == Overlap::always;
    if constexpr (!std::is_same_v<typename M::device, device::Cpu>) {
      return true;
    } else {
      std::size_t ranks_on_host = 1;
      if constexpr (KnowsRanksOnHost<E>) ranks_on_host = std::max<std::size_t>(1, e_.ranks_on_this_host());
      return overlap_pays(usable_cores(), ranks_on_host, std::max<std::size_t>(1, options_.threads));
    }
  }

  void write_step_log(const StepCounters& c) {
    char timing[256];
    std::snprintf(timing, sizeof timing,
                  "{\"rank\":%zu,\"step\":%llu,\"compute_ms\":%.4f,\"exposed_comm_ms\":%.4f,\"update_ms\":%.4f", w_,
                  static_cast<unsigned long long>(c.step), 1e3 * c.compute_seconds, 1e3 * c.exposed_comm_seconds,
                  1e3 * c.update_seconds);
    std::string line = timing;
    append_traffic_fields(line, c.traffic);
    line += ",\"steps_ahead\":" + std::to_string(c.steps_ahead) + ",\"staleness\":" + std::to_string(c.staleness) + "}";
    shared_.step_log.write(std::move(line));
  }

  const TrainerOptions<M>& options_;
  Policy& policy_;
  E& e_;
  State& s_;
  const std::size_t workers_;
  const data::Dataset<T>& train_;
  const data::Dataset<T>* validation_;
  const FitOptions& fit_;
  FitShared& shared_;
  TrainerLedger<T>& ledger_;
  const std::size_t w_;
  const bool reporter_;
  Group group_;
  std::optional<Path> path_;
  std::size_t skipped_this_epoch_ = 0, skipped_in_a_row_ = 0;
  data::LoaderOptions lo_;
  std::optional<data::Loader<T>> loader_;  // made again, re-sharded, when the ring re-forms
  std::optional<MetricsLog> metrics_;
  std::optional<CheckpointClock> clock_;
  std::optional<typename ring_recovery_for<E, survives_worker_loss>::type> recovery_;
  DataPosition at_;
  std::size_t epochs_to_run_ = 0;
  std::uint64_t steps_this_call_ = 0;
  bool stop_ = false;
  std::uint64_t records_ = 0;                // epochs recorded in this call
  std::optional<EpochRecord> adopted_;       // the end of an epoch this worker missed
  // The position after the last completed update: what a checkpoint taken now must record.
  std::uint64_t done_step_ = 0, done_epoch_ = 0, done_batch_ = 0;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_TRAIN_DETAIL_WORKERLOOP_HPP_INCLUDED
