// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_SPARSE_DETAIL_ROWPROTOCOL_HPP_INCLUDED
#define FLOTILLA_SPARSE_DETAIL_ROWPROTOCOL_HPP_INCLUDED
// The messages between workers and the servers of embedding rows (sparse/row_server.hpp,
// sparse/row_client.hpp).
//
// A transport's receive must know a message's size in advance, and a request carries as many keys
// as the batch touched: every message is a fixed 32-byte header on one tag, followed (when the
// header announces a non-empty payload) by the payload on a tag of its own. The receiver bounds
// what a header announces before it allocates anything.
//
//   worker -> server   tag request:          RowHeader{kind, table, step, count}
//                      tag request_payload:  pull: count keys (u64)
//                                            push: count keys (u64), then Codec(count * dim gradients)
//                                            checkpoint: the directory (count bytes)
//   server -> worker   tag reply:            RowHeader{reply, table, step, count, flags}
//                      tag reply_payload:    pull: Codec(count * dim values), rows in request order
//
// A push and `done` have no reply; a pull's reply may be deferred (synchronous step not applied
// yet, or the worker too far ahead of the slowest); a checkpoint's reply says whether the shard
// was saved. All integers little-endian.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flotilla/codec/fp32.hpp"
#include "flotilla/codec/little_endian.hpp"
#include "flotilla/core/message_tags.hpp"

namespace flotilla::sparse::detail {

namespace row_tags {
inline constexpr Tag request = flotilla::detail::reserved_tag("sparse_rows") + 0;
inline constexpr Tag request_payload = flotilla::detail::reserved_tag("sparse_rows") + 1;
inline constexpr Tag reply = flotilla::detail::reserved_tag("sparse_rows") + 2;
inline constexpr Tag reply_payload = flotilla::detail::reserved_tag("sparse_rows") + 3;
static_assert(flotilla::detail::reserved_tag_count("sparse_rows") >= 4);
}  // namespace row_tags

struct RowHeader {
  enum Kind : std::uint32_t {
    pull = 1,
    push = 2,
    done = 3,
    checkpoint = 4,
    reply = 5,
  };
  /// reply flag to a checkpoint: the shard was saved.
  static constexpr std::uint32_t saved = 1;
  /// pull flag: rows the server does not hold are answered with the values they would start with,
  /// and not created (an evaluation's pull: held-out IDs must not grow the table).
  static constexpr std::uint32_t lookup_only = 2;

  std::uint32_t kind = 0;
  std::uint32_t table = 0;
  std::uint32_t flags = 0;
  std::uint32_t reserved = 0;
  std::uint64_t step = 0;
  std::uint64_t count = 0;  ///< keys (pull, push, pull reply) or bytes of the directory (checkpoint)

  static constexpr std::size_t size = 32;

  void write(std::byte* out) const noexcept {
    flotilla::detail::store_le(out, kind);
    flotilla::detail::store_le(out + 4, table);
    flotilla::detail::store_le(out + 8, flags);
    flotilla::detail::store_le(out + 12, reserved);
    flotilla::detail::store_le(out + 16, step);
    flotilla::detail::store_le(out + 24, count);
  }
  static RowHeader read(const std::byte* in) noexcept {
    RowHeader h;
    h.kind = flotilla::detail::load_le<std::uint32_t>(in);
    h.table = flotilla::detail::load_le<std::uint32_t>(in + 4);
    h.flags = flotilla::detail::load_le<std::uint32_t>(in + 8);
    h.reserved = flotilla::detail::load_le<std::uint32_t>(in + 12);
    h.step = flotilla::detail::load_le<std::uint64_t>(in + 16);
    h.count = flotilla::detail::load_le<std::uint64_t>(in + 24);
    return h;
  }
};

/// Bytes of a key on the wire.
inline constexpr std::size_t key_bytes = 8;
/// The longest checkpoint directory a server accepts.
inline constexpr std::size_t max_directory_bytes = 4096;

/// Whether rows on the wire are the bytes of the floats themselves (fp32 on a little-endian
/// machine): then a reply is sent from, and received into, the rows' own buffer, with no encoding
/// copy in between.
template <class WireCodec>
inline constexpr bool rows_travel_as_floats =
    std::is_same_v<WireCodec, codec::Raw<float>> && std::endian::native == std::endian::little;

/// The payload sizes, for `count` keys of rows of `dim` values.
template <class WireCodec>
constexpr std::size_t pull_payload_size(std::size_t count) noexcept {
  return count * key_bytes;
}
template <class WireCodec>
constexpr std::size_t reply_payload_size(std::size_t count, std::size_t dim) noexcept {
  return WireCodec::encoded_size(count * dim);
}
template <class WireCodec>
constexpr std::size_t push_payload_size(std::size_t count, std::size_t dim) noexcept {
  return count * key_bytes + WireCodec::encoded_size(count * dim);
}

inline void write_keys(std::byte* out, const std::uint64_t* keys, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) flotilla::detail::store_le(out + i * key_bytes, keys[i]);
}
inline void read_keys(const std::byte* in, std::uint64_t* keys, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) keys[i] = flotilla::detail::load_le<std::uint64_t>(in + i * key_bytes);
}

}  // namespace flotilla::sparse::detail
#endif  // FLOTILLA_SPARSE_DETAIL_ROWPROTOCOL_HPP_INCLUDED
