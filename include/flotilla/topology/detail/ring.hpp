// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TOPOLOGY_DETAIL_RING_HPP_INCLUDED
#define FLOTILLA_TOPOLOGY_DETAIL_RING_HPP_INCLUDED
// The ring topology's plan: gradient buckets, and the tags of flotilla's protocols.
//
// Buckets follow the order in which backward finishes the gradients, last layer first, each at
// least `bucket_bytes` long (large layers are cut: see make_buckets), so every worker forms the
// same buckets. A ReadyRunner (train/detail/ready_runner.hpp) allreduces each bucket as soon as backward
// has finished it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "flotilla/concepts/transport.hpp"
#include "flotilla/core/message_tags.hpp"
#include "flotilla/core/range.hpp"

namespace flotilla::detail {

/// Tags of the trainer's and the parameter servers' protocols (core/message_tags.hpp lists them all).
namespace protocol_tags {
inline constexpr Tag metrics = reserved_tag("metrics");
inline constexpr Tag broadcast = reserved_tag("broadcast");
inline constexpr Tag group_barrier = reserved_tag("group_barrier");
inline constexpr Tag policy_collective = reserved_tag("policy_collective");
inline constexpr Tag exchange_state = reserved_tag("exchange_state");
inline constexpr Tag normalization_statistics = reserved_tag("normalization_statistics");
inline constexpr Tag ps_push = reserved_tag("ps_push");
inline constexpr Tag ps_reply = reserved_tag("ps_reply");
inline constexpr Tag ps_full_reply = reserved_tag("ps_full_reply");
inline constexpr Tag ps_reduce = reserved_tag("ps_reduce");
inline constexpr Tag ps_reduce_reply = reserved_tag("ps_reduce_reply");
/// Bucket i's exchange uses bucket_base + i.
inline constexpr Tag bucket_base = reserved_tag("bucket");
inline constexpr std::size_t max_buckets = reserved_tag_count("bucket");
}  // namespace protocol_tags

/// Buckets over parameter ranges given per layer (offset, count), in the order gradients become
/// final: from the end of the buffer. Layers without parameters are skipped.
///
/// A bucket closes at the first layer boundary where it holds at least `bucket_elements`, or,
/// inside a layer, as soon as it holds `piece` values, the larger of `bucket_elements` and an
/// eighth of the layer (or the rest of the layer, where less than half a bucket would be left).
/// So a large layer is cut, and its first buckets can be on the wire while backward is still
/// computing the rest of it (layers report the parts they have finished: StreamsGradients), but
/// into no more than about eight messages. The bucket at the start of the buffer holds whatever is
/// left: it is the one backward cannot hide, so it is better short.
template <std::size_t Depth>
std::vector<Range> make_buckets(const std::array<std::size_t, Depth>& offsets, const std::array<std::size_t, Depth>& counts,
                                std::size_t bucket_elements) {
  constexpr std::size_t max_pieces_per_layer = 8;
  bucket_elements = std::max<std::size_t>(bucket_elements, 1);
  std::vector<Range> buckets;
  Range current{};
  bool open = false;
  for (std::size_t l = Depth; l-- > 0;) {
    if (counts[l] == 0) continue;
    const std::size_t lo = offsets[l];
    const std::size_t piece = std::max(bucket_elements, (counts[l] + max_pieces_per_layer - 1) / max_pieces_per_layer);
    for (std::size_t pos = lo + counts[l]; pos > lo;) {
      if (!open) {
        current = {pos, pos};
        open = true;
      }
      // An open bucket holds fewer than bucket_elements <= piece values, so need > 0. A cut never
      // leaves less than half a bucket of the layer behind it: that crumb goes with this bucket.
      const std::size_t need = piece - current.size();
      const std::size_t next = pos - lo >= need + bucket_elements / 2 ? pos - need : lo;
      current.begin = next;
      if (current.size() >= bucket_elements) {
        buckets.push_back(current);
        open = false;
      }
      pos = next;
    }
  }
  if (open) buckets.push_back(current);
  return buckets;
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_TOPOLOGY_DETAIL_RING_HPP_INCLUDED
