// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_ALLREDUCESMALL_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_ALLREDUCESMALL_HPP_INCLUDED
// allreduce_sum for a few values (metrics: losses, counts, confusion matrices) that every rank
// needs: a binomial tree to rank 0 and back, 2 * ceil(log2 N) message latencies, where a ring
// takes 2(N-1). The sum is taken in one fixed order (the tree's), so the result does not depend
// on timing, and every rank gets the bits rank 0 computed.
#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/tags.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::collective {

/// values = the element-wise sum of every rank's `values` (same size on every rank). For small
/// vectors of double or std::uint64_t; large buffers belong to ring_allreduce. Calls that may be
/// in flight at the same time on the same endpoints need distinct tags.
template <Transport E, class T>
  requires std::is_arithmetic_v<T> && (!std::is_same_v<T, bool>)
void allreduce_sum(E& e, std::span<T> values, Tag tag = default_tags::allreduce_small) {
  using Wire = codec::Raw<T>;
  const std::size_t n = e.size(), rank = e.rank();
  if (n == 1 || values.empty()) return;
  transport::OperationScope<E> op(e, tag, transport::OpKind::allreduce_small, values.size());
  std::vector<std::byte> bytes(Wire::encoded_size(values.size()));
  // Reduce: in round `mask`, ranks with that bit set send their partial sum down and stop.
  std::size_t mask = 1;
  for (; mask < n; mask <<= 1) {
    if (rank & mask) {
      Wire::encode(std::span<const T>(values), bytes);
      e.send(rank - mask, tag, std::span<const std::byte>(bytes));
      break;
    }
    if (rank + mask < n) {
      e.recv(rank + mask, tag, std::span<std::byte>(bytes));
      Wire::decode_add(std::span<const std::byte>(bytes), values);
    }
  }
  // Broadcast back along the same tree: receive from the parent, then send to the children.
  if (rank != 0) {
    e.recv(rank - mask, tag, std::span<std::byte>(bytes));
    Wire::decode(std::span<const std::byte>(bytes), values);
  } else {
    Wire::encode(std::span<const T>(values), bytes);
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rank + mask < n) e.send(rank + mask, tag, std::span<const std::byte>(bytes));
}

/// values = the element-wise maximum of every rank's `values`. Maxima are few (times, counts): each
/// rank's values go in its own slot of a zero-filled vector of size() slots, summed with
/// allreduce_sum (adding zeros is exact), and every rank takes each element's largest slot.
template <Transport E>
void allreduce_max(E& e, std::span<double> values, Tag tag = default_tags::allreduce_small) {
  const std::size_t n = e.size(), rank = e.rank();
  if (n == 1 || values.empty()) return;
  std::vector<double> spread(values.size() * n, 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) spread[i * n + rank] = values[i];
  allreduce_sum(e, std::span<double>(spread), tag);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = *std::max_element(spread.begin() + static_cast<std::ptrdiff_t>(i * n),
                                  spread.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
}

}  // namespace flotilla::collective
#endif  // FLOTILLA_COLLECTIVE_ALLREDUCESMALL_HPP_INCLUDED
