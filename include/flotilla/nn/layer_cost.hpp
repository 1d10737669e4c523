// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_LAYERCOST_HPP_INCLUDED
#define FLOTILLA_NN_LAYERCOST_HPP_INCLUDED
// What each layer of a network costs, estimated by the compiler from the layer types and the shapes
// Sequential infers: the numbers a model summary (nn/summary.hpp) prints and the pipeline's
// automatic split balances (pipeline/balance.hpp).
//
// Per sample:
//  - forward FLOPs. A layer may declare `static constexpr std::uint64_t forward_flops` itself.
//    Otherwise a layer with parameters is taken to be a linear map with one bias per output
//    channel, evaluated at every output position (Dense: once; Conv2D: at every pixel):
//      2 * (parameters - channels) * (output size / channels),
//    which is exact for Dense and Conv2D; a layer without parameters costs one operation per
//    input value (activations, pooling, copies).
//  - backward FLOPs: a layer with parameters computes two products of the forward's size (the
//    gradient of its input and of its weights); one without, one pass over its values.
//  - the bytes of its output (what crosses a cut placed after it, and what a stage keeps per
//    micro-batch until its backward) and of its parameters.
//
// These are estimates of arithmetic, not of time: memory-bound layers cost more than their FLOPs
// say. measure_layer_costs (timing.hpp) replaces them with timings of the layers on this machine.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/nn/sequential.hpp"

namespace flotilla {

struct LayerCost {
  std::string_view name;              ///< the layer's name, e.g. "Conv2D"
  std::uint64_t forward_flops = 0;    ///< per sample
  std::uint64_t backward_flops = 0;   ///< per sample
  std::uint64_t output_bytes = 0;     ///< per sample
  std::uint64_t parameter_bytes = 0;  ///< the layer's parameters
  /// What the balancer evens out: forward and backward work per sample.
  constexpr std::uint64_t compute() const noexcept { return forward_flops + backward_flops; }
};

/// The estimate for one concrete layer type L (see the header comment).
template <class L>
constexpr LayerCost estimate_layer_cost() {
  using T = typename L::scalar_type;
  constexpr std::uint64_t in = L::input_shape::size, out = L::output_shape::size;
  constexpr std::uint64_t channels = L::output_shape::dims[0];
  constexpr std::uint64_t params = L::parameter_count;
  LayerCost c;
  c.name = L::name;
  c.output_bytes = out * sizeof(T);
  c.parameter_bytes = params * sizeof(T);
  if constexpr (requires { { L::forward_flops } -> std::convertible_to<std::uint64_t>; }) {
    c.forward_flops = L::forward_flops;
    c.backward_flops = params > 0 ? 2 * c.forward_flops : c.forward_flops;
  } else if constexpr (params > channels) {
    c.forward_flops = 2 * (params - channels) * (out / channels);
    c.backward_flops = 2 * c.forward_flops;
  } else {
    c.forward_flops = in;
    c.backward_flops = in;
  }
  return c;
}

namespace detail {
template <class List>
struct costs_of;
template <class... Ls>
struct costs_of<type_list<Ls...>> {
  static constexpr std::array<LayerCost, sizeof...(Ls)> value{estimate_layer_cost<Ls>()...};
};
}  // namespace detail

/// Every layer's estimated cost, in layer order, for scalar type T.
template <Architecture Arch, class T = float>
inline constexpr auto estimated_costs = detail::costs_of<typename Arch::template layers<T>>::value;

/// The balancer's input: compute() of each layer.
template <Architecture Arch, class T = float>
constexpr std::array<std::uint64_t, Arch::depth> estimated_compute() {
  std::array<std::uint64_t, Arch::depth> r{};
  for (std::size_t i = 0; i < Arch::depth; ++i) r[i] = estimated_costs<Arch, T>[i].compute();
  return r;
}

}  // namespace flotilla
#endif  // FLOTILLA_NN_LAYERCOST_HPP_INCLUDED
