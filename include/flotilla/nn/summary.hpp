// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_SUMMARY_HPP_INCLUDED
#define FLOTILLA_NN_SUMMARY_HPP_INCLUDED
// A model's summary, as Keras' summary() prints it: each layer with the shape it produces, its
// parameters and its forward FLOPs per sample, then the totals. Everything in it is known at
// compile time (the shapes Sequential infers, the estimates of nn/layer_cost.hpp); summary()
// only lays it out.
//
//   #  layer      output shape   parameters  forward FLOPs
//   1  Conv2D     32 x 28 x 28          320        476,672
//   ...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/nn/layer_cost.hpp"
#include "flotilla/nn/sequential.hpp"

namespace flotilla {

struct LayerSummary {
  std::string_view name;                  ///< e.g. "Conv2D"
  std::vector<std::size_t> output_shape;  ///< one sample's: {N}, or {C, H, W} for an image
  std::size_t parameters = 0;
  /// Of `parameters`, those not trained (TensorRole::state: BatchNorm's running estimates).
  std::size_t state = 0;
  std::uint64_t forward_flops = 0;  ///< per sample (nn/layer_cost.hpp says how it is counted)
};

struct ModelSummary {
  std::vector<std::size_t> input_shape;
  std::vector<LayerSummary> layers;
  std::size_t scalar_bytes = 0;  ///< of the model's scalar type

  /// The layers' parameters, all together, and their bytes.
  std::size_t parameters() const noexcept {
    std::size_t n = 0;
    for (const auto& l : layers) n += l.parameters;
    return n;
  }
  std::size_t parameter_bytes() const noexcept { return parameters() * scalar_bytes; }
  /// Of the parameters, those not trained (running statistics), and those trained.
  std::size_t state() const noexcept {
    std::size_t n = 0;
    for (const auto& l : layers) n += l.state;
    return n;
  }
  std::size_t trainable() const noexcept { return parameters() - state(); }
  /// Per sample, the layers' forward FLOPs together.
  std::uint64_t forward_flops() const noexcept {
    std::uint64_t n = 0;
    for (const auto& l : layers) n += l.forward_flops;
    return n;
  }

  /// The table: one line per layer, then the totals.
  std::string to_string() const {
    std::vector<std::vector<std::string>> rows{{"#", "layer", "output shape", "parameters", "forward FLOPs"}};
    rows.push_back({"", "input", shape_text(input_shape), "", ""});
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& l = layers[i];
      rows.push_back({std::to_string(i + 1), std::string(l.name), shape_text(l.output_shape),
                      grouped(l.parameters), grouped(l.forward_flops)});
    }
    rows.push_back({"", "total", "", grouped(parameters()), grouped(forward_flops())});
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& r : rows)
      for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    std::string out;
    for (const auto& r : rows) {
      for (std::size_t c = 0; c < r.size(); ++c) {
        // Names and shapes to the left, counts to the right, as numbers are read.
        const std::string pad(width[c] - r[c].size(), ' ');
        out += c == 0 ? "" : "  ";
        out += c == 1 || c == 2 ? r[c] + pad : pad + r[c];
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += '\n';
    }
    out += "parameters: " + grouped(parameters()) + " (" + bytes_text(parameter_bytes()) + ")";
    if (state() > 0) out += ", of which trained " + grouped(trainable()) + ", running statistics " + grouped(state());
    out += "; forward FLOPs per sample: " + grouped(forward_flops()) + '\n';
    return out;
  }

  friend std::ostream& operator<<(std::ostream& os, const ModelSummary& s) { return os << s.to_string(); }

 private:
  static std::string shape_text(const std::vector<std::size_t>& dims) {
    std::string s;
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
    return s;
  }
  static std::string grouped(std::uint64_t n) {
    std::string digits = std::to_string(n), s;
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
      s += digits[i];
    }
    return s;
  }
  static std::string bytes_text(std::size_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB"};
    double v = static_cast<double>(bytes);
    std::size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
  }
};

namespace detail {
template <class L>
constexpr std::size_t state_count_of() noexcept {
  std::size_t n = 0;
  if constexpr (L::parameter_count > 0)
    for (const auto& t : L::tensors) n += t.role == TensorRole::state ? t.size : 0;
  return n;
}
template <class S>
std::vector<std::size_t> dims_of() {
  return std::vector<std::size_t>(S::dims.begin(), S::dims.end());
}
template <class List>
struct summarize_layers;
template <class... Ls>
struct summarize_layers<type_list<Ls...>> {
  static std::vector<LayerSummary> get() {
    return {LayerSummary{Ls::name, dims_of<typename Ls::output_shape>(), Ls::parameter_count, state_count_of<Ls>(),
                         estimate_layer_cost<Ls>().forward_flops}...};
  }
};
}  // namespace detail

/// The summary of architecture Arch (a Sequential) in scalar type T.
template <Architecture Arch, class T = float>
ModelSummary summary() {
  ModelSummary s;
  s.input_shape = detail::dims_of<typename Arch::input_shape>();
  s.layers = detail::summarize_layers<typename Arch::template layers<T>>::get();
  s.scalar_bytes = sizeof(T);
  return s;
}

}  // namespace flotilla
#endif  // FLOTILLA_NN_SUMMARY_HPP_INCLUDED
