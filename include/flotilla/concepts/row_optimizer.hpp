// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_ROWOPTIMIZER_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_ROWOPTIMIZER_HPP_INCLUDED
// The RowOptimizer extension point: how one row of an embedding table is updated from its
// gradient. See docs/concepts/row_optimizer.md.
//
// A sparse step touches a few thousand rows of a table with millions, so the update is applied to
// each touched row alone, with state that lives beside the row (Adagrad's accumulator, FTRL's z
// and n, Adam's moments and the row's own step count): rows never touched cost nothing, and a row's
// state moves with it (to the server that owns it, into its checkpoint).
#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>

namespace flotilla {

/// A per-row optimizer O:
///  - `O::name`;
///  - `o.state_size(dim)`: floats of state a row of `dim` values keeps (0 for SGD);
///  - `o.init_state(row, state)`: the state of a row created with values `row` (called once, on
///    the row's first touch, after its values are initialised);
///  - `o.apply(row, state, gradient)`: one update of the row from its gradient (the coalesced sum
///    over the batch of every occurrence of the row's ID, already scaled like every gradient in
///    flotilla: by 1 / global batch size).
/// Rows whose state makes their values a function of it (FTRL computes w from z and n) require
/// tables that start at zero: such an optimizer says `static constexpr bool zero_initial_rows = true`.
template <class O>
concept RowOptimizer = requires(const O& o, std::span<float> row, std::span<float> state,
                                std::span<const float> gradient, std::size_t dim) {
  { O::name } -> std::convertible_to<std::string_view>;
  { o.state_size(dim) } -> std::same_as<std::size_t>;
  o.init_state(std::span<const float>(row), state);
  o.apply(row, state, gradient);
};

/// Whether O needs rows that start at zero (false unless it says so).
template <class O>
inline constexpr bool row_optimizer_needs_zero_rows = [] {
  if constexpr (requires { { O::zero_initial_rows } -> std::convertible_to<bool>; }) {
    return static_cast<bool>(O::zero_initial_rows);
  } else {
    return false;
  }
}();

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_ROWOPTIMIZER_HPP_INCLUDED
