// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_NETWORK_HPP_INCLUDED
#define FLOTILLA_CUDA_NETWORK_HPP_INCLUDED
// cuda::Network<Arch>: an architecture's layers forward and backward on the GPU, the counterpart of
// nn/network.hpp. The parameter layout (offsets, counts, tensor table) is the CPU Network's own
// constants, so the flat buffers are interchangeable between devices; activations are kept on the
// device for backward, in the same (features x batch) layout.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/cuda/buffer.hpp"
#include "flotilla/cuda/composite.hpp"
#include "flotilla/cuda/context.hpp"
#include "flotilla/cuda/elementwise.hpp"
#include "flotilla/cuda/index_math.hpp"
#include "flotilla/cuda/layers.hpp"
#include "flotilla/nn/network.hpp"

namespace flotilla::cuda {

namespace detail {
template <class List>
struct widest_pixels_of;

/// The pixels of L's bias sums (the length per sample of the vector of ones they need); for a
/// layer made of layers, the widest of its parts'.
template <class L>
constexpr std::size_t pixels_of() {
  if constexpr (requires { typename L::layers; }) {
    return widest_pixels_of<typename L::layers>::value;
  } else if constexpr (requires { L::pixels; }) {
    return L::pixels;
  } else {
    return 1;
  }
}

template <class... Ls>
struct widest_pixels_of<flotilla::detail::type_list<Ls...>> {
  static constexpr std::size_t value = std::max({std::size_t{1}, pixels_of<Ls>()...});
};
}  // namespace detail

template <Architecture Arch>
class Network {
 public:
  using cpu_network = flotilla::Network<Arch, float>;
  static constexpr std::size_t depth = cpu_network::depth;
  static constexpr auto parameter_counts = cpu_network::parameter_counts;
  static constexpr auto parameter_offsets = cpu_network::parameter_offsets;
  static constexpr auto input_sizes = cpu_network::input_sizes;
  static constexpr auto output_sizes = cpu_network::output_sizes;
  static constexpr std::size_t parameter_count = cpu_network::parameter_count;
  static constexpr std::size_t input_size = input_sizes[0], output_size = output_sizes[depth - 1];

 private:
  template <std::size_t... I>
  static auto make_tuple_type(std::index_sequence<I...>)
      -> std::tuple<device_layer_t<typename cpu_network::template layer_type<I>>...>;
  using tuple_type = decltype(make_tuple_type(std::make_index_sequence<depth>{}));

  template <std::size_t... I>
  static constexpr std::size_t widest_pixels(std::index_sequence<I...>) {
    return std::max({detail::pixels_of<typename cpu_network::template layer_type<I>>()...});
  }
  static constexpr std::size_t ones_per_sample = widest_pixels(std::make_index_sequence<depth>{});

 public:
  /// Runs `batch` samples of `input` ((input size) x batch, device) through every layer; returns the
  /// output (device, valid until the next forward). `ids` (device, batch values) key dropout.
  /// In training, `statistics` is where normalisation layers meet the other workers (null: alone)
  /// and `sample_weight` each sample's weight in the update (ForwardArgs says more).
  const float* forward(const Context& ctx, const float* input, std::size_t batch, const float* params, Mode mode,
                       const std::uint64_t* ids, std::uint64_t seed, std::uint64_t epoch,
                       const StatisticsSum* statistics = nullptr, double sample_weight = 0) {
    ensure_buffers(ctx, batch);
    batch_ = batch;
    input_ = input;
    statistics_ = statistics;
    sample_weight_ = sample_weight;
    for_each_index([&]<std::size_t I>() {
      DeviceForwardArgs a{ctx, layer_input<I>(), activation<I>(), batch, params + parameter_offsets[I], mode, ids,
                          layer_noise_key(seed, epoch, I), statistics, sample_weight};
      std::get<I>(layers_).forward(a);
    });
    return output();
  }

  /// Back-propagates `output_grad` (device) through the last forward. Adds parameter gradients
  /// into `grads` (device); calls `on_layer_done(layer, offset, count)` once each layer with
  /// parameters has enqueued its gradient work on the compute stream (last layer first). Writes
  /// d loss / d input to `input_grad` when it is not null.
  template <class Hook>
  void backward(const Context& ctx, const float* output_grad, const float* params, float* grads, Hook&& on_layer_done,
                float* input_grad = nullptr) {
    if (input_ == nullptr) throw Error("cuda::Network::backward called before forward");
    const float* upstream = output_grad;
    for_each_index_reverse([&]<std::size_t I>() {
      float* din = nullptr;
      if constexpr (I > 0) {
        din = (I % 2 ? grad_a_ : grad_b_).data();
      } else {
        din = input_grad;
      }
      DeviceBackwardArgs a{ctx, layer_input<I>(), activation<I>(), upstream, din, params + parameter_offsets[I],
                           grads + parameter_offsets[I], batch_, ones_.data(), statistics_, sample_weight_};
      std::get<I>(layers_).backward(a);
      if constexpr (parameter_counts[I] > 0) on_layer_done(I, parameter_offsets[I], parameter_counts[I]);
      upstream = din;
    });
  }

  const float* output() const { return activations_.data() + activation_offset(depth - 1); }
  std::size_t batch_size() const noexcept { return batch_; }

 private:
  template <class F>
  static void for_each_index(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<I>(), ...); }(std::make_index_sequence<depth>{});
  }
  template <class F>
  static void for_each_index_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<depth - 1 - I>(), ...);
    }(std::make_index_sequence<depth>{});
  }

  std::size_t activation_offset(std::size_t layer) const {
    std::size_t off = 0;
    for (std::size_t i = 0; i < layer; ++i) off += output_sizes[i];
    return off * batch_;
  }
  template <std::size_t I>
  const float* layer_input() const {
    if constexpr (I == 0) {
      return input_;
    } else {
      return activations_.data() + activation_offset(I - 1);
    }
  }
  template <std::size_t I>
  float* activation() {
    return activations_.data() + activation_offset(I);
  }

  void ensure_buffers(const Context& ctx, std::size_t batch) {
    std::size_t total = 0, widest = 0;
    for (std::size_t i = 0; i < depth; ++i) {
      total += output_sizes[i];
      widest = std::max(widest, input_sizes[i]);
    }
    activations_.reserve(total * batch);
    grad_a_.reserve(widest * batch);
    grad_b_.reserve(widest * batch);
    if (ones_.size() < ones_per_sample * batch) {
      ones_ = DeviceBuffer<float>(ones_per_sample * batch);
      detail::fill(ctx.compute(), ones_.data(), 1.0f, ones_.size());
    }
  }

  tuple_type layers_{};
  DeviceBuffer<float> activations_, grad_a_, grad_b_, ones_;
  const float* input_ = nullptr;
  std::size_t batch_ = 0;
  const StatisticsSum* statistics_ = nullptr;  // of the last forward, for its backward
  double sample_weight_ = 0;
};

}  // namespace flotilla::cuda
#endif  // FLOTILLA_CUDA_NETWORK_HPP_INCLUDED
