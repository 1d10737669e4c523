// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_RUNNER_HPP_INCLUDED
#define FLOTILLA_PIPELINE_RUNNER_HPP_INCLUDED
// Runner<Model, Endpoint>: one rank's part of pipelined training: one stage of one pipeline
// replica. Every rank of a D x P job (layout.hpp) builds one with the same Plan and options, and
// calls compute_gradients() with its replica's batch each step, then update().
//
//   pipeline::Runner<M, Endpoint> r(endpoint, plan, {.schedule = pipeline::Schedule::one_forward_one_backward,
//                                                   .micro_batches = 8, .max_batch = 64});
//   for (each batch of this replica's Loader) { r.compute_gradients(*batch); r.update(optimizer, state, info); }
//
// A step cuts the batch into M micro-batches (sizes differ by at most one; M is lowered to the
// batch size when a batch has fewer samples), runs the schedule's forwards and backwards, and
// accumulates the parameter gradients of all of them. Activations go to the next stage and their
// gradients come back over the endpoint (any Transport: in-process threads, TCP, MPI), with one tag
// per direction: both schedules send in micro-batch order. The loss of each micro-batch is scaled by
// 1 / (global batch size), as Engine does, so the accumulated gradient is the gradient of the whole
// batch's mean loss: the same, to float rounding, as one worker computing the whole batch. With D
// replicas, stage s's replicas then sum their gradients with a ring allreduce over a
// transport::Group of those D ranks (each holds its 1/D-sized part of the global batch's mean).
//
// Every rank of a replica reads the same batch (the same Loader shard): the first stage takes the
// inputs, the last the targets, and all of them the sample ids (Dropout masks are keyed on them).
//
// Memory: the stage keeps one StageNetwork, and for stages after the first one received-input
// buffer, per micro-batch it may hold at once (max_in_flight: M for fill-drain, P - s for 1F1B),
// all sized once for the largest micro-batch, plus one buffer each for the output gradient
// received and the input gradient sent. Nothing is allocated per step.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/collective/ring_allreduce.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/thread_pool.hpp"
#include "flotilla/optim/state_tensors.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/model.hpp"
#include "flotilla/pipeline/layout.hpp"
#include "flotilla/pipeline/plan.hpp"
#include "flotilla/pipeline/schedule.hpp"
#include "flotilla/pipeline/stage_network.hpp"
#include "flotilla/train/detail/engine.hpp"
#include "flotilla/train/timeline.hpp"
#include "flotilla/transport/group.hpp"

namespace flotilla::pipeline {

struct RunnerOptions {
  Schedule schedule = Schedule::one_forward_one_backward;
  /// Micro-batches per step (M).
  std::size_t micro_batches = 4;
  /// The largest batch a step will be given (this replica's part of the global batch); buffers
  /// are sized for it once.
  std::size_t max_batch = 64;
  /// Pipeline replicas (D); the job must have plan.stages() * replicas ranks.
  std::size_t replicas = 1;
  /// Seed of the initial parameters and of the Dropout masks (as TrainerOptions::seed).
  std::uint64_t seed = 0;
  /// Record each forward and backward with its compute time (op_log()), for bubble accounting.
  bool record_ops = false;
  /// The clock op_log() and the compute time in stats() use: seconds, monotonic. The default is
  /// wall time; a benchmark whose stages share cores passes a per-thread CPU clock.
  double (*clock)() = nullptr;
  /// Where the stage records what it does, as rank endpoint.rank() (nullptr: nowhere): each
  /// forward and backward, each wait for a neighbour's activations or gradients, each send, the
  /// replicas' allreduce and the update, by the steady clock (train/timeline.hpp). Evaluation is
  /// not recorded. The timeline must outlive the runner.
  Timeline* timeline = nullptr;
};

/// What a stage did since construction or reset_stats().
struct StageStats {
  std::size_t steps = 0;
  double compute_seconds = 0;    ///< forwards, backwards and the loss (by the options' clock)
  double wait_seconds = 0;       ///< wall time blocked receiving activations or gradients
  double send_seconds = 0;       ///< wall time in sends
  double allreduce_seconds = 0;  ///< wall time averaging gradients across replicas
  double update_seconds = 0;     ///< wall time in update()
  double step_seconds = 0;       ///< wall time of whole compute_gradients() calls
  /// The most bytes of activations held at once for backward: the outputs of this stage's layers
  /// and (after the first stage) the received inputs, of every micro-batch between its forward and
  /// its backward. Layers' own scratch (im2col matrices, pooling indices) is not included.
  std::size_t peak_activation_bytes = 0;
  /// What the per-micro-batch buffers take, allocated once.
  std::size_t allocated_activation_bytes = 0;
};

/// One forward or backward as it ran, for bubble accounting.
struct OpRecord {
  Op op;
  double start = 0, end = 0;  ///< by the options' clock
};

/// Loss and accuracy counts over part of a data set, on the last stage (zero elsewhere).
struct EvaluationCounts {
  double loss_sum = 0;
  std::size_t correct = 0;
  std::size_t samples = 0;
  /// Classifiers: outputs x outputs counts, row = actual class, column = predicted.
  std::vector<std::uint64_t> confusion;
};

template <ModelType M, Transport E>
class Runner {
 public:
  using T = typename M::scalar_type;
  using architecture = typename M::architecture;
  using stage_network = StageNetwork<architecture, T>;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;

  Runner(E& endpoint, Plan plan, RunnerOptions options)
      : e_(endpoint), plan_(std::move(plan)), o_(options), layout_{plan_.stages(), options.replicas} {
    if (plan_.depth() != architecture::depth)
      throw ConfigError("pipeline::Runner: the plan covers " + std::to_string(plan_.depth()) + " layers, the model has " +
                        std::to_string(architecture::depth));
    layout_.check(e_.size());
    if (o_.micro_batches == 0) throw ConfigError("pipeline::RunnerOptions.micro_batches must be > 0");
    if (o_.max_batch == 0) throw ConfigError("pipeline::RunnerOptions.max_batch must be > 0");
    if (!o_.clock) o_.clock = &wall_clock;
    stage_ = layout_.stage_of(e_.rank());
    replica_ = layout_.replica_of(e_.rank());
    micro_cap_ = (o_.max_batch + o_.micro_batches - 1) / o_.micro_batches;
    const std::size_t first = plan_.first_layer(stage_), last = plan_.end_layer(stage_);
    const std::size_t slots = max_in_flight(o_.schedule, stages(), stage_, o_.micro_batches);
    for (std::size_t k = 0; k < slots; ++k) {
      slots_.push_back(std::make_unique<Slot>(first, last, micro_cap_));
      if (!first_stage()) slots_.back()->input.resize(slots_.back()->net.input_size() * micro_cap_);
    }
    const auto& net = slots_.front()->net;
    params_.resize(net.parameter_count());
    grads_.assign(net.parameter_count(), T(0));
    tensors_ = net.tensors();
    slots_.front()->net.initialize(params_, o_.seed);
    output_grad_.resize(net.output_size() * micro_cap_);
    if (!first_stage()) input_grad_.resize(net.input_size() * micro_cap_);
    stats_.allocated_activation_bytes = slots * slot_bytes(micro_cap_);
    if (layout_.replicas > 1)
      group_.emplace(e_, layout_.stage_group(stage_), default_tags::replica_barrier);
    check_neighbours_agree();
  }

  std::size_t stage() const noexcept { return stage_; }
  std::size_t stages() const noexcept { return layout_.stages; }
  std::size_t replica() const noexcept { return replica_; }
  std::size_t replicas() const noexcept { return layout_.replicas; }
  bool first_stage() const noexcept { return stage_ == 0; }
  bool last_stage() const noexcept { return stage_ + 1 == stages(); }
  const Plan& plan() const noexcept { return plan_; }
  const RunnerOptions& options() const noexcept { return o_; }

  /// This stage's parameters and gradients: the slice [parameter_offset(), + size) of the whole
  /// model's flat buffers.
  std::span<T> parameters() noexcept { return params_; }
  std::span<const T> parameters() const noexcept { return params_; }
  std::span<T> gradients() noexcept { return grads_; }
  std::span<const T> gradients() const noexcept { return grads_; }
  std::size_t parameter_offset() const noexcept { return slots_.front()->net.parameter_offset(); }
  /// The stage's parameter tensors, offsets relative to parameters().
  std::span<const TensorInfo> tensors() const noexcept { return tensors_; }

  /// Gradients of `batch` (this replica's part of the global batch; every stage of the replica
  /// passes the same one) into gradients(), replacing what was there. Returns the loss and
  /// accuracy counts on the last stage, zeros (and the sample count) elsewhere.
  StepResult compute_gradients(const data::Batch<T>& batch) {
    const auto step_start = clock::now();
    const std::size_t b = batch.size();
    if (b > o_.max_batch)
      throw ConfigError("pipeline::Runner::compute_gradients: a batch of " + std::to_string(b) +
                        " samples, but RunnerOptions.max_batch is " + std::to_string(o_.max_batch));
    std::fill(grads_.begin(), grads_.end(), T(0));
    StepResult result;
    result.samples = b;
    if (b > 0) {
      const std::size_t global = batch.global_size ? batch.global_size : b;
      const T scale = T(1) / static_cast<T>(global);
      const std::size_t m = std::min(o_.micro_batches, b);
      if (m != ops_micro_batches_) {
        ops_ = schedule_ops(o_.schedule, stages(), stage_, m);
        ops_micro_batches_ = m;
      }
      double loss = 0;
      for (const Op& op : ops_) {
        if (op.kind == Op::forward)
          forward(batch, m, op.micro_batch, scale);
        else
          backward(batch, m, op.micro_batch, scale, loss, result.correct);
      }
      result.loss = loss / static_cast<double>(b);
    }
    if (group_) {
      const auto t0 = clock::now();
      collective::RingOptions ro;
      ro.tag = default_tags::replica_allreduce;
      collective::ring_allreduce(*group_, std::span<T>(grads_), ro);
      const auto t1 = clock::now();
      stats_.allreduce_seconds += seconds(t0, t1);
      trace("allreduce over replicas", whole_step, "communication", t0, t1);
    }
    ++stats_.steps;
    stats_.step_seconds += seconds(step_start, clock::now());
    return result;
  }

  /// One optimizer step on this stage's parameters with its gradients. Element-wise optimizers
  /// (SGD, Momentum, Adam) then give each parameter exactly what the unsplit model's update would.
  template <class O>
  void update(const O& optimizer, typename O::template state<T>& state, const StepInfo& info) {
    const auto t0 = clock::now();
    optim::update_trainable(optimizer, std::span<T>(params_), std::span<const T>(grads_), state,
                            std::span<const TensorInfo>(tensors_), info, trainable_);
    const auto t1 = clock::now();
    stats_.update_seconds += seconds(t0, t1);
    trace("update", whole_step, "update", t0, t1);
  }

  /// Loss and correct predictions of samples [first, first + count) of `data` in evaluation mode,
  /// passed through the pipeline in chunks of a micro-batch; counted on the last stage. Every stage
  /// of the replica must call it with the same arguments.
  EvaluationCounts evaluate(const data::Dataset<T>& data, std::size_t first, std::size_t count) {
    if (first > data.size() || count > data.size() - first)
      throw ConfigError("pipeline::Runner::evaluate: samples [" + std::to_string(first) + ", " + std::to_string(first + count) +
                        ") are not within the " + std::to_string(data.size()) + " of '" + data.name + "'");
    EvaluationCounts c;
    constexpr std::size_t k = M::output_shape::size;
    if (classifier && last_stage()) c.confusion.assign(k * k, 0);
    Slot& s = *slots_.front();
    for (std::size_t at = first; at < first + count; at += micro_cap_) {
      const std::size_t n = std::min(micro_cap_, first + count - at);
      ConstMatrixView<T> in = first_stage() ? columns(data.inputs, at, n) : receive_input(s, n, evaluation);
      const auto out = s.net.forward(in, params_, RunInfo{});
      if (!last_stage()) {
        send(stage_ + 1, default_tags::activations, out, evaluation);
        continue;
      }
      const Targets<T> t = classifier ? Targets<T>{std::span<const std::int32_t>(data.labels).subspan(at, n)}
                                      : Targets<T>{{}, columns(data.targets, at, n)};
      c.loss_sum += static_cast<double>(M::loss::value(out, t));
      c.samples += n;
      if constexpr (classifier) {
        for (Eigen::Index j = 0; j < out.cols(); ++j) {
          Eigen::Index predicted = 0;
          out.col(j).maxCoeff(&predicted);
          const auto actual = t.labels[static_cast<std::size_t>(j)];
          c.correct += actual == predicted ? 1 : 0;
          ++c.confusion[static_cast<std::size_t>(actual) * k + static_cast<std::size_t>(predicted)];
        }
      }
    }
    return c;
  }

  const StageStats& stats() const noexcept { return stats_; }
  const std::vector<OpRecord>& op_log() const noexcept { return op_log_; }
  void reset_stats() {
    const std::size_t allocated = stats_.allocated_activation_bytes;
    stats_ = {};
    stats_.allocated_activation_bytes = allocated;
    op_log_.clear();
  }

 private:
  struct Slot {
    Slot(std::size_t first, std::size_t last, std::size_t cap) : net(first, last, cap) {}
    stage_network net;
    Buffer<T> input;  // received activations (stages after the first), kept until backward
  };

  using clock = Timeline::clock;

  static double wall_clock() { return std::chrono::duration<double>(clock::now().time_since_epoch()).count(); }
  static double seconds(clock::time_point begin, clock::time_point end) { return std::chrono::duration<double>(end - begin).count(); }

  /// Micro-batch numbers with a meaning of their own for trace(): what belongs to no micro-batch
  /// (the allreduce, the update), and evaluation, which is not recorded.
  static constexpr std::size_t whole_step = static_cast<std::size_t>(-1);
  static constexpr std::size_t evaluation = static_cast<std::size_t>(-2);

  /// Records [begin, end) on the timeline, when there is one, as "<what> <micro-batch>" (or
  /// "<what>" for the whole step).
  void trace(std::string_view what, std::size_t micro, std::string_view category, clock::time_point begin,
             clock::time_point end) const {
    if (!o_.timeline || micro == evaluation) return;
    std::string name(what);
    if (micro != whole_step) {  // appended piece by piece: GCC 12 misreports `" " + string` (-Wrestrict)
      name += ' ';
      name += std::to_string(micro);
    }
    o_.timeline->record(name, category, e_.rank(), 0, begin, end);
  }

  std::size_t slot_bytes(std::size_t n) const {
    const auto& net = slots_.front()->net;
    return net.activation_bytes(n) + (first_stage() ? 0 : net.input_size() * n * sizeof(T));
  }

  static ConstMatrixView<T> columns(const Matrix<T>& m, std::size_t first, std::size_t count) {
    return ConstMatrixView<T>(m.data() + static_cast<std::size_t>(m.rows()) * first, m.rows(), static_cast<Eigen::Index>(count));
  }
  static ConstMatrixView<T> columns(ConstMatrixView<T> m, std::size_t first, std::size_t count) {
    return ConstMatrixView<T>(m.data() + static_cast<std::size_t>(m.rows()) * first, m.rows(), static_cast<Eigen::Index>(count));
  }

  static std::size_t count_correct(ConstMatrixView<T> out, const Targets<T>& t) {
    std::size_t correct = 0;
    for (Eigen::Index s = 0; s < out.cols(); ++s) {
      Eigen::Index i = 0;
      out.col(s).maxCoeff(&i);
      correct += static_cast<std::int32_t>(i) == t.labels[static_cast<std::size_t>(s)] ? 1 : 0;
    }
    return correct;
  }

  /// Ranks of this replica's neighbouring stages.
  std::size_t rank_of_stage(std::size_t s) const { return layout_.rank_of(replica_, s); }

  /// Receives micro-batch `micro`'s activations (of n samples) from the stage before into `s`.
  ConstMatrixView<T> receive_input(Slot& s, std::size_t n, std::size_t micro) {
    const std::size_t rows = s.net.input_size();
    receive(stage_ - 1, default_tags::activations, std::span<T>(s.input.data(), rows * n), micro);
    return ConstMatrixView<T>(s.input.data(), static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(n));
  }

  /// A receive from this replica's stage `from_stage`: its wait counts (and shows) as waiting.
  void receive(std::size_t from_stage, Tag tag, std::span<T> into, std::size_t micro) {
    const auto t0 = clock::now();
    e_.recv(rank_of_stage(from_stage), tag, std::as_writable_bytes(into));
    const auto t1 = clock::now();
    stats_.wait_seconds += seconds(t0, t1);
    trace(tag == default_tags::activations ? "receive activations" : "receive gradients", micro, "wait", t0, t1);
  }

  void send(std::size_t to_stage, Tag tag, ConstMatrixView<T> values, std::size_t micro) {
    const auto t0 = clock::now();
    e_.send(rank_of_stage(to_stage), tag,
            std::as_bytes(std::span<const T>(values.data(), static_cast<std::size_t>(values.size()))));
    const auto t1 = clock::now();
    stats_.send_seconds += seconds(t0, t1);
    trace(tag == default_tags::activations ? "send activations" : "send gradients", micro, "communication", t0, t1);
  }

  /// `scale`: each sample's weight in the step's gradient (what normalisations weight their
  /// running statistics' increments by; a micro-batch normalises over its own samples).
  void forward(const data::Batch<T>& batch, std::size_t m, std::size_t micro, T scale) {
    const auto [begin, end] = flotilla::detail::split_range(batch.size(), m, micro);
    const std::size_t n = end - begin;
    Slot& s = *slots_[micro % slots_.size()];
    const ConstMatrixView<T> in = first_stage() ? columns(batch.inputs, begin, n) : receive_input(s, n, micro);
    const RunInfo info{Mode::train, batch.ids.empty() ? std::span<const std::uint64_t>{} : batch.ids.subspan(begin, n),
                       o_.seed, batch.epoch, nullptr, static_cast<double>(scale)};
    const auto c0 = clock::now();
    const double t0 = o_.clock();
    const auto out = s.net.forward(in, params_, info);
    const double t1 = o_.clock();
    trace("forward", micro, "compute", c0, clock::now());
    stats_.compute_seconds += t1 - t0;
    if (o_.record_ops) op_log_.push_back({{Op::forward, micro}, t0, t1});
    live_bytes_ += slot_bytes(n);
    stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, live_bytes_);
    if (!last_stage()) send(stage_ + 1, default_tags::activations, out, micro);
  }

  void backward(const data::Batch<T>& batch, std::size_t m, std::size_t micro, T scale, double& loss, std::size_t& correct) {
    const auto [begin, end] = flotilla::detail::split_range(batch.size(), m, micro);
    const std::size_t n = end - begin;
    Slot& s = *slots_[micro % slots_.size()];
    const auto out_rows = static_cast<Eigen::Index>(s.net.output_size());
    MatrixView<T> dout(output_grad_.data(), out_rows, static_cast<Eigen::Index>(n));
    double t0 = 0;
    clock::time_point c0;
    if (last_stage()) {
      const Targets<T> t = classifier ? Targets<T>{batch.targets.labels.subspan(begin, n)}
                                      : Targets<T>{{}, columns(batch.targets.values, begin, n)};
      c0 = clock::now();
      t0 = o_.clock();
      loss += static_cast<double>(M::loss::value_and_gradient(s.net.output(), t, dout, scale));
      if constexpr (classifier) correct += count_correct(s.net.output(), t);
    } else {
      receive(stage_ + 1, default_tags::gradients, std::span<T>(output_grad_.data(), static_cast<std::size_t>(dout.size())), micro);
      c0 = clock::now();
      t0 = o_.clock();
    }
    MatrixView<T> din(input_grad_.data(), first_stage() ? 0 : static_cast<Eigen::Index>(s.net.input_size()),
                      first_stage() ? 0 : static_cast<Eigen::Index>(n));
    s.net.backward(ConstMatrixView<T>(dout.data(), dout.rows(), dout.cols()), params_, grads_,
                   first_stage() ? nullptr : &din);
    const double t1 = o_.clock();
    trace("backward", micro, "compute", c0, clock::now());
    stats_.compute_seconds += t1 - t0;
    if (o_.record_ops) op_log_.push_back({{Op::backward, micro}, t0, t1});
    live_bytes_ -= slot_bytes(n);
    if (!first_stage()) send(stage_ - 1, default_tags::gradients, ConstMatrixView<T>(din.data(), din.rows(), din.cols()), micro);
  }

  /// Every stage tells the next what it was built with; a rank given another plan or other options
  /// than its neighbour stops here with both, instead of exchanging messages of the wrong sizes.
  void check_neighbours_agree() {
    std::vector<std::uint64_t> mine{stages(), layout_.replicas, o_.micro_batches, o_.max_batch,
                                    static_cast<std::uint64_t>(o_.schedule), o_.seed};
    for (std::size_t b : plan_.bounds()) mine.push_back(b);
    if (!last_stage()) e_.send(rank_of_stage(stage_ + 1), default_tags::activations, std::as_bytes(std::span<const std::uint64_t>(mine)));
    if (first_stage()) return;
    std::vector<std::uint64_t> theirs(mine.size());
    e_.recv(rank_of_stage(stage_ - 1), default_tags::activations, std::as_writable_bytes(std::span<std::uint64_t>(theirs)));
    if (theirs != mine) {
      auto text = [](const std::vector<std::uint64_t>& v) {
        std::string s = "stages " + std::to_string(v[0]) + ", replicas " + std::to_string(v[1]) + ", micro_batches " +
                        std::to_string(v[2]) + ", max_batch " + std::to_string(v[3]) + ", schedule " + std::to_string(v[4]) +
                        ", seed " + std::to_string(v[5]) + ", bounds";
        for (std::size_t i = 6; i < v.size(); ++i) s += " " + std::to_string(v[i]);
        return s;
      };
      throw ConfigError("pipeline::Runner: rank " + std::to_string(e_.rank()) + " (stage " + std::to_string(stage_) +
                        ") has {" + text(mine) + "}, but rank " + std::to_string(rank_of_stage(stage_ - 1)) + " (stage " +
                        std::to_string(stage_ - 1) + ") has {" + text(theirs) + "}; every rank needs the same plan and options");
    }
  }

  E& e_;
  Plan plan_;
  RunnerOptions o_;
  Layout layout_;
  std::size_t stage_ = 0, replica_ = 0, micro_cap_ = 1;
  std::vector<std::unique_ptr<Slot>> slots_;
  Buffer<T> params_, grads_;
  std::vector<TensorInfo> tensors_;
  std::vector<TensorInfo> trainable_;  // tensors_ without the state ones, rebuilt at each update
  Buffer<T> output_grad_, input_grad_;
  std::optional<transport::Group<E>> group_;
  std::vector<Op> ops_;
  std::size_t ops_micro_batches_ = 0;
  std::size_t live_bytes_ = 0;
  StageStats stats_;
  std::vector<OpRecord> op_log_;
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_RUNNER_HPP_INCLUDED
