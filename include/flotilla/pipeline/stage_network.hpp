// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_STAGENETWORK_HPP_INCLUDED
#define FLOTILLA_PIPELINE_STAGENETWORK_HPP_INCLUDED
// StageNetwork<Arch, T>: layers [first, last) of a network, run forward and backward like Network
// runs all of them: the part of the model one pipeline stage computes.
//
// The range is chosen at run time (a Plan may come from timings), so one type serves every stage
// of every split. What makes a stage compute exactly what the whole network computes on those
// layers:
//  - parameters: the stage's slice of the whole network's flat buffer, [parameter_offset(first),
//    parameter_offset(last)) (layers are laid out in order), initialised layer by layer from the
//    same sub-streams Network::initialize uses;
//  - per-sample randomness (Dropout) is keyed on the layer's index in the *whole* network;
//  - the layers are the whole network's types, bound to the same shapes.
//
// A stage keeps the activations of its last forward (its input is not copied: the caller keeps it
// alive until backward) in buffers sized once for `max_batch` samples, so a pipeline that keeps one
// StageNetwork per micro-batch in flight allocates nothing after construction.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/nn/network.hpp"

namespace flotilla::pipeline {

template <Architecture Arch, class T = float>
class StageNetwork {
  using whole = Network<Arch, T>;

 public:
  static constexpr std::size_t depth = whole::depth;

  StageNetwork(std::size_t first, std::size_t last, std::size_t max_batch)
      : first_(first), last_(last), max_batch_(max_batch) {
    if (first >= last || last > depth)
      throw ConfigError("pipeline::StageNetwork: layers [" + std::to_string(first) + ", " + std::to_string(last) +
                        ") are not a non-empty range of the network's " + std::to_string(depth) + " layers");
    if (max_batch == 0) throw ConfigError("pipeline::StageNetwork: max_batch must be > 0");
    std::size_t total = 0, widest = 0;
    offsets_.assign(depth, 0);
    for (std::size_t i = first; i < last; ++i) {
      offsets_[i] = total;
      total += whole::output_sizes[i];
      widest = std::max(widest, whole::input_sizes[i]);
    }
    activations_.resize(total * max_batch);
    grad_a_.resize(widest * max_batch);
    grad_b_.resize(widest * max_batch);
    ids_.resize(max_batch);
  }

  std::size_t first_layer() const noexcept { return first_; }
  std::size_t end_layer() const noexcept { return last_; }
  std::size_t input_size() const noexcept { return whole::input_sizes[first_]; }
  std::size_t output_size() const noexcept { return whole::output_sizes[last_ - 1]; }
  std::size_t parameter_offset() const noexcept { return whole::parameter_offsets[first_]; }
  std::size_t parameter_count() const noexcept { return parameter_end(last_) - parameter_offset(); }
  std::size_t max_batch() const noexcept { return max_batch_; }
  /// Bytes of activations a forward pass of `batch` samples leaves for backward: what this stage
  /// computed (its layers' outputs). Its input is counted by whoever holds it.
  std::size_t activation_bytes(std::size_t batch) const noexcept {
    std::size_t values = 0;
    for (std::size_t i = first_; i < last_; ++i) values += whole::output_sizes[i];
    return values * batch * sizeof(T);
  }

  /// The stage's tensors, offsets relative to the start of its parameter slice.
  std::vector<TensorInfo> tensors() const {
    std::vector<TensorInfo> r;
    for (const auto& t : whole::tensors)
      if (t.layer >= first_ && t.layer < last_) {
        r.push_back(t);
        r.back().offset -= parameter_offset();
      }
    return r;
  }

  /// Writes the stage's parameters, the values Network::initialize gives them in the whole buffer.
  void initialize(std::span<T> params, std::uint64_t seed) {
    check_parameters(params.size(), "initialize");
    const Generator root(seed);
    for_each_layer([&]<std::size_t I>() {
      using L = typename whole::template layer_type<I>;
      if constexpr (L::parameter_count > 0) {
        Generator g = root.fork(I);
        std::get<I>(layers_).initialize(slice<I>(params), g);
      }
    });
  }

  /// Runs `input` ((input_size) x batch, kept alive by the caller until backward) through the
  /// stage's layers; returns the output, valid until the next forward.
  ConstMatrixView<T> forward(ConstMatrixView<T> input, std::span<const T> params, const RunInfo& info = {}) {
    check_parameters(params.size(), "forward");
    const auto b = static_cast<std::size_t>(input.cols());
    if (input.rows() != static_cast<Eigen::Index>(input_size()) || b > max_batch_)
      throw ShapeError("pipeline::StageNetwork (layers " + std::to_string(first_) + "-" + std::to_string(last_ - 1) +
                       "): input is " + std::to_string(input.rows()) + "x" + std::to_string(b) + ", expected " +
                       std::to_string(input_size()) + " rows and at most " + std::to_string(max_batch_) + " columns");
    batch_ = b;
    input_ = input.data();
    statistics_ = info.statistics;
    sample_weight_ = info.sample_weight;
    std::span<const std::uint64_t> ids = info.sample_ids;
    if (ids.size() != b) {
      for (std::size_t i = 0; i < b; ++i) ids_[i] = i;
      ids = std::span<const std::uint64_t>(ids_.data(), b);
    }
    for_each_layer([&]<std::size_t I>() {
      // The same noise key Network gives layer I of the whole network.
      ForwardArgs<T> a{layer_input<I>(), activation<I>(), slice<I>(params), info.mode, ids,
                       flotilla::detail::mix(flotilla::detail::mix(info.seed, info.epoch), I + 1), info.statistics,
                       info.sample_weight, info.backward_follows};
      std::get<I>(layers_).forward(a);
    });
    return output();
  }

  /// Back-propagates `output_grad` through the stage after its forward: adds the parameter
  /// gradients into `grads` (the stage's slice) and, when `input_grad` is given, writes d(loss)/d(input).
  void backward(ConstMatrixView<T> output_grad, std::span<const T> params, std::span<T> grads,
                MatrixView<T>* input_grad = nullptr) {
    check_parameters(params.size(), "backward");
    check_parameters(grads.size(), "backward (gradients)");
    if (input_ == nullptr) throw Error("pipeline::StageNetwork::backward called before forward");
    const auto b = static_cast<Eigen::Index>(batch_);
    if (output_grad.rows() != static_cast<Eigen::Index>(output_size()) || output_grad.cols() != b)
      throw ShapeError("pipeline::StageNetwork::backward: output gradient is " + std::to_string(output_grad.rows()) + "x" +
                       std::to_string(output_grad.cols()) + ", expected " + std::to_string(output_size()) + "x" +
                       std::to_string(batch_));
    const T* upstream = output_grad.data();
    bool ping = false;
    for_each_layer_reverse([&]<std::size_t I>() {
      T* din = nullptr;
      if (I > first_) {
        din = (ping ? grad_a_ : grad_b_).data();
        ping = !ping;
      } else if (input_grad) {
        din = input_grad->data();
      }
      MatrixView<T> din_view(din, din ? static_cast<Eigen::Index>(whole::input_sizes[I]) : 0, din ? b : 0);
      const auto out_rows = static_cast<Eigen::Index>(whole::output_sizes[I]);
      BackwardArgs<T> a{layer_input<I>(), ConstMatrixView<T>(activation<I>().data(), out_rows, b),
                        ConstMatrixView<T>(upstream, out_rows, b), din_view, slice<I>(params), slice<I>(grads),
                        statistics_, sample_weight_};
      std::get<I>(layers_).backward(a);
      upstream = din;
    });
  }

  ConstMatrixView<T> output() const {
    return ConstMatrixView<T>(activations_.data() + offsets_[last_ - 1] * batch_, static_cast<Eigen::Index>(output_size()),
                              static_cast<Eigen::Index>(batch_));
  }
  std::size_t batch_size() const noexcept { return batch_; }

 private:
  static constexpr std::size_t parameter_end(std::size_t layer) {
    return layer == depth ? whole::parameter_count : whole::parameter_offsets[layer];
  }

  template <class F>
  void for_each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I >= first_ && I < last_ ? f.template operator()<I>() : void()), ...);
    }(std::make_index_sequence<depth>{});
  }
  template <class F>
  void for_each_layer_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((depth - 1 - I >= first_ && depth - 1 - I < last_ ? f.template operator()<depth - 1 - I>() : void()), ...);
    }(std::make_index_sequence<depth>{});
  }

  template <std::size_t I, class U>
  std::span<U> slice(std::span<U> stage_buffer) const {
    return stage_buffer.subspan(whole::parameter_offsets[I] - parameter_offset(), whole::parameter_counts[I]);
  }

  template <std::size_t I>
  ConstMatrixView<T> layer_input() const {
    const auto rows = static_cast<Eigen::Index>(whole::input_sizes[I]);
    if (I == first_) return ConstMatrixView<T>(input_, rows, static_cast<Eigen::Index>(batch_));
    return ConstMatrixView<T>(activations_.data() + offsets_[I - 1] * batch_, rows, static_cast<Eigen::Index>(batch_));
  }
  template <std::size_t I>
  MatrixView<T> activation() {
    return MatrixView<T>(activations_.data() + offsets_[I] * batch_, static_cast<Eigen::Index>(whole::output_sizes[I]),
                         static_cast<Eigen::Index>(batch_));
  }

  void check_parameters(std::size_t n, const char* what) const {
    if (n != parameter_count())
      throw ShapeError("pipeline::StageNetwork::" + std::string(what) + ": the buffer holds " + std::to_string(n) +
                       " values, layers " + std::to_string(first_) + "-" + std::to_string(last_ - 1) + " have " +
                       std::to_string(parameter_count()) + " parameters");
  }

  typename flotilla::detail::list_to_tuple<typename Arch::template layers<T>>::type layers_{};
  std::size_t first_, last_, max_batch_;
  std::vector<std::size_t> offsets_;  // per layer in range: first value of its output, per sample
  Buffer<T> activations_;
  Buffer<T> grad_a_, grad_b_;
  std::vector<std::uint64_t> ids_;
  const T* input_ = nullptr;
  std::size_t batch_ = 0;
  const StatisticsSum* statistics_ = nullptr;  // of the last forward, for its backward
  double sample_weight_ = 0;
};

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_STAGENETWORK_HPP_INCLUDED
