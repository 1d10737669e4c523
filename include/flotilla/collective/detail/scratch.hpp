// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_DETAIL_SCRATCH_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_DETAIL_SCRATCH_HPP_INCLUDED
// Message buffers of the collectives, kept by each calling thread between calls: allocating (and
// first touching) tens of megabytes per allreduce would cost more than moving them in-process.
#include <cstddef>
#include <vector>

namespace flotilla::detail {

/// The calling thread's scratch bytes. One collective call at a time uses them (a call never runs
/// inside another on the same thread); each grows them to what it needs.
inline std::vector<std::byte>& collective_buffers() {
  thread_local std::vector<std::byte> buffers;
  return buffers;
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_COLLECTIVE_DETAIL_SCRATCH_HPP_INCLUDED
