// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_ELEMENTMATH_HPP_INCLUDED
#define FLOTILLA_CORE_ELEMENTMATH_HPP_INCLUDED
// The arithmetic of element-wise rules (optimizer updates, activations, losses), for bodies written
// once and run by both engines. Each function takes either one scalar (a GPU thread's element, or
// the host's scalar loops) or an Eigen array expression (the CPU engine's vectorised path) and
// returns the same kind: a scalar or a lazy expression.
//
// For an array the function is Eigen's own (x.sqrt(), x.square(), ...), so a rule written with
// these is evaluated on the CPU exactly as the hand-written Eigen expression would be. For a scalar
// it is the C library's function on the host and CUDA's on the device; the two libraries round
// transcendental functions differently, so the engines agree to float rounding, not bit for bit.
#include <cmath>
#include <type_traits>

// Eigen declares ArrayBase::erf() in Core but defines it here; its float form is vectorised.
#include <unsupported/Eigen/SpecialFunctions>

#include "flotilla/core/host_device.hpp"

namespace flotilla::element {

namespace detail {
template <class X>
struct scalar_of {
  using type = typename X::Scalar;
};
template <class X>
  requires std::is_arithmetic_v<X>
struct scalar_of<X> {
  using type = X;
};
}  // namespace detail

/// The element type of X: X itself for a scalar, X::Scalar for an Eigen expression.
template <class X>
using scalar_t = typename detail::scalar_of<std::remove_cvref_t<X>>::type;

template <class X>
inline constexpr bool is_scalar = std::is_arithmetic_v<std::remove_cvref_t<X>>;

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto square(const X& x) {
  if constexpr (is_scalar<X>) {
    return x * x;
  } else {
    return x.square();
  }
}

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto sqrt(const X& x) {
  if constexpr (is_scalar<X>) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<X, float>) return ::sqrtf(x); else return ::sqrt(x);
#else
    return std::sqrt(x);
#endif
  } else {
    return x.sqrt();
  }
}

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto exp(const X& x) {
  if constexpr (is_scalar<X>) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<X, float>) return ::expf(x); else return ::exp(x);
#else
    return std::exp(x);
#endif
  } else {
    return x.exp();
  }
}

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto log(const X& x) {
  if constexpr (is_scalar<X>) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<X, float>) return ::logf(x); else return ::log(x);
#else
    return std::log(x);
#endif
  } else {
    return x.log();
  }
}

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto tanh(const X& x) {
  if constexpr (is_scalar<X>) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<X, float>) return ::tanhf(x); else return ::tanh(x);
#else
    return std::tanh(x);
#endif
  } else {
    return x.tanh();
  }
}

FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto erf(const X& x) {
  if constexpr (is_scalar<X>) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<X, float>) return ::erff(x); else return ::erf(x);
#else
    return std::erf(x);
#endif
  } else {
    return x.erf();
  }
}

/// max(x, floor) element by element.
FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto max(const X& x, scalar_t<X> floor) {
  if constexpr (is_scalar<X>) {
    return x > floor ? x : floor;
  } else {
    return x.cwiseMax(floor);
  }
}

/// `value` where `test` > 0, else 0, element by element (a select, not a multiply by a mask).
FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X, class Y>
FLOTILLA_HOST_DEVICE auto where_positive(const X& test, const Y& value) {
  using S = scalar_t<X>;
  if constexpr (is_scalar<X>) {
    return test > S(0) ? value : S(0);
  } else {
    return (test > S(0)).select(value, S(0));
  }
}

/// `if_positive` where `test` > 0, else `otherwise`, element by element.
FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X, class A, class B>
FLOTILLA_HOST_DEVICE auto select_positive(const X& test, const A& if_positive, const B& otherwise) {
  using S = scalar_t<X>;
  if constexpr (is_scalar<X>) {
    return test > S(0) ? if_positive : otherwise;
  } else {
    return (test > S(0)).select(if_positive, otherwise);
  }
}

/// -1, 0 or +1 by the sign of x.
FLOTILLA_HOST_DEVICE_TEMPLATE
template <class X>
FLOTILLA_HOST_DEVICE auto sign(const X& x) {
  using S = scalar_t<X>;
  if constexpr (is_scalar<X>) {
    return x > S(0) ? S(1) : x < S(0) ? S(-1) : S(0);
  } else {
    return x.sign();
  }
}

}  // namespace flotilla::element
#endif  // FLOTILLA_CORE_ELEMENTMATH_HPP_INCLUDED
