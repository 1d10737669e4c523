// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_ROWLAZYADAM_HPP_INCLUDED
#define FLOTILLA_OPTIM_ROWLAZYADAM_HPP_INCLUDED
// Lazy Adam: Adam on the rows a step touched, with moments and a step count per row.
//
// Each row keeps its first and second moments m, v and its own step count t (the number of
// updates it has had), and takes exactly the step of flotilla's dense Adam (optim/adam.hpp, which
// is PyTorch's torch.optim.Adam) at step t:
//
//   m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2,
//   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
//
// So a row touched by every step follows dense Adam value for value. Rows not touched keep their
// moments unchanged (they are not decayed by the steps that skip them), as in TensorFlow Addons'
// LazyAdam and PyTorch's SparseAdam. Those two differ from this one in two ways: their bias
// correction counts the optimizer's global steps, where this one counts the row's own updates (a
// row's moments have only seen t gradients, and the step count has to live in the row's state
// since a row update knows nothing else); and they add eps to sqrt(v) before the correction
// (w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)), where this one, like dense Adam,
// adds it after.
//
// State per row: m (dim floats), v (dim floats), t (one float, counting exactly to 2^24 updates,
// after which it stays put; by then 1 - b^t is 1 to float precision for any useful beta).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <Eigen/Core>

#include "flotilla/concepts/optimizer.hpp"
#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/optim/detail/row_sizes.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/optim/adam.hpp"

namespace flotilla::optim {

struct RowLazyAdam {
  static constexpr std::string_view name = "row-lazy-Adam";
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;

  std::size_t state_size(std::size_t dim) const noexcept { return 2 * dim + 1; }

  void init_state(std::span<const float> row, std::span<float> state) const {
    check(row.size(), state.size(), row.size());
    for (auto& s : state) s = 0;
  }

  void apply(std::span<float> row, std::span<float> state, std::span<const float> gradient) const {
    const std::size_t dim = row.size();
    check(dim, state.size(), gradient.size());
    float& count = state[2 * dim];
    count += 1.0f;
    detail::AdamConfig config;
    config.learning_rate = learning_rate;
    config.beta1 = beta1;
    config.beta2 = beta2;
    config.epsilon = epsilon;
    config.weight_decay = 0;
    const StepInfo info{static_cast<std::uint64_t>(count), learning_rate};
    const auto rule = detail::adam_rule<false, float>(config, info);
    using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
    const auto n = static_cast<Eigen::Index>(dim);
    rule(false, Eigen::Map<Array>(row.data(), n), Eigen::Map<const Array>(gradient.data(), n),
         Eigen::Map<Array>(state.data(), n), Eigen::Map<Array>(state.data() + dim, n));
  }

 private:
  void check(std::size_t dim, std::size_t state, std::size_t gradient) const {
    detail::check_row_sizes(name, dim, state, state_size(dim), gradient);
  }
};
static_assert(RowOptimizer<RowLazyAdam>);

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_ROWLAZYADAM_HPP_INCLUDED
