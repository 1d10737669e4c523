// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_ROWFTRL_HPP_INCLUDED
#define FLOTILLA_OPTIM_ROWFTRL_HPP_INCLUDED
// FTRL-Proximal on the rows a step touched: McMahan et al., "Ad Click Prediction: a View from the
// Trenches" (KDD 2013), Algorithm 1, per value with gradient g:
//
//   sigma = (sqrt(n + g^2) - sqrt(n)) / alpha
//   z    += g - sigma * w
//   n    += g^2
//   w     = 0                                                  if |z| <= l1
//         = -(z - sgn(z) l1) / ((beta + sqrt(n)) / alpha + l2)  otherwise.
//
// The L1 term sets values exactly to zero (a sparse model: rare IDs' rows stay empty), which plain
// SGD with an L1 penalty never does. The state is (z, n), two floats per value, both 0 on a new row:
// w is a function of them, so rows must start at zero (zero_initial_rows). The arithmetic runs in
// double, because sqrt(n + g^2) - sqrt(n) cancels once n is large.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "flotilla/concepts/row_optimizer.hpp"
#include "flotilla/optim/detail/row_sizes.hpp"
#include "flotilla/core/error.hpp"

namespace flotilla::optim {

struct RowFtrl {
  static constexpr std::string_view name = "row-FTRL";
  static constexpr bool zero_initial_rows = true;
  double alpha = 0.05;  ///< the per-value learning rate's scale
  double beta = 1.0;    ///< smooths the first steps: the rate starts at alpha / beta
  double l1 = 0;        ///< L1 strength: |z| at or below it makes the value exactly 0
  double l2 = 0;        ///< L2 strength

  std::size_t state_size(std::size_t dim) const noexcept { return 2 * dim; }

  /// z = n = 0. The row must be zero (zero_initial_rows): a non-zero one would be overwritten by
  /// the first update as if it had been zero.
  void init_state(std::span<const float> row, std::span<float> state) const {
    check(row.size(), state.size(), row.size());
    for (auto& s : state) s = 0;
  }

  void apply(std::span<float> row, std::span<float> state, std::span<const float> gradient) const {
    const std::size_t dim = row.size();
    check(dim, state.size(), gradient.size());
    float* z = state.data();
    float* n = state.data() + dim;
    for (std::size_t i = 0; i < dim; ++i) {
      const double g = gradient[i], n_old = n[i], n_new = n_old + g * g;
      const double sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / alpha;
      const double z_new = static_cast<double>(z[i]) + g - sigma * static_cast<double>(row[i]);
      z[i] = static_cast<float>(z_new);
      n[i] = static_cast<float>(n_new);
      row[i] = std::abs(z_new) <= l1 ? 0.0f
                                     : static_cast<float>(-(z_new - std::copysign(l1, z_new)) /
                                                          ((beta + std::sqrt(n_new)) / alpha + l2));
    }
  }

 private:
  void check(std::size_t dim, std::size_t state, std::size_t gradient) const {
    detail::check_row_sizes(name, dim, state, state_size(dim), gradient);
  }
};
static_assert(RowOptimizer<RowFtrl>);
static_assert(row_optimizer_needs_zero_rows<RowFtrl>);

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_ROWFTRL_HPP_INCLUDED
