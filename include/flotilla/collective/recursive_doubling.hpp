// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_COLLECTIVE_RECURSIVEDOUBLING_HPP_INCLUDED
#define FLOTILLA_COLLECTIVE_RECURSIVEDOUBLING_HPP_INCLUDED
// Recursive doubling: the allreduce for few ranks and short buffers, where the number of messages
// in a row, not the bytes, sets the time. See docs/collectives.md.
//
// In round k every rank swaps its whole partial sum with the rank whose number differs in bit k,
// and adds what it received; after log2 N rounds every rank holds the sum. That is log2 N messages
// one after the other where the ring needs 2(N-1), but each carries the whole buffer, so a rank
// sends log2(N) times the buffer where the ring sends 2(N-1)/N of it: the same with two ranks,
// more with four or more. Two ranks therefore gain at every size where the second message's
// latency matters (on loopback TCP up to 512 KiB:
// docs/benchmarks.md, "Two ranks: one swap or the ring"); more ranks only for short buffers
// (docs/benchmarks.md, "16 cores").
//
// Both ranks of a pair add the same two operands, and IEEE addition is commutative, so after each
// round the ranks of a group hold the same bits, and at the end so do all. With a lossy codec each
// rank first replaces its partial sum by decode(encode(...)) of it, which is exactly what its
// partner receives: both again add the same two operands. Every value is rounded log2 N times
// (once with two ranks), where the ring rounds N times.
#include <bit>
#include <cstddef>
#include <span>
#include <type_traits>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/collective/detail/scratch.hpp"
#include "flotilla/concepts/transport.hpp"
#include "flotilla/transport/operation.hpp"

namespace flotilla::detail {

/// data = the sum over all ranks of e, with codec C on the wire; every rank passes the same number
/// of values and ends with the same bits. The ranks must be a power of two: ring_allreduce, the
/// only caller, refuses any other count before it touches the data (detail::choose_algorithm).
template <class C, class E, class T>
void recursive_doubling_allreduce(E& e, std::span<T> data, Tag tag) {
  const std::size_t n = e.size(), rank = e.rank();
  if (n == 1 || data.empty()) return;
  transport::OperationScope<E> op(e, tag, transport::OpKind::recursive_doubling, data.size());
  // Raw values on a little-endian host are their own encoding: send straight from the buffer.
  constexpr bool direct = std::is_same_v<C, codec::Raw<T>> && std::endian::native == std::endian::little;
  const std::size_t bytes = C::encoded_size(data.size());
  auto& scratch = collective_buffers();
  if (scratch.size() < (direct ? 1 : 2) * bytes) scratch.resize((direct ? 1 : 2) * bytes);
  const std::span<std::byte> in(scratch.data(), bytes);
  const std::span<std::byte> out = direct ? std::as_writable_bytes(data) : std::span<std::byte>(scratch.data() + bytes, bytes);
  for (std::size_t mask = 1; mask < n; mask <<= 1) {
    const std::size_t partner = rank ^ mask;
    if constexpr (!direct) {
      C::encode(std::span<const T>(data), out);
      if constexpr (!C::lossless) C::decode(std::span<const std::byte>(out), data);
    }
    e.sendrecv(partner, tag, std::span<const std::byte>(out), partner, in);
    C::decode_add(std::span<const std::byte>(in), data);
  }
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_COLLECTIVE_RECURSIVEDOUBLING_HPP_INCLUDED
