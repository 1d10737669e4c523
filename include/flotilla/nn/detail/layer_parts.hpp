// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_DETAIL_LAYERPARTS_HPP_INCLUDED
#define FLOTILLA_NN_DETAIL_LAYERPARTS_HPP_INCLUDED
// What every layer made of layers (a chain of them in a block, branches side by side) needs to know
// about its parts at compile time: each part's slice of the layer's parameters, the tensor table
// with qualified names, the initialisation and the estimated cost.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "flotilla/core/random.hpp"
#include "flotilla/nn/detail/scoped_tensors.hpp"
#include "flotilla/nn/layer_cost.hpp"

namespace flotilla::detail {

template <std::size_t N>
constexpr std::array<std::size_t, N> exclusive_prefix_sums(const std::array<std::size_t, N>& a) noexcept {
  std::array<std::size_t, N> r{};
  std::size_t sum = 0;
  for (std::size_t i = 0; i < N; ++i) {
    r[i] = sum;
    sum += a[i];
  }
  return r;
}

/// Calls f.template operator()<I>() for I = 0 .. N-1, or N-1 .. 0.
template <std::size_t N, class F>
void for_each_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<I>(), ...); }(std::make_index_sequence<N>{});
}
template <std::size_t N, class F>
void for_each_index_reverse(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<N - 1 - I>(), ...); }(std::make_index_sequence<N>{});
}

template <class... Ls>
struct LayerParts {
  static constexpr std::size_t size = sizeof...(Ls);
  using tuple_type = std::tuple<Ls...>;
  template <std::size_t I>
  using part = std::tuple_element_t<I, tuple_type>;

  static constexpr std::array<std::size_t, size> parameter_counts{Ls::parameter_count...};
  static constexpr std::array<std::size_t, size> parameter_offsets = exclusive_prefix_sums(parameter_counts);
  static constexpr std::size_t parameter_count = (Ls::parameter_count + ... + 0);
  static constexpr std::size_t tensor_count = (tensor_count_of<Ls>() + ... + 0);
  static constexpr std::uint64_t forward_flops = (estimate_layer_cost<Ls>().forward_flops + ... + 0);
  static constexpr std::uint64_t backward_flops = (estimate_layer_cost<Ls>().backward_flops + ... + 0);

  /// The parts' tensors in order; part i's scoped by labels[i], or by its position where the
  /// label is empty (or no labels are given).
  static constexpr std::array<ScopedTensor, tensor_count> scoped(std::array<std::string_view, size> labels = {}) noexcept {
    std::array<ScopedTensor, tensor_count> out{};
    std::size_t k = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (append_scoped<part<I>>(out, k, labels[I], I), ...);
    }(std::make_index_sequence<size>{});
    return out;
  }

  /// Part I's slice of the layer's parameters (or gradients).
  template <std::size_t I, class S>
  static S slice(S all) noexcept {
    return all.subspan(parameter_offsets[I], parameter_counts[I]);
  }

  /// Each part with parameters draws them from its own sub-stream of `g`.
  template <class T>
  static void initialize(const tuple_type& parts, std::span<T> params, Generator& g) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (initialize_part<I>(parts, params, g), ...);
    }(std::make_index_sequence<size>{});
  }

 private:
  template <std::size_t I, class T>
  static void initialize_part(const tuple_type& parts, std::span<T> params, Generator& g) {
    if constexpr (parameter_counts[I] > 0) {
      Generator own = g.fork(I);
      std::get<I>(parts).initialize(slice<I>(params), own);
    }
  }
};

template <class List>
struct parts_of;
template <class... Ls>
struct parts_of<type_list<Ls...>> {
  using type = LayerParts<Ls...>;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_NN_DETAIL_LAYERPARTS_HPP_INCLUDED
