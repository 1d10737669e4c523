// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_OPERATION_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_OPERATION_HPP_INCLUDED
// What collective operation a message belongs to, as a 64-bit fingerprint that a transport can
// carry with each message (the TCP transport's frame header has a field for it), so that ranks that
// disagree on which collective they are in (one calls broadcast where another calls allreduce, or
// one skipped a call) fail at once, with an error naming both operations and the peer, instead of
// exchanging bytes that happen to fit and computing wrong numbers, or waiting until a timeout.
//
// The fingerprint is not a hash but a packed record: kind (8 bits), round (24 bits) and element
// count (32 bits), so that a rank that receives a foreign fingerprint can say what the peer was
// doing. The tag is not in it: it travels beside it (the TCP header's tag field), and messages are
// matched by it already. Element counts and rounds are compared modulo 2^32 and 2^24: two ranks 16
// million calls apart are not told apart, which no real disagreement is.
//
// Collectives declare their operation with OperationScope; a transport that checks fingerprints
// offers `set_operation(tag, Operation)` (the TCP endpoint does). The MPI transport does not: MPI
// matches messages by communicator and tag and reports truncation itself, and its collectives
// (MPI_Allreduce) cannot be told apart by a field of ours.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/concepts/transport.hpp"

namespace flotilla::transport {

/// One collective call: its kind, which call of that tag it is on this rank (counted by the
/// transport: 1 for the first), and how many elements it reduces or sends in all.
struct Operation {
  OpKind kind = OpKind::none;
  std::uint32_t round = 0;     // 24 bits on the wire
  std::uint64_t elements = 0;  // 32 bits on the wire

  static constexpr std::uint32_t round_mask = 0xFFFFFFu;

  /// The packed fingerprint; 0 for OpKind::none (not checked).
  constexpr std::uint64_t fingerprint() const noexcept {
    if (kind == OpKind::none) return 0;
    return std::uint64_t{static_cast<std::uint8_t>(kind)} << 56 | std::uint64_t{round & round_mask} << 32 |
           (elements & 0xFFFFFFFFu);
  }
  static constexpr Operation from_fingerprint(std::uint64_t f) noexcept {
    return {static_cast<OpKind>(f >> 56), static_cast<std::uint32_t>(f >> 32) & round_mask, f & 0xFFFFFFFFu};
  }
  /// "ring_allreduce #7 of 1000 elements", for error messages.
  std::string describe() const {
    if (kind == OpKind::none) return std::string(op_kind_name(kind));
    return std::string(op_kind_name(kind)) + " #" + std::to_string(round) + " of " + std::to_string(elements) +
           " elements";
  }
  friend constexpr bool operator==(const Operation&, const Operation&) = default;
};

/// Whether two fingerprints can belong to the same collective call (an undeclared side matches
/// anything).
inline constexpr bool fingerprints_agree(std::uint64_t a, std::uint64_t b) noexcept { return a == 0 || b == 0 || a == b; }

/// Declares, for the lifetime of the scope, that messages on `tag` belong to one call of `kind`
/// over `elements` elements; does nothing on a transport that does not check operations.
template <class E>
class OperationScope {
 public:
  OperationScope(E& e, Tag tag, OpKind kind, std::uint64_t elements) : e_(e), tag_(tag) {
    if constexpr (OperationAware<E>) e_.begin_operation(tag, kind, elements);
  }
  ~OperationScope() {
    if constexpr (OperationAware<E>) e_.end_operation(tag_);
  }
  OperationScope(const OperationScope&) = delete;
  OperationScope& operator=(const OperationScope&) = delete;

 private:
  E& e_;
  Tag tag_;
};

}  // namespace flotilla::transport
#endif  // FLOTILLA_TRANSPORT_OPERATION_HPP_INCLUDED
