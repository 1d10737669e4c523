// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_LAYERARGS_HPP_INCLUDED
#define FLOTILLA_CORE_LAYERARGS_HPP_INCLUDED
// What a layer receives in forward and backward, and how it describes its parameter tensors.
// The Layer concept (concepts/layer.hpp) is written in terms of these types.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>

#include "flotilla/core/tensor.hpp"

namespace flotilla {

/// Training enables stochastic layers (Dropout); evaluation makes every layer deterministic.
enum class Mode { train, eval };

/// What a parameter tensor is for. Optimizers may treat them differently (no decay on biases or
/// on normalisation parameters).
///  - `normalization`: the learned scale and shift of a normalisation layer (BatchNorm's gamma and
///    beta), which weight decay usually leaves alone;
///  - `state`: not trained: values a layer keeps from step to step (BatchNorm's running mean and
///    variance). They live in the flat parameter buffer, so that checkpoints, broadcasts and
///    parameter-server shards carry them like any parameter, but no optimizer sees them: the
///    layer writes each step's increment into the gradient buffer, where the workers' increments
///    are combined as gradients are (a sum weighted by their share of the global batch), and the
///    update adds it (see apply_state_increments).
enum class TensorRole { weight, bias, other, normalization, state };

/// Which samples a normalisation layer's batch statistics are taken over: the worker's batch (all
/// its threads' parts) or the global batch of every worker in the update.
enum class StatisticsScope { worker, global };

/// Sums a few values over every part of a training step that shares a normalisation's statistics
/// (the threads of a worker, and, for StatisticsScope::global, the workers): each part passes its
/// own values and gets the sum back, in a fixed order, so the result does not depend on timing.
/// Every part must call it the same number of times, in the same order (layers call it in forward
/// and backward, in layer order). A non-owning reference to a callable, valid during the call
/// that was given it.
class StatisticsSum {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, StatisticsSum> &&
             std::is_invocable_v<F&, std::span<double>, StatisticsScope>)
  explicit StatisticsSum(F& f) noexcept
      : target_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* target, std::span<double> values, StatisticsScope scope) { (*static_cast<F*>(target))(values, scope); }) {}

  void operator()(std::span<double> values, StatisticsScope scope) const { call_(target_, values, scope); }

 private:
  void* target_;
  void (*call_)(void*, std::span<double>, StatisticsScope);
};

/// One parameter tensor of a layer, as the layer declares it.
struct TensorSpec {
  std::string_view name;
  std::size_t size;
  TensorRole role = TensorRole::weight;
};

/// One parameter tensor's place in a flat buffer: what a network tells optimizers and policies.
/// Offsets are relative to the start of the buffer (or shard) that is passed along with it.
struct TensorInfo {
  std::size_t layer = 0;        ///< index of the owning layer in the network
  std::string_view layer_name;  ///< e.g. "Dense"
  std::string_view name;        ///< e.g. "weight"
  std::size_t offset = 0;       ///< first element
  std::size_t size = 0;         ///< number of elements
  TensorRole role = TensorRole::weight;
};

/// Arguments of Layer::forward. `input` and `output` are (features x batch), one sample a column.
template <class T>
struct ForwardArgs {
  ConstMatrixView<T> input;
  /// Written by the layer (mutable: the view is const, the values it shows are not).
  mutable MatrixView<T> output;
  /// This layer's slice of the flat parameter buffer (empty when it has no parameters).
  std::span<const T> params;
  Mode mode = Mode::eval;
  /// A stable id per sample (its index in the data set), so that per-sample randomness is the same
  /// however the batch was split across threads and workers. Never empty when called by Network.
  std::span<const std::uint64_t> sample_ids;
  /// Key for per-sample randomness: mixes the run's seed, the epoch and the layer's position.
  std::uint64_t noise_key = 0;
  /// In training, where the parts of the step meet to sum batch statistics; null when this call's
  /// batch is all there is (a layer then takes its statistics over it alone).
  const StatisticsSum* statistics = nullptr;
  /// In training, each sample's weight in the update's gradient (1 / the samples it averages
  /// over): what a layer's `state` increments are weighted by. 0 outside training steps.
  double sample_weight = 0;
  /// False when no backward follows (evaluation, prediction): a layer may then keep less than its
  /// backward would need (a block keeps only what its next inner layer reads).
  bool backward_follows = true;
};

/// Arguments of Layer::backward. The layer adds d(loss)/d(params) into `param_grads` (gradients
/// accumulate, so micro-batches can be summed), and writes d(loss)/d(input) into `input_grad`
/// unless it is empty (the first layer's input needs no gradient).
template <class T>
struct BackwardArgs {
  ConstMatrixView<T> input;
  ConstMatrixView<T> output;
  ConstMatrixView<T> output_grad;
  mutable MatrixView<T> input_grad;
  std::span<const T> params;
  std::span<T> param_grads;
  /// As in the forward that this backward follows (ForwardArgs).
  const StatisticsSum* statistics = nullptr;
  double sample_weight = 0;

  bool wants_input_grad() const noexcept { return input_grad.data() != nullptr; }
};

/// What a layer's optional second backward, `backward(args, final_from)`, is given: calling
/// `final_from(offset)` says that `args.param_grads[offset, end)` will not change again in this
/// backward, so that whoever waits for them (a gradient bucket's allreduce, a parameter-server
/// push) can start before the layer returns. Offsets are relative to the layer's slice and must
/// decrease from call to call; what a layer never reports is reported when its backward returns.
/// A non-owning reference to a callable: cheap to copy, valid for the duration of the call.
class GradientProgress {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, GradientProgress> && std::is_invocable_v<F&, std::size_t>)
  explicit GradientProgress(F& f) noexcept
      : target_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* target, std::size_t offset) { (*static_cast<F*>(target))(offset); }) {}

  void operator()(std::size_t offset) const { call_(target_, offset); }

 private:
  void* target_;
  void (*call_)(void*, std::size_t);
};

}  // namespace flotilla
#endif  // FLOTILLA_CORE_LAYERARGS_HPP_INCLUDED
