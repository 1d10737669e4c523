// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_NETWORK_HPP_INCLUDED
#define FLOTILLA_NN_NETWORK_HPP_INCLUDED
// Network<Arch, T>: runs an architecture's layers forward and backward over one batch at a time.
//
// A Network holds the layer objects and the activations of its last forward pass, but not the
// parameters: those live in one flat buffer passed in (see Parameters), so that several Networks
// (one per thread) can share them, and so that policies and transports can send, compress and
// bucket the whole buffer without any per-layer copying. Layer i owns the slice
// [parameter_offsets[i], parameter_offsets[i] + parameter_counts[i]) of it, laid out in the order of
// the layer's declared tensors.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/concepts/layer.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/nn/detail/layer_parts.hpp"
#include "flotilla/nn/sequential.hpp"

namespace flotilla {

/// How a forward pass runs: mode, and the keys of per-sample randomness.
struct RunInfo {
  Mode mode = Mode::eval;
  /// Stable ids of the batch's samples (indices in the data set); empty means 0, 1, 2, ...
  std::span<const std::uint64_t> sample_ids;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  /// In training: where normalisation layers sum their batch statistics with the step's other
  /// parts, and each sample's weight in the update (ForwardArgs says more).
  const StatisticsSum* statistics = nullptr;
  double sample_weight = 0;
  /// False for a forward that no backward follows (evaluation, prediction): layers made of layers
  /// then keep only the activations their next part reads, and backward is refused.
  bool backward_follows = true;
};

/// A callback told when a layer's parameter gradients are final during backward; the default
/// does nothing. Gradient buckets use it to start communication before backward ends.
struct NoHook {
  void operator()(std::size_t /*layer*/, std::size_t /*offset*/, std::size_t /*count*/) const noexcept {}
};

/// Wraps a backward hook so that it also hears about parts of layers: the layers that stream their
/// gradients (StreamsGradients) then compute them in an order that lets parts be reported early,
/// and report them. A plain hook hears about whole layers only, and every layer computes in its
/// fastest order.
template <class F>
struct PartsHook {
  F& hook;
  void operator()(std::size_t layer, std::size_t offset, std::size_t count) const { hook(layer, offset, count); }
};

namespace detail {
template <class H>
inline constexpr bool hears_parts = false;
template <class F>
inline constexpr bool hears_parts<PartsHook<F>> = true;

template <class List>
struct list_to_tuple;
template <class... Ls>
struct list_to_tuple<type_list<Ls...>> {
  using type = std::tuple<Ls...>;
};
}  // namespace detail

template <Architecture Arch, class T = float>
class Network {
  using tuple_type = typename detail::list_to_tuple<typename Arch::template layers<T>>::type;

 public:
  using architecture = Arch;
  using scalar_type = T;
  using input_shape = typename Arch::input_shape;
  using output_shape = typename Arch::output_shape;
  static constexpr std::size_t depth = std::tuple_size_v<tuple_type>;
  template <std::size_t I>
  using layer_type = std::tuple_element_t<I, tuple_type>;

 private:
  template <std::size_t... I>
  static constexpr std::array<std::size_t, depth> counts(std::index_sequence<I...>) {
    return {layer_type<I>::parameter_count...};
  }
  template <std::size_t... I>
  static constexpr std::array<std::size_t, depth> in_sizes(std::index_sequence<I...>) {
    return {layer_type<I>::input_shape::size...};
  }
  template <std::size_t... I>
  static constexpr std::array<std::size_t, depth> out_sizes(std::index_sequence<I...>) {
    return {layer_type<I>::output_shape::size...};
  }
  template <std::size_t... I>
  static constexpr std::size_t count_tensors(std::index_sequence<I...>) {
    return (detail::tensor_count_of<layer_type<I>>() + ... + 0);
  }

 public:
  static constexpr std::array<std::size_t, depth> parameter_counts = counts(std::make_index_sequence<depth>{});
  static constexpr std::array<std::size_t, depth> parameter_offsets = detail::exclusive_prefix_sums(parameter_counts);
  static constexpr std::array<std::size_t, depth> input_sizes = in_sizes(std::make_index_sequence<depth>{});
  static constexpr std::array<std::size_t, depth> output_sizes = out_sizes(std::make_index_sequence<depth>{});
  static constexpr std::size_t parameter_count = parameter_offsets[depth - 1] + parameter_counts[depth - 1];
  static constexpr std::size_t tensor_count = count_tensors(std::make_index_sequence<depth>{});

 private:
  template <std::size_t I>
  static constexpr void add_tensors(std::array<TensorInfo, tensor_count>& out, std::size_t& k) {
    using L = layer_type<I>;
    if constexpr (L::parameter_count > 0) {
      std::size_t offset = parameter_offsets[I];
      for (const auto& t : L::tensors) {
        out[k++] = TensorInfo{I, L::name, t.name, offset, t.size, t.role};
        offset += t.size;
      }
    }
  }
  template <std::size_t... I>
  static constexpr std::array<TensorInfo, tensor_count> make_tensors(std::index_sequence<I...>) {
    std::array<TensorInfo, tensor_count> out{};
    std::size_t k = 0;
    (add_tensors<I>(out, k), ...);
    return out;
  }
  template <std::size_t I>
  static constexpr bool tensors_partition_layer() {
    using L = layer_type<I>;
    if constexpr (L::parameter_count > 0) {
      std::size_t sum = 0;
      for (const auto& t : L::tensors) sum += t.size;
      return sum == L::parameter_count;
    } else {
      return true;
    }
  }
  template <std::size_t... I>
  static constexpr bool all_tensors_partition(std::index_sequence<I...>) {
    return (tensors_partition_layer<I>() && ...);
  }
  static_assert(all_tensors_partition(std::make_index_sequence<depth>{}),
                "flotilla: a layer's tensors must add up to its parameter_count (see docs/concepts/layer.md)");

 public:
  /// Every parameter tensor, in buffer order.
  static constexpr std::array<TensorInfo, tensor_count> tensors = make_tensors(std::make_index_sequence<depth>{});

  /// Draws every layer's parameters from `seed`. Layer i uses its own sub-stream, so changing one
  /// layer leaves the others' initial values unchanged.
  void initialize(std::span<T> params, std::uint64_t seed) const {
    check_size(params.size(), "initialize: parameter buffer");
    const Generator root(seed);
    detail::for_each_index<depth>([&]<std::size_t I>() {
      using L = layer_type<I>;
      if constexpr (L::parameter_count > 0) {
        Generator g = root.fork(I);
        std::get<I>(layers_).initialize(params.subspan(parameter_offsets[I], L::parameter_count), g);
      }
    });
  }

  /// Runs the batch `input` ((input size) x batch) through every layer; returns the output view,
  /// valid until the next forward.
  ConstMatrixView<T> forward(ConstMatrixView<T> input, std::span<const T> params, const RunInfo& info = {}) {
    check_size(params.size(), "forward: parameter buffer");
    if (input.rows() != static_cast<Eigen::Index>(input_shape::size))
      throw ShapeError("Network::forward: input has " + std::to_string(input.rows()) + " rows, the network expects " +
                       std::to_string(input_shape::size));
    batch_ = static_cast<std::size_t>(input.cols());
    input_ = input.data();
    statistics_ = info.statistics;
    sample_weight_ = info.sample_weight;
    backward_allowed_ = info.backward_follows;
    ensure_buffers();
    if (info.sample_ids.empty() || info.sample_ids.size() != batch_) {
      default_ids_.resize(batch_);
      for (std::size_t i = 0; i < batch_; ++i) default_ids_[i] = i;
    }
    const auto ids = info.sample_ids.size() == batch_ ? info.sample_ids : std::span<const std::uint64_t>(default_ids_);
    detail::for_each_index<depth>([&]<std::size_t I>() {
      using L = layer_type<I>;
      ForwardArgs<T> a{layer_input<I>(), activation<I>(), params.subspan(parameter_offsets[I], L::parameter_count),
                       info.mode, ids, detail::mix(detail::mix(info.seed, info.epoch), I + 1), info.statistics,
                       info.sample_weight, info.backward_follows};
      std::get<I>(layers_).forward(a);
    });
    return output();
  }

  /// Back-propagates `output_grad` (d loss / d output of the last forward). Adds parameter
  /// gradients into `grads` (so zero it first unless accumulating), and calls
  /// `on_layer_done(layer, offset, count)` as soon as gradients [offset, offset + count), the end
  /// of a layer's slice, are final: once per layer with the whole slice when its backward returns,
  /// last layer first, and, when the hook is a PartsHook, before that for ever longer tails of the
  /// layers that report them (StreamsGradients). When `input_grad` is given, d loss / d input is
  /// written there.
  template <class Hook = NoHook>
  void backward(ConstMatrixView<T> output_grad, std::span<const T> params, std::span<T> grads,
                Hook&& on_layer_done = {}, MatrixView<T>* input_grad = nullptr) {
    check_size(params.size(), "backward: parameter buffer");
    check_size(grads.size(), "backward: gradient buffer");
    if (input_ == nullptr) throw Error("Network::backward called before forward");
    if (!backward_allowed_)
      throw Error("Network::backward after a forward run with RunInfo::backward_follows = false, which kept only what "
                  "evaluation needs");
    if (output_grad.rows() != static_cast<Eigen::Index>(output_shape::size) ||
        output_grad.cols() != static_cast<Eigen::Index>(batch_))
      throw ShapeError("Network::backward: output gradient is " + std::to_string(output_grad.rows()) + "x" +
                       std::to_string(output_grad.cols()) + ", expected " + std::to_string(output_shape::size) + "x" +
                       std::to_string(batch_));
    const T* upstream = output_grad.data();
    constexpr bool parts = detail::hears_parts<std::remove_cvref_t<Hook>>;
    detail::for_each_index_reverse<depth>([&]<std::size_t I>() {
      using L = layer_type<I>;
      const auto b = static_cast<Eigen::Index>(batch_);
      // Layer I writes d(input) into one ping-pong buffer while reading d(output) from the other.
      // (An Eigen Map cannot be re-pointed after construction: assignment copies values.)
      T* din_data = nullptr;
      if constexpr (I > 0) {
        din_data = (I % 2 ? grad_a_ : grad_b_).data();
      } else {
        din_data = input_grad ? input_grad->data() : nullptr;
      }
      MatrixView<T> din(din_data, din_data ? static_cast<Eigen::Index>(input_sizes[I]) : 0, din_data ? b : 0);
      BackwardArgs<T> a{layer_input<I>(),
                        ConstMatrixView<T>(activation<I>().data(), static_cast<Eigen::Index>(output_sizes[I]), b),
                        ConstMatrixView<T>(upstream, static_cast<Eigen::Index>(output_sizes[I]), b),
                        din,
                        params.subspan(parameter_offsets[I], L::parameter_count),
                        grads.subspan(parameter_offsets[I], L::parameter_count),
                        statistics_,
                        sample_weight_};
      if constexpr (parts && L::parameter_count > 0 && StreamsGradients<L>) {
        auto tail_done = [&](std::size_t offset) {
          if (offset < L::parameter_count) on_layer_done(I, parameter_offsets[I] + offset, L::parameter_count - offset);
        };
        std::get<I>(layers_).backward(a, GradientProgress(tail_done));
      } else {
        std::get<I>(layers_).backward(a);
      }
      if constexpr (L::parameter_count > 0) on_layer_done(I, parameter_offsets[I], L::parameter_count);
      upstream = din.data();
    });
  }

  /// The output of the last forward pass ((output size) x batch).
  ConstMatrixView<T> output() const {
    return ConstMatrixView<T>(activations_.data() + activation_offset(depth - 1),
                              static_cast<Eigen::Index>(output_shape::size), static_cast<Eigen::Index>(batch_));
  }
  std::size_t batch_size() const noexcept { return batch_; }

  template <std::size_t I>
  layer_type<I>& layer() noexcept {
    return std::get<I>(layers_);
  }

 private:
  static void check_size(std::size_t n, const char* what) {
    if (n != parameter_count)
      throw ShapeError(std::string("Network::") + what + " holds " + std::to_string(n) + " values, the network has " +
                       std::to_string(parameter_count) + " parameters");
  }

  std::size_t activation_offset(std::size_t layer) const {
    std::size_t off = 0;
    for (std::size_t i = 0; i < layer; ++i) off += output_sizes[i];
    return off * batch_;
  }

  template <std::size_t I>
  ConstMatrixView<T> layer_input() const {
    const auto b = static_cast<Eigen::Index>(batch_);
    if constexpr (I == 0) {
      return ConstMatrixView<T>(input_, static_cast<Eigen::Index>(input_sizes[0]), b);
    } else {
      return ConstMatrixView<T>(activations_.data() + activation_offset(I - 1), static_cast<Eigen::Index>(input_sizes[I]),
                                b);
    }
  }
  template <std::size_t I>
  MatrixView<T> activation() {
    return MatrixView<T>(activations_.data() + activation_offset(I), static_cast<Eigen::Index>(output_sizes[I]),
                         static_cast<Eigen::Index>(batch_));
  }

  void ensure_buffers() {
    std::size_t total = 0, widest = 0;
    for (std::size_t i = 0; i < depth; ++i) {
      total += output_sizes[i];
      widest = std::max(widest, input_sizes[i]);
    }
    if (activations_.size() < total * batch_) activations_.resize(total * batch_);
    if (grad_a_.size() < widest * batch_) {
      grad_a_.resize(widest * batch_);
      grad_b_.resize(widest * batch_);
    }
  }

  tuple_type layers_{};
  Buffer<T> activations_;
  Buffer<T> grad_a_, grad_b_;
  std::vector<std::uint64_t> default_ids_;
  const T* input_ = nullptr;
  std::size_t batch_ = 0;
  const StatisticsSum* statistics_ = nullptr;  // of the last forward, for its backward
  double sample_weight_ = 0;
  bool backward_allowed_ = true;
};

}  // namespace flotilla
#endif  // FLOTILLA_NN_NETWORK_HPP_INCLUDED
