// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CODEC_LITTLEENDIAN_HPP_INCLUDED
#define FLOTILLA_CODEC_LITTLEENDIAN_HPP_INCLUDED
// Byte order and size checks shared by the built-in codecs.
//
// Every codec writes little-endian bytes whatever the host, so that ranks on different machines
// agree on what a message means. On little-endian hosts (every machine flotilla is tested on)
// the loads and stores below compile to plain moves; elsewhere they swap.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "flotilla/core/error.hpp"

namespace flotilla::detail {

/// The unsigned integer with T's size (T's bits, to swap or to test).
template <class T>
using uint_of_size_t = std::conditional_t<
    sizeof(T) == 1, std::uint8_t,
    std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

template <class U>
constexpr U byteswap(U u) noexcept {
  static_assert(std::is_unsigned_v<U>);
  U r = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    r = static_cast<U>((r << 8) | (u & 0xffu));
    u = static_cast<U>(u >> 8);
  }
  return r;
}

/// Stores `v` at `p` in little-endian order.
template <class T>
inline void store_le(std::byte* p, T v) noexcept {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(T));
  } else {
    using U = uint_of_size_t<T>;
    const U u = byteswap(std::bit_cast<U>(v));
    std::memcpy(p, &u, sizeof(T));
  }
}

/// Loads a T stored little-endian at `p`.
template <class T>
inline T load_le(const std::byte* p) noexcept {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  if constexpr (std::endian::native == std::endian::little) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  } else {
    using U = uint_of_size_t<T>;
    U u;
    std::memcpy(&u, p, sizeof(T));
    return std::bit_cast<T>(byteswap(u));
  }
}

/// 16-bit codes are written byte by byte: explicit about the order on every host, and compilers
/// merge the two byte stores into one 16-bit move.
inline void store_u16_le(std::byte* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::byte>(v & 0xffu);
  p[1] = static_cast<std::byte>(v >> 8);
}
inline std::uint16_t load_u16_le(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) | (std::to_integer<unsigned>(p[1]) << 8));
}

/// A codec's buffers must agree with encoded_size(n): a mismatch is a bug in the caller, caught
/// here in O(1) rather than as a buffer overrun.
inline void check_codec_sizes(std::string_view codec, std::string_view op, std::size_t values, std::size_t bytes,
                              std::size_t expected_bytes) {
  if (bytes != expected_bytes)
    throw ShapeError("codec " + std::string(codec) + ": " + std::string(op) + " of " + std::to_string(values) +
                     " values with " + std::to_string(bytes) + " bytes (encoded_size is " +
                     std::to_string(expected_bytes) + ")");
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_CODEC_LITTLEENDIAN_HPP_INCLUDED
