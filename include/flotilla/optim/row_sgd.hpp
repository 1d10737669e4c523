// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_ROWSGD_HPP_INCLUDED
#define FLOTILLA_OPTIM_ROWSGD_HPP_INCLUDED
// Plain SGD on the rows a step touched: w -= lr * g. No state.
#include <cstddef>
#include <span>
#include <string_view>

#include "flotilla/concepts/row_optimizer.hpp"

namespace flotilla::optim {

struct RowSGD {
  static constexpr std::string_view name = "row-SGD";
  double learning_rate = 0.01;

  std::size_t state_size(std::size_t /*dim*/) const noexcept { return 0; }
  void init_state(std::span<const float> /*row*/, std::span<float> /*state*/) const noexcept {}
  void apply(std::span<float> row, std::span<float> /*state*/, std::span<const float> gradient) const noexcept {
    const auto lr = static_cast<float>(learning_rate);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] -= lr * gradient[i];
  }
};
static_assert(RowOptimizer<RowSGD>);

}  // namespace flotilla::optim
#endif  // FLOTILLA_OPTIM_ROWSGD_HPP_INCLUDED
