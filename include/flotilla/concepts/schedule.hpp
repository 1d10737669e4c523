// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_SCHEDULE_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_SCHEDULE_HPP_INCLUDED
// The learning-rate Schedule extension point: any callable from an update's index to a factor.
#include <concepts>
#include <cstdint>

namespace flotilla {

/// `s(step)` is the factor applied to the base learning rate at update `step` (0 for the first).
template <class S>
concept Schedule = requires(const S& s, std::uint64_t step) {
  { s(step) } -> std::convertible_to<double>;
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_SCHEDULE_HPP_INCLUDED
