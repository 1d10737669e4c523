// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_INIT_HPP_INCLUDED
#define FLOTILLA_NN_INIT_HPP_INCLUDED
// Weight initialisers. Each is a type with a static `fill`, chosen as a layer's template argument
// (Dense<256, init::He>). They draw from flotilla's Generator, so a seed fixes the weights exactly.
#include <cmath>
#include <cstddef>
#include <span>

#include "flotilla/concepts/initializer.hpp"
#include "flotilla/core/random.hpp"

namespace flotilla::init {

/// Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)). Suits tanh, sigmoid, linear.
struct Glorot {
  template <class T>
  static void fill(std::span<T> w, std::size_t fan_in, std::size_t fan_out, Generator& g) {
    const double a = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    for (auto& x : w) x = static_cast<T>(g.uniform<double>(-a, a));
  }
};

/// He/Kaiming normal: N(0, 2 / fan_in). Suits ReLU.
struct He {
  template <class T>
  static void fill(std::span<T> w, std::size_t fan_in, std::size_t /*fan_out*/, Generator& g) {
    const double s = std::sqrt(2.0 / static_cast<double>(fan_in));
    for (auto& x : w) x = static_cast<T>(s * g.normal<double>());
  }
};

/// He/Kaiming uniform: U(-a, a), a = sqrt(6 / fan_in).
struct HeUniform {
  template <class T>
  static void fill(std::span<T> w, std::size_t fan_in, std::size_t /*fan_out*/, Generator& g) {
    const double a = std::sqrt(6.0 / static_cast<double>(fan_in));
    for (auto& x : w) x = static_cast<T>(g.uniform<double>(-a, a));
  }
};

/// PyTorch's default for Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform
/// with a = sqrt(5)). Useful to compare curves with PyTorch from the same kind of start.
struct LeCunUniform {
  template <class T>
  static void fill(std::span<T> w, std::size_t fan_in, std::size_t /*fan_out*/, Generator& g) {
    const double a = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (auto& x : w) x = static_cast<T>(g.uniform<double>(-a, a));
  }
};

}  // namespace flotilla::init

#endif  // FLOTILLA_NN_INIT_HPP_INCLUDED
