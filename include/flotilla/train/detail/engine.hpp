// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRAIN_DETAIL_ENGINE_HPP_INCLUDED
#define FLOTILLA_TRAIN_DETAIL_ENGINE_HPP_INCLUDED
// The compute engine of one rank: a model's flat parameter and gradient buffers, one Network
// replica per core, and the forward/backward pass over a batch split across those cores.
//
// It does not update parameters: where the optimizer runs (on this rank after an allreduce, or on
// a parameter server) is the update policy's business. It does tell the policy, while backward is
// still running, which gradients are final: `on_ready(offset)` means that [offset, P) of the
// gradient buffer will not change again in this step. Layers finish last-first, so `offset` only
// decreases, and a policy can start sending the end of the buffer while the start is still being
// computed (the overlap of communication with backward that Horovod and PyTorch DDP do). Layers
// that stream their gradients (StreamsGradients: Dense) report parts of their slice as they go, so
// a bucket can start even before the layer that holds most of the model has finished.
//
// With several cores, each core's replica writes its gradients into a buffer of its own; once
// every core has finished a part of a layer, the core that finished it last adds the other cores'
// contributions for that part into the main buffer, in core order (so the sum does not depend on
// timing), and then reports it ready.
//
// For a reproducible sum (policy::Reproducible) the unit of work is a virtual shard instead: each
// core computes whole shards, each into a buffer of its own, and the shards are added in the fixed
// order of a SumTree (compute_tree_gradients), so the bits do not depend on the number of cores.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/collective/sum_tree.hpp"
#include "flotilla/concepts/engine.hpp"
#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/core/device.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/thread_pool.hpp"
#include "flotilla/data/dataset.hpp"
#include "flotilla/data/loader.hpp"
#include "flotilla/core/targets.hpp"
#include "flotilla/model.hpp"
#include "flotilla/optim/state_tensors.hpp"
#include "flotilla/train/confusion.hpp"
#include "flotilla/train/detail/statistics_rendezvous.hpp"

namespace flotilla {

/// The outcome of one forward and backward pass.
struct StepResult {
  double loss = 0;          ///< mean loss of the batch part this rank computed
  std::size_t correct = 0;  ///< samples whose arg-max output is their label (classifiers)
  std::size_t samples = 0;
};

namespace detail {

/// Loss sum, sample count and confusion counts over part of a data set, to be added across ranks.
struct EvaluationPart {
  double loss_sum = 0;
  std::size_t samples = 0;
  std::vector<std::uint64_t> confusion;  ///< classes x classes counts, row = actual (classifiers)
};

/// on_ready callback that does nothing: the engine then sums the cores' gradients after backward,
/// in parallel, instead of layer by layer.
struct NoReadyCallback {
  void operator()(std::size_t /*offset*/) const noexcept {}
};

/// The normalisation statistics of a virtual shard: its own samples' alone. Statistics over the
/// global batch would be a sum in an order of their own, which the reproducible sum cannot offer.
struct ShardStatistics {
  void operator()(std::span<double> /*values*/, StatisticsScope scope) const {
    if (scope == StatisticsScope::global)
      throw ConfigError("policy::Reproducible: a normalisation layer with statistics over the global batch (SyncBatchNorm2D, "
                        "SyncBatchNorm1D) cannot be summed in the fixed order; use BatchNorm2D / BatchNorm1D, which "
                        "normalise each virtual shard over its own samples");
  }
};

/// Values a layer's forward writes per sample, counting the inner layers of layers made of layers
/// (each keeps its own): what a replica's workspaces grow to, per sample of a batch.
template <class L>
constexpr std::size_t activation_values() {
  if constexpr (requires { typename L::layers; }) {
    return L::output_shape::size + []<class... Ls>(type_list<Ls...>*) {
      return (activation_values<Ls>() + ... + std::size_t{0});
    }(static_cast<typename L::layers*>(nullptr));
  } else {
    return L::output_shape::size;
  }
}

template <ModelType M>
class Engine {
 public:
  using T = typename M::scalar_type;
  using network_type = typename M::network;
  // What the Engine concept (concepts/engine.hpp) reads its members' types from.
  using model_type = M;
  using scalar_type = T;
  using batch_type = data::Batch<T>;
  using dataset_type = data::Dataset<T>;
  static constexpr std::size_t parameter_count = M::parameter_count;
  static constexpr bool classifier = M::loss::target == TargetKind::labels;
  static constexpr std::size_t input_size = M::input_shape::size;
  static constexpr std::size_t output_size = M::output_shape::size;

  Engine(std::size_t threads, std::size_t eval_batch_size, std::uint64_t seed)
      : pool_(std::max<std::size_t>(threads, 1)),
        eval_batch_(std::clamp<std::size_t>(eval_batch_size, 1, inference_chunk_cap())),
        seed_(seed),
        params_(parameter_count),
        grads_(parameter_count, T(0)),
        replicas_(pool_.size()),
        thread_grads_(pool_.size()),
        output_grads_(pool_.size()),
        partial_(pool_.size()),
        progress_(std::make_unique<LayerProgress[]>(network_type::depth)),
        core_from_(network_type::depth * pool_.size()),
        statistics_(std::make_unique<StatisticsRendezvous>(pool_.size())) {
    for (std::size_t i = 1; i < pool_.size(); ++i) thread_grads_[i].assign(parameter_count, T(0));
    part_statistics_.resize(pool_.size());
    for (std::size_t k = 0; k < pool_.size(); ++k) part_statistics_[k] = PartStatistics{statistics_.get(), k};
    // (part_statistics_ is never resized again: each StatisticsSum refers to its element.)
    for (std::size_t k = 0; k < pool_.size(); ++k) part_sums_.emplace_back(part_statistics_[k]);
    replicas_[0].initialize(params_, seed);
  }

  std::span<T> parameters() noexcept { return params_; }
  std::span<const T> parameters() const noexcept { return params_; }
  std::span<T> gradients() noexcept { return grads_; }
  std::span<const T> gradients() const noexcept { return grads_; }
  std::size_t threads() const noexcept { return pool_.size(); }
  /// Samples a core runs through the network at a time in evaluation and prediction:
  /// TrainerOptions::eval_batch_size, or fewer where the model's activations would take more
  /// than inference_bytes a core (every layer keeps workspaces the size of its largest batch).
  std::size_t eval_batch() const noexcept { return eval_batch_; }
  static constexpr std::size_t inference_bytes = std::size_t{64} << 20;
  std::uint64_t seed() const noexcept { return seed_; }
  /// Whether layers that can report parts of their gradient during backward do so
  /// (StreamsGradients; TrainerOptions::stream_gradients). Only matters with an on_ready callback.
  void set_stream_gradients(bool on) noexcept { stream_gradients_ = on; }
  /// Keys the dropout masks; restored from checkpoints.
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  /// How normalisation statistics over the global batch reach the other workers: a sum of a few
  /// values over every worker, in place (the worker's gradient path sets it; unset, this worker's
  /// batch is the global batch).
  void set_statistics_across_workers(StatisticsRendezvous::AcrossWorkers f) { statistics_->set_across_workers(std::move(f)); }

  /// The optimizer state lives in the trainer's host buffers here, so there is nothing to move.
  /// (An engine that keeps it elsewhere, cuda::Engine on the GPU, copies it to `state` here, and
  /// re-reads it from there after optimizer_state_changed().)
  template <class State>
  void optimizer_state_to_host(State& /*state*/) const noexcept {}
  void optimizer_state_changed() noexcept {}

  /// One optimizer step on parameters() with gradients(). An element-wise optimizer (see
  /// concepts/optimizer.hpp) on a buffer worth splitting runs on every core, each a contiguous
  /// slice of the elements; any other runs on the calling thread.
  template <class O, class State>
  void apply_optimizer(const O& optimizer, State& state, std::span<const TensorInfo> all_tensors, const StepInfo& info) {
    constexpr std::size_t worth_splitting = 1 << 15;  // below this, waking the cores costs more
    // State tensors (running statistics) take their increments; the optimizer sees the rest.
    const std::span<const TensorInfo> tensors =
        optim::take_state_increments(std::span<T>(params_), std::span<const T>(grads_), all_tensors, trainable_);
    if constexpr (elementwise_optimizer<O>) {
      if (pool_.size() > 1 && parameter_count >= worth_splitting) {
        pool_.run([&](std::size_t k) {
          // Slice k of the elements, as pieces of the tensors it overlaps: element-wise optimizers
          // give the same result for any split. Slices are cut at multiples of 16 elements so that
          // no two cores write the same cache line.
          const auto [b0, e0] = split_range(parameter_count / 16, pool_.size(), k);
          const std::size_t begin = b0 * 16, end = k + 1 == pool_.size() ? parameter_count : e0 * 16;
          std::array<TensorInfo, 64> local;
          std::size_t n = 0;
          for (const auto& t : tensors) {
            const std::size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size);
            if (lo >= hi) continue;
            if (n == local.size()) {  // a network with very many tensors: flush and go on
              optimizer.update(std::span<T>(params_), std::span<const T>(grads_), state, std::span<const TensorInfo>(local.data(), n), info);
              n = 0;
            }
            local[n] = t;
            local[n].offset = lo;
            local[n].size = hi - lo;
            ++n;
          }
          if (n) optimizer.update(std::span<T>(params_), std::span<const T>(grads_), state, std::span<const TensorInfo>(local.data(), n), info);
        });
        return;
      }
    }
    optimizer.update(std::span<T>(params_), std::span<const T>(grads_), state, tensors, info);
  }

  /// Forward and backward over `batch`, split across the cores. Adds `scale` times the gradient of
  /// the batch's summed loss to gradients() (which are zeroed first unless `accumulate`).
  template <class OnReady = NoReadyCallback>
  StepResult compute_gradients(const data::Batch<T>& batch, T scale, bool accumulate = false, OnReady&& on_ready = {}) {
    constexpr bool report = !std::is_same_v<std::remove_cvref_t<OnReady>, NoReadyCallback>;
    const std::size_t n = batch.size(), cores = pool_.size();
    if (!accumulate) std::fill(grads_.begin(), grads_.end(), T(0));
    // The cores with samples (split_range leaves the last ones empty when n < cores) meet for
    // normalisation statistics.
    statistics_->begin_step(std::min(n, cores));
    if constexpr (report) {
      for (std::size_t l = 0; l < network_type::depth; ++l) {
        const std::size_t layer_end = network_type::parameter_offsets[l] + network_type::parameter_counts[l];
        progress_[l].summed_from = layer_end;
        std::fill_n(core_from_.begin() + static_cast<std::ptrdiff_t>(l * cores), cores, layer_end);
      }
    }
    pool_.run([&](std::size_t k) {
      const auto [begin, end] = split_range(n, cores, k);
      std::span<T> g = k == 0 ? std::span<T>(grads_) : std::span<T>(thread_grads_[k]);
      if (k != 0) std::fill(g.begin(), g.end(), T(0));
      partial_[k] = {};
      auto hook = [&, k](std::size_t layer, std::size_t offset, std::size_t /*count*/) {
        tail_done(k, layer, offset, on_ready);
      };
      if (end == begin) {
        // No samples for this core: it still counts as done with every layer, last first.
        if constexpr (report) {
          for (std::size_t l = network_type::depth; l-- > 0;)
            if (network_type::parameter_counts[l] > 0)
              hook(l, network_type::parameter_offsets[l], network_type::parameter_counts[l]);
        }
        return;
      }
      if constexpr (report) {
        if (stream_gradients_) {
          PartsHook<decltype(hook)> parts{hook};
          partial_[k] = run_part(k, batch, begin, end, scale, g, parts);
        } else {
          partial_[k] = run_part(k, batch, begin, end, scale, g, hook);
        }
      } else {
        NoHook nobody;  // so that layers compute their gradients in their fastest order
        partial_[k] = run_part(k, batch, begin, end, scale, g, nobody);
      }
    });
    if constexpr (!report) {
      if (cores > 1) {
        pool_.run([&](std::size_t k) {
          const auto [begin, end] = split_range(parameter_count, cores, k);
          add_thread_gradients(begin, end - begin);
        });
      }
    }
    return step_result(partial_, n);
  }

  /// Forward and backward over `batch`, this worker's part of a global batch, as the leaves
  /// [first_leaf, first_leaf + ceil(n / leaf_samples)) of `tree`, leaf_samples samples each (the
  /// last shorter). One core computes each leaf's gradient (scale times its summed loss's) alone,
  /// into a buffer of its own; the leaves are added in the tree's order up to the largest nodes
  /// inside this worker's run, whose values tree_nodes() then holds (SumTree::cover's order).
  /// gradients() is left as it is: collective::tree_allreduce adds every worker's nodes into it.
  StepResult compute_tree_gradients(const data::Batch<T>& batch, std::size_t leaf_samples, const collective::SumTree& tree,
                                    std::size_t first_leaf, T scale) {
    if (leaf_samples == 0) throw ConfigError("compute_tree_gradients: leaf_samples must be > 0");
    const std::size_t n = batch.size();
    const std::size_t leaves = (n + leaf_samples - 1) / leaf_samples;
    const std::vector<collective::TreeNode> nodes = tree.cover({first_leaf, first_leaf + leaves});
    free_tree_buffers_.clear();
    for (std::size_t i = 0; i < tree_buffers_.size(); ++i) free_tree_buffers_.push_back(i);
    pending_leaves_.clear();
    leaf_partials_.assign(leaves, Partial{});
    TreeStep step{batch, leaf_samples, first_leaf, first_leaf, first_leaf + leaves, scale};
    std::vector<std::size_t> held;
    for (const auto& node : nodes) held.push_back(tree_node(node, step));
    // (Viewed once every buffer exists: a buffer added later would have moved the others' handles.)
    node_views_.clear();
    for (const std::size_t id : held) node_views_.emplace_back(tree_buffers_[id]);
    return step_result(leaf_partials_, n);
  }
  /// The values of the nodes the last compute_tree_gradients() ended with.
  std::span<const std::span<const T>> tree_nodes() const noexcept { return node_views_; }

  /// Loss sum and confusion counts of samples [first, first + count) of `data`, in evaluation mode.
  EvaluationPart evaluate(const data::Dataset<T>& data, std::size_t first, std::size_t count) {
    const std::size_t cores = pool_.size();
    std::vector<EvaluationPart> parts(cores);
    pool_.run([&](std::size_t k) {
      auto& part = parts[k];
      if constexpr (classifier) part.confusion.assign(output_size * output_size, 0);
      const auto [b, e] = split_range(count, cores, k);
      for (std::size_t at = first + b; at < first + e; at += eval_batch_) {
        const std::size_t m = std::min(eval_batch_, first + e - at);
        const auto out = replicas_[k].forward(columns(data.inputs, at, m), params_, inference());
        const Targets<T> t = targets(data, at, m);
        part.loss_sum += static_cast<double>(M::loss::value(out, t));
        part.samples += m;
        if constexpr (classifier) {
          for (std::size_t s = 0; s < m; ++s)
            ++part.confusion[static_cast<std::size_t>(t.labels[s]) * output_size +
                             static_cast<std::size_t>(argmax(out.col(static_cast<Eigen::Index>(s))))];
        }
      }
    });
    EvaluationPart all;
    if constexpr (classifier) all.confusion.assign(output_size * output_size, 0);
    for (const auto& p : parts) {
      all.loss_sum += p.loss_sum;
      all.samples += p.samples;
      for (std::size_t i = 0; i < p.confusion.size(); ++i) all.confusion[i] += p.confusion[i];
    }
    return all;
  }

  /// The model's outputs ((output size) x samples) for `inputs`.
  Matrix<T> predict(ConstMatrixView<T> inputs) {
    const auto n = static_cast<std::size_t>(inputs.cols());
    Matrix<T> out(static_cast<Eigen::Index>(output_size), inputs.cols());
    pool_.run([&](std::size_t k) {
      const auto [begin, end] = split_range(n, pool_.size(), k);
      for (std::size_t first = begin; first < end; first += eval_batch_) {
        const std::size_t count = std::min(eval_batch_, end - first);
        out.middleCols(static_cast<Eigen::Index>(first), static_cast<Eigen::Index>(count)) =
            replicas_[k].forward(columns(inputs, first, count), params_, inference());
      }
    });
    return out;
  }

  static constexpr std::size_t per_sample_bytes() {
    return []<class... Ls>(type_list<Ls...>*) {
      return (activation_values<Ls>() + ... + std::size_t{0}) * sizeof(T);
    }(static_cast<typename network_type::architecture::template layers<T>*>(nullptr));
  }
  static constexpr std::size_t inference_chunk_cap() { return std::max<std::size_t>(inference_bytes / per_sample_bytes(), 1); }

  /// Evaluation mode, and no backward to follow: blocks keep only what their next layer reads.
  static RunInfo inference() {
    RunInfo info;
    info.backward_follows = false;
    return info;
  }

  static ConstMatrixView<T> columns(ConstMatrixView<T> m, std::size_t first, std::size_t count) {
    return ConstMatrixView<T>(m.data() + static_cast<std::size_t>(m.rows()) * first, m.rows(),
                              static_cast<Eigen::Index>(count));
  }
  static ConstMatrixView<T> columns(const Matrix<T>& m, std::size_t first, std::size_t count) {
    return columns(ConstMatrixView<T>(m.data(), m.rows(), m.cols()), first, count);
  }

 private:
  struct Partial {
    double loss = 0;
    std::size_t correct = 0;
  };

  // Core `core` has finished [offset, end of the layer's slice) of `layer` in its own buffer. What
  // every core has finished is added up in the main buffer and reported, under the layer's lock,
  // so that reports reach on_ready in decreasing order. (A core reports a layer only after it has
  // finished every later one, and the last core to finish a layer reports it before it goes on.)
  template <class OnReady>
  void tail_done(std::size_t core, std::size_t layer, std::size_t offset, OnReady& on_ready) {
    const std::size_t cores = pool_.size();
    LayerProgress& p = progress_[layer];
    const std::lock_guard lock(p.mutex);
    const auto mine = core_from_.begin() + static_cast<std::ptrdiff_t>(layer * cores);
    mine[static_cast<std::ptrdiff_t>(core)] = std::min(mine[static_cast<std::ptrdiff_t>(core)], offset);
    const std::size_t all_from = *std::max_element(mine, mine + static_cast<std::ptrdiff_t>(cores));
    if (all_from >= p.summed_from) return;
    add_thread_gradients(all_from, p.summed_from - all_from);
    p.summed_from = all_from;
    on_ready(all_from);
  }

  void add_thread_gradients(std::size_t offset, std::size_t count) {
    if (count == 0) return;
    auto dst = VectorView<T>(grads_.data() + offset, static_cast<Eigen::Index>(count));
    for (std::size_t j = 1; j < pool_.size(); ++j)
      dst += ConstVectorView<T>(thread_grads_[j].data() + offset, static_cast<Eigen::Index>(count));
  }

  // The step's mean loss and correct count from its parts' sums, added in part order.
  static StepResult step_result(const std::vector<Partial>& parts, std::size_t samples) {
    StepResult r;
    double loss_sum = 0;
    for (const auto& p : parts) {
      loss_sum += p.loss;
      r.correct += p.correct;
    }
    r.samples = samples;
    r.loss = samples ? loss_sum / static_cast<double>(samples) : 0.0;
    return r;
  }

  // What compute_tree_gradients() is working through.
  struct TreeStep {
    const data::Batch<T>& batch;
    std::size_t leaf_samples, first, next, end;  // leaves: this worker's first, the next to compute, past its last
    T scale;
  };

  // The buffer holding `node`'s value: a leaf's gradient, or its children's values added, the
  // right one into the left one's buffer.
  std::size_t tree_node(collective::TreeNode node, TreeStep& step) {
    if (node.leaf()) return take_leaf(node.begin, step);
    const std::size_t left = tree_node(collective::SumTree::left(node), step);
    const std::size_t right = tree_node(collective::SumTree::right(node), step);
    add_tree_buffer(left, right);
    free_tree_buffers_.push_back(right);
    return left;
  }

  // Leaves are taken in order; the cores compute the next ones, one each, when none is waiting.
  std::size_t take_leaf(std::size_t leaf, TreeStep& step) {
    if (pending_leaves_.empty()) compute_leaves(step);
    if (pending_leaves_.empty() || leaf + pending_leaves_.size() != step.next)
      throw ConfigError("compute_tree_gradients: leaf " + std::to_string(leaf) + " is not the next one computed");
    const std::size_t id = pending_leaves_.front();
    pending_leaves_.pop_front();
    return id;
  }

  void compute_leaves(TreeStep& step) {
    const std::size_t count = std::min(pool_.size(), step.end - step.next);
    std::vector<std::size_t> ids(count);
    for (auto& id : ids) id = acquire_tree_buffer();
    static constexpr ShardStatistics alone{};
    const StatisticsSum shard_sum(alone);
    pool_.run([&](std::size_t k) {
      if (k >= count) return;
      const std::size_t local = step.next + k - step.first;
      const std::size_t begin = local * step.leaf_samples, end = std::min(begin + step.leaf_samples, step.batch.size());
      std::span<T> g(tree_buffers_[ids[k]]);
      std::fill(g.begin(), g.end(), T(0));
      NoHook nobody;
      leaf_partials_[local] = run_part(k, step.batch, begin, end, step.scale, g, nobody, &shard_sum);
    });
    for (const auto id : ids) pending_leaves_.push_back(id);
    step.next += count;
  }

  std::size_t acquire_tree_buffer() {
    if (free_tree_buffers_.empty()) {
      tree_buffers_.emplace_back(parameter_count);
      return tree_buffers_.size() - 1;
    }
    const std::size_t id = free_tree_buffers_.back();
    free_tree_buffers_.pop_back();
    return id;
  }

  // Element-wise, so the same bits however the elements are split among the cores.
  void add_tree_buffer(std::size_t into, std::size_t from) {
    T* dst = tree_buffers_[into].data();
    const T* src = tree_buffers_[from].data();
    const auto add = [&](std::size_t begin, std::size_t end) {
      VectorView<T>(dst + begin, static_cast<Eigen::Index>(end - begin)) +=
          ConstVectorView<T>(src + begin, static_cast<Eigen::Index>(end - begin));
    };
    if (pool_.size() > 1 && parameter_count >= (std::size_t{1} << 15)) {
      pool_.run([&](std::size_t k) {
        const auto [begin, end] = split_range(parameter_count, pool_.size(), k);
        add(begin, end);
      });
    } else {
      add(0, parameter_count);
    }
  }

  template <class Hook>
  Partial run_part(std::size_t k, const data::Batch<T>& batch, std::size_t begin, std::size_t end, T scale,
                   std::span<T> g, Hook& hook, const StatisticsSum* statistics = nullptr) {
    const std::size_t count = end - begin;
    const RunInfo info{Mode::train, batch.ids.empty() ? std::span<const std::uint64_t>{} : batch.ids.subspan(begin, count),
                       seed_, batch.epoch, statistics ? statistics : &part_sums_[k], static_cast<double>(scale)};
    auto& net = replicas_[k];
    const auto out = net.forward(columns(batch.inputs, begin, count), params_, info);
    auto& dout = output_grads_[k];
    dout.resize(output_size * count);
    auto grad = MatrixView<T>(dout.data(), static_cast<Eigen::Index>(output_size), static_cast<Eigen::Index>(count));
    const Targets<T> t = classifier ? Targets<T>{batch.targets.labels.subspan(begin, count)}
                                    : Targets<T>{{}, columns(batch.targets.values, begin, count)};
    Partial p;
    p.loss = static_cast<double>(M::loss::value_and_gradient(out, t, grad, scale));
    if constexpr (classifier) {
      for (std::size_t s = 0; s < count; ++s)
        p.correct += argmax(out.col(static_cast<Eigen::Index>(s))) == t.labels[s] ? 1 : 0;
    }
    net.backward(ConstMatrixView<T>(dout.data(), grad.rows(), grad.cols()), params_, g, hook);
    return p;
  }

  template <class Col>
  static std::int32_t argmax(const Col& c) {
    Eigen::Index i = 0;
    c.maxCoeff(&i);
    return static_cast<std::int32_t>(i);
  }

  static Targets<T> targets(const data::Dataset<T>& d, std::size_t first, std::size_t count) {
    // (A view cannot be re-pointed after construction, so each kind is built whole.)
    if constexpr (classifier) {
      return Targets<T>{std::span<const std::int32_t>(d.labels).subspan(first, count)};
    } else {
      return Targets<T>{{}, columns(d.targets, first, count)};
    }
  }

  ThreadPool pool_;
  std::size_t eval_batch_;
  std::uint64_t seed_;
  Buffer<T> params_;
  Buffer<T> grads_;
  std::vector<network_type> replicas_;
  std::vector<Buffer<T>> thread_grads_;
  std::vector<Buffer<T>> output_grads_;
  std::vector<Partial> partial_;
  // While backward reports (compute_gradients with an on_ready): per layer, where the tail that
  // is summed in the main buffer begins, and per layer and core, where that core's final tail
  // begins (guarded by the layer's mutex).
  struct LayerProgress {
    std::mutex mutex;
    std::size_t summed_from = 0;
  };
  std::unique_ptr<LayerProgress[]> progress_;
  std::vector<std::size_t> core_from_;
  bool stream_gradients_ = false;
  // Where the cores' layers meet for normalisation statistics (on the heap: it holds a mutex, and
  // the engine moves).
  std::unique_ptr<StatisticsRendezvous> statistics_;
  std::vector<PartStatistics> part_statistics_;
  std::vector<StatisticsSum> part_sums_;
  std::vector<TensorInfo> trainable_;  // the tensors an update hands the optimizer
  // compute_tree_gradients(): buffers of leaves and nodes (reused from step to step), which of
  // them are free, the computed leaves not yet taken (in leaf order), the leaves' losses, and the
  // values of the nodes the step ended with.
  std::vector<Buffer<T>> tree_buffers_;
  std::vector<std::size_t> free_tree_buffers_;
  std::deque<std::size_t> pending_leaves_;
  std::vector<Partial> leaf_partials_;
  std::vector<std::span<const T>> node_views_;
};

/// The engine that runs model M: this file's Engine on the CPU. cuda/engine.hpp specializes it for
/// device::Cuda; the primary template stops a CUDA model whose engine header is missing.
template <class M, class Device = typename M::device>
struct engine_for {
  static_assert(std::is_same_v<Device, device::Cpu>,
                "Model<..., device::Cuda>: include <flotilla/cuda/engine.hpp> (from a .cu file compiled by nvcc, "
                "linked to flotilla::cuda; see docs/gpu.md) before using a CUDA model in a Trainer");
  using type = Engine<M>;
  static_assert(ComputeEngine<type>, "the CPU engine does not satisfy ComputeEngine (concepts/engine.hpp)");
};

}  // namespace detail
}  // namespace flotilla
#endif  // FLOTILLA_TRAIN_DETAIL_ENGINE_HPP_INCLUDED
