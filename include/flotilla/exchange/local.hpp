// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_EXCHANGE_LOCAL_HPP_INCLUDED
#define FLOTILLA_EXCHANGE_LOCAL_HPP_INCLUDED
// exchange::Local: the default exchange of peer-to-peer policies that combine gradients
// themselves (reduce_gradients_in_backward = false), such as local SGD.
#include <string_view>

#include "flotilla/concepts/gradient_exchange.hpp"

namespace flotilla::exchange {

/// No exchange during backward: the policy's step() receives this worker's own gradient and
/// combines it with the others' itself (through its context's collectives), if at all.
template <class T>
struct Local {
  static constexpr std::string_view name = "local";
  template <class Peers>
  void exchange(GradientBucket<T, Peers>&) {}
};

}  // namespace flotilla::exchange
#endif  // FLOTILLA_EXCHANGE_LOCAL_HPP_INCLUDED
