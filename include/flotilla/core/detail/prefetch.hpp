// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_DETAIL_PREFETCH_HPP_INCLUDED
#define FLOTILLA_CORE_DETAIL_PREFETCH_HPP_INCLUDED
// A hint that memory at `p` will be read soon. Lookups in tables larger than the caches (a
// server's rows, a batch of examples in shuffled order) walk addresses the hardware cannot guess;
// asking for them a few items ahead overlaps the misses instead of taking them one by one.

#include <cstddef>

namespace flotilla::detail {

// Always inlined, as every helper that only asks for memory must be: GCC takes a function whose
// body is nothing but prefetches for one without effects, and drops the calls to it it did not
// inline.
[[gnu::always_inline]] inline void prefetch(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

/// How many items ahead a lookup loop asks for the memory of the next ones: enough to cover a
/// miss to DRAM (and a page walk) at a few ns of work per item, few enough to stay in the L1
/// cache. On the click-through benchmark (docs/benchmarks.md) 16 is slower and 64 no faster.
inline constexpr std::size_t prefetch_distance = 32;

}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_DETAIL_PREFETCH_HPP_INCLUDED
