// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_OPTIM_DETAIL_ROWSIZES_HPP_INCLUDED
#define FLOTILLA_OPTIM_DETAIL_ROWSIZES_HPP_INCLUDED
// The sizes a per-row optimizer checks on every call: a row, its state and its gradient.
#include <cstddef>
#include <string>
#include <string_view>

#include "flotilla/core/error.hpp"

namespace flotilla::optim::detail {

/// Throws ShapeError naming `optimizer` unless the state holds `expected_state` values and the
/// gradient `dim`, for a row of `dim` values.
inline void check_row_sizes(std::string_view optimizer, std::size_t dim, std::size_t state, std::size_t expected_state,
                            std::size_t gradient) {
  if (state != expected_state || gradient != dim)
    throw ShapeError(std::string(optimizer) + ": a row of " + std::to_string(dim) + " values with " + std::to_string(state) +
                     " state values (expected " + std::to_string(expected_state) + ") and a gradient of " +
                     std::to_string(gradient));
}

}  // namespace flotilla::optim::detail
#endif  // FLOTILLA_OPTIM_DETAIL_ROWSIZES_HPP_INCLUDED
