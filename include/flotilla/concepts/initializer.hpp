// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_INITIALIZER_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_INITIALIZER_HPP_INCLUDED
// The Initializer extension point: how a layer's weights are drawn. See nn/init.hpp for the
// built-in ones and docs/concepts/initializer.md for a user-written one.
#include <cstddef>
#include <span>

#include "flotilla/core/random.hpp"

namespace flotilla {

/// `I::fill(w, fan_in, fan_out, g)` fills the weights `w` from the generator `g`.
template <class I, class T>
concept Initializer = requires(std::span<T> w, std::size_t n, Generator& g) { I::fill(w, n, n, g); };

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_INITIALIZER_HPP_INCLUDED
