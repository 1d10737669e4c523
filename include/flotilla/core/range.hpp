// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_RANGE_HPP_INCLUDED
#define FLOTILLA_CORE_RANGE_HPP_INCLUDED
// A half-open range of a flat buffer: what gradient buckets, parameter-server shards and the
// engine's ready reports are made of.
#include <cstddef>

namespace flotilla::detail {

/// [begin, end) of a flat buffer.
struct Range {
  std::size_t begin = 0, end = 0;
  std::size_t size() const noexcept { return end - begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

}  // namespace flotilla::detail
#endif  // FLOTILLA_CORE_RANGE_HPP_INCLUDED
