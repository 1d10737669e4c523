// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_TARGETS_HPP_INCLUDED
#define FLOTILLA_CORE_TARGETS_HPP_INCLUDED
// What a loss compares a network's output with: class labels, or a matrix of target values.
#include <cstdint>
#include <span>

#include "flotilla/core/tensor.hpp"

namespace flotilla {

/// Which kind of target a loss reads.
enum class TargetKind { labels, values };

/// Targets of a batch. A classification loss reads `labels` (one class index per sample); a
/// regression loss reads `values` (outputs x batch, like the network's output).
template <class T>
struct Targets {
  std::span<const std::int32_t> labels;
  ConstMatrixView<T> values{nullptr, 0, 0};
};

}  // namespace flotilla
#endif  // FLOTILLA_CORE_TARGETS_HPP_INCLUDED
