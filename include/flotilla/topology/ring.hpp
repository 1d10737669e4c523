#pragma once
// The ring topology's plan: gradient buckets, and the tags of flotilla's protocols.
//
// Buckets are made of whole layers, last layer first (the order in which backward finishes them),
// each at least `bucket_bytes` long, so every worker forms the same buckets. A ReadyRunner
// (train/ready_runner.hpp) allreduces each bucket as soon as backward has finished it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "flotilla/concepts/transport.hpp"

namespace flotilla::detail {

/// A half-open range [begin, end) of the flat buffer.
struct Range {
  std::size_t begin = 0, end = 0;
  std::size_t size() const noexcept { return end - begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

/// Tags of flotilla's own protocols; user messages stay below tags::reserved_begin.
namespace protocol_tags {
inline constexpr Tag metrics = tags::reserved_begin + 1;
inline constexpr Tag broadcast = tags::reserved_begin + 2;
inline constexpr Tag group_barrier = tags::reserved_begin + 3;
inline constexpr Tag policy_collective = tags::reserved_begin + 4;
inline constexpr Tag ps_push = tags::reserved_begin + 0x10;
inline constexpr Tag ps_reply = tags::reserved_begin + 0x11;
inline constexpr Tag ps_full_reply = tags::reserved_begin + 0x12;
inline constexpr Tag ps_reduce = tags::reserved_begin + 0x13;
inline constexpr Tag ps_reduce_reply = tags::reserved_begin + 0x14;
inline constexpr Tag bucket_base = tags::reserved_begin + 0x100;
}  // namespace protocol_tags

/// Buckets over parameter ranges given per layer (offset, count), in the order gradients become
/// final: from the end of the buffer. Layers without parameters are skipped.
template <std::size_t Depth>
std::vector<Range> make_buckets(const std::array<std::size_t, Depth>& offsets, const std::array<std::size_t, Depth>& counts,
                                std::size_t bucket_elements) {
  std::vector<Range> buckets;
  Range current{};
  bool open = false;
  for (std::size_t l = Depth; l-- > 0;) {
    if (counts[l] == 0) continue;
    if (!open) {
      current = {offsets[l], offsets[l] + counts[l]};
      open = true;
    } else {
      current.begin = offsets[l];
    }
    if (current.size() >= bucket_elements) {
      buckets.push_back(current);
      open = false;
    }
  }
  if (open) buckets.push_back(current);
  return buckets;
}

}  // namespace flotilla::detail
