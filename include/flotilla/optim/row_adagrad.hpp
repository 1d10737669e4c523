// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_ROWADAGRAD_HPP_INCLUDED
#define FLOTILLA_OPTIM_ROWADAGRAD_HPP_INCLUDED
// Adagrad on the rows a step touched, as PyTorch's torch.optim.Adagrad (without its learning-rate
// decay and weight decay): per value, a running sum of squared gradients
//
//   acc += g^2,   w -= lr * g / (sqrt(acc) + eps),
//
// so that values seen often (a popular ID's row) take smaller steps than rare ones. The state is
// the accumulator, one float per value, starting at `initial_accumulator`.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <Eigen/Core>

#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/optim/detail/row_sizes.hpp"
#include "flotilla/core/error.hpp"

namespace flotilla::optim {

struct RowAdagrad {
  static constexpr std::string_view name = "row-Adagrad";
  double learning_rate = 0.01;
  double initial_accumulator = 0;
  double epsilon = 1e-10;

  std::size_t state_size(std::size_t dim) const noexcept { return dim; }

  void init_state(std::span<const float> row, std::span<float> state) const {
    check(row.size(), state.size(), row.size());
    for (auto& a : state) a = static_cast<float>(initial_accumulator);
  }

  void apply(std::span<float> row, std::span<float> state, std::span<const float> gradient) const {
    check(row.size(), state.size(), gradient.size());
    const auto lr = static_cast<float>(learning_rate), eps = static_cast<float>(epsilon);
    // Eigen's arrays, not a loop over std::sqrt: a scalar sqrt that may set errno keeps the
    // compiler from vectorising the loop, and a row is updated thousands of times a step.
    const auto n = static_cast<Eigen::Index>(row.size());
    Eigen::Map<Eigen::ArrayXf> w(row.data(), n), acc(state.data(), n);
    const Eigen::Map<const Eigen::ArrayXf> g(gradient.data(), n);
    acc += g.square();
    w -= lr * (g / (acc.sqrt() + eps));
  }

 private:
  void check(std::size_t dim, std::size_t state, std::size_t gradient) const {
    detail::check_row_sizes(name, dim, state, state_size(dim), gradient);
  }
};
static_assert(RowOptimizer<RowAdagrad>);

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_ROWADAGRAD_HPP_INCLUDED
