// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_POLICY_ACCUMULATE_HPP_INCLUDED
#define FLOTILLA_POLICY_ACCUMULATE_HPP_INCLUDED
// policy::Accumulate<K, Inner>: gradients of K batches are added up before the inner policy
// communicates and updates once: an effective batch K times larger at the memory cost of one,
// and K times fewer messages.
#include <cstddef>
#include <string_view>

#include "flotilla/concepts/update_policy.hpp"
#include "flotilla/policy/synchronous.hpp"

namespace flotilla::policy {

template <std::size_t K, class Inner = Synchronous<>>
struct Accumulate : Inner {
  static_assert(K > 0, "policy::Accumulate<K, Inner>: K, the number of batches per update, must be > 0");
  static constexpr std::size_t micro_batches = K * policy_micro_batches<Inner>;
};

}  // namespace flotilla::policy
#endif  // FLOTILLA_POLICY_ACCUMULATE_HPP_INCLUDED
