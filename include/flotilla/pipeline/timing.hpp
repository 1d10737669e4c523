// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_TIMING_HPP_INCLUDED
#define FLOTILLA_PIPELINE_TIMING_HPP_INCLUDED
// measure_layer_costs: each layer's forward plus backward, timed on this machine, as costs for
// Plan::automatic in place of the compile-time FLOP estimates (cost_model.hpp), which do not see
// that pooling and copies are memory-bound or that a GEMM runs faster at some shapes than others.
//
// Each layer runs alone (a one-layer StageNetwork) on random inputs of `batch` samples, `repeats`
// times after one warm-up; its cost is the fastest run in nanoseconds (the minimum is the least
// disturbed by other work on the machine). The result depends on the machine and the moment: a job
// whose ranks measure separately could split differently, so measure on one rank and send the
// costs (or the resulting cut points) to the others, or measure once and pass the cuts.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "flotilla/concepts/architecture.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/random.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/pipeline/stage_network.hpp"

namespace flotilla::pipeline {

template <Architecture Arch, class T = float>
std::vector<std::uint64_t> measure_layer_costs(std::size_t batch, std::size_t repeats = 3, std::uint64_t seed = 1) {
  if (batch == 0 || repeats == 0) throw ConfigError("pipeline::measure_layer_costs: batch and repeats must be > 0");
  std::vector<std::uint64_t> costs(Arch::depth);
  Generator g(seed);
  for (std::size_t i = 0; i < Arch::depth; ++i) {
    StageNetwork<Arch, T> layer(i, i + 1, batch);
    Buffer<T> params(layer.parameter_count()), grads(layer.parameter_count());
    layer.initialize(params, seed);
    Buffer<T> input(layer.input_size() * batch), dout(layer.output_size() * batch), din(layer.input_size() * batch);
    for (auto& v : input) v = g.normal<T>();
    for (auto& v : dout) v = g.normal<T>();
    const auto b = static_cast<Eigen::Index>(batch);
    const ConstMatrixView<T> in(input.data(), static_cast<Eigen::Index>(layer.input_size()), b);
    const ConstMatrixView<T> dy(dout.data(), static_cast<Eigen::Index>(layer.output_size()), b);
    MatrixView<T> dx(din.data(), static_cast<Eigen::Index>(layer.input_size()), b);
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r <= repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      layer.forward(in, params, RunInfo{Mode::train, {}, seed, 0});
      layer.backward(dy, params, grads, i > 0 ? &dx : nullptr);
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, ns);  // run 0 warms caches and sizes the layers' scratch
    }
    costs[i] = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(best));
  }
  return costs;
}

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_TIMING_HPP_INCLUDED
