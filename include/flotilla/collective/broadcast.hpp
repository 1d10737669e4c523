// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_BROADCAST_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_BROADCAST_HPP_INCLUDED
// Broadcast over any Transport: every rank ends with the root's values (the initial parameters).
//
// A pipelined chain, not a tree. The ranks form a chain starting at the root (root, root+1, ...);
// the buffer moves in segments, and each rank forwards segment k to the next while receiving
// segment k+1 from the previous (one sendrecv). Every link carries the buffer exactly once, so the
// time is about (P + (N-2) * segment) / bandwidth: for the large, one-off broadcast of a model's
// parameters that is close to a single transfer, whatever N. A binomial tree needs log2(N)
// rounds of the whole buffer, its root sending it log2(N) times; it wins only for small buffers,
// where latency dominates, and those are not what this is for.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/tags.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::collective {

struct BroadcastOptions {
  /// Bytes per message: each rank forwards a segment while the next one arrives.
  std::size_t segment_bytes = 256 * 1024;
  /// The tag of this call's messages; broadcasts that may be in flight at the same time on the
  /// same endpoints need distinct tags.
  Tag tag = default_tags::broadcast;
};

}  // namespace flotilla::collective

namespace flotilla::detail {

template <class E>
void chain_broadcast_bytes(E& e, std::span<std::byte> bytes, std::size_t root, const collective::BroadcastOptions& o) {
  const std::size_t n = e.size(), rank = e.rank();
  if (n == 1 || bytes.empty()) return;
  const Tag tag = o.tag;
  const std::size_t position = (rank + n - root) % n;  // in the chain
  const std::size_t next = (rank + 1) % n, previous = (rank + n - 1) % n;
  const std::size_t seg = std::max<std::size_t>(1, o.segment_bytes);
  const std::size_t segments = (bytes.size() + seg - 1) / seg;
  auto segment = [&](std::size_t k) { return bytes.subspan(k * seg, std::min(seg, bytes.size() - k * seg)); };
  if (position == 0) {
    for (std::size_t k = 0; k < segments; ++k) e.send(next, tag, std::span<const std::byte>(segment(k)));
  } else if (position == n - 1) {
    for (std::size_t k = 0; k < segments; ++k) e.recv(previous, tag, segment(k));
  } else {
    e.recv(previous, tag, segment(0));
    for (std::size_t k = 0; k + 1 < segments; ++k)
      e.sendrecv(next, tag, std::span<const std::byte>(segment(k)), previous, segment(k + 1));
    e.send(next, tag, std::span<const std::byte>(segment(segments - 1)));
  }
}

}  // namespace flotilla::detail

namespace flotilla::collective {

/// Copies the root's `data` into every other rank's `data` (same size on every rank, little-endian
/// on the wire). Every rank must call it with the same root and options.
template <Transport E, class T>
  requires std::is_arithmetic_v<T>
void broadcast(E& e, std::span<T> data, std::size_t root, const BroadcastOptions& options = {}) {
  if (root >= e.size())
    throw ConfigError("broadcast: root " + std::to_string(root) + ", but the job has " + std::to_string(e.size()) +
                      " ranks");
  transport::OperationScope<E> op(e, options.tag, transport::OpKind::broadcast, data.size());
  if constexpr (std::endian::native == std::endian::little) {
    detail::chain_broadcast_bytes(e, std::as_writable_bytes(data), root, options);
  } else {
    std::vector<std::byte> bytes(codec::Raw<T>::encoded_size(data.size()));
    if (e.rank() == root) codec::Raw<T>::encode(std::span<const T>(data), bytes);
    detail::chain_broadcast_bytes(e, std::span<std::byte>(bytes), root, options);
    if (e.rank() != root) codec::Raw<T>::decode(std::span<const std::byte>(bytes), data);
  }
}

/// The same with the default segment size and the given tag.
template <Transport E, class T>
  requires std::is_arithmetic_v<T>
void broadcast(E& e, std::span<T> data, std::size_t root, Tag tag) {
  BroadcastOptions o;
  o.tag = tag;
  broadcast(e, data, root, o);
}

}  // namespace flotilla::collective
#endif  // FLOTILLA_COLLECTIVE_BROADCAST_HPP_INCLUDED
