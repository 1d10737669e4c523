// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_CRC32C_HPP_INCLUDED
#define FLOTILLA_CORE_CRC32C_HPP_INCLUDED
// CRC-32C (Castagnoli: the reflected polynomial 0x82F63B78, initial and final inversion), the
// checksum of iSCSI, ext4 and SCTP, for data checked at the speed it moves.
//
// x86-64 processors since 2008 compute it in hardware (SSE 4.2's crc32 instruction, 8 bytes per
// instruction). One instruction waits for the one before, 3 cycles each, so large buffers are cut
// in three lanes summed side by side and joined by multiplying the first two lanes' CRCs by x^(8n)
// modulo the polynomial (the CRC of a lane followed by n zero bytes): about three times one lane's
// speed. Elsewhere, and on processors without SSE 4.2 (checked once, at run time), a table-driven
// loop 8 bytes at a time computes the same values.
//
// Incremental use as crc32(): crc32c(b, crc32c(a)) == crc32c(a followed by b).
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace flotilla {
namespace detail {

inline constexpr std::uint32_t crc32c_polynomial = 0x82F63B78U;

inline constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc32c_tables() noexcept {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ crc32c_polynomial : c >> 1;
    t[0][i] = c;
  }
  // t[k][i]: byte i followed by k zero bytes.
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFU];
  return t;
}
inline constexpr auto crc32c_tables = make_crc32c_tables();

/// The CRC register (no inversions) after `n` more bytes, by table, 8 bytes at a time.
inline std::uint32_t crc32c_table(const std::byte* p, std::size_t n, std::uint32_t crc) noexcept {
  const auto& t = crc32c_tables;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    w ^= crc;
    crc = t[7][w & 0xFFU] ^ t[6][(w >> 8) & 0xFFU] ^ t[5][(w >> 16) & 0xFFU] ^ t[4][(w >> 24) & 0xFFU] ^
          t[3][(w >> 32) & 0xFFU] ^ t[2][(w >> 40) & 0xFFU] ^ t[1][(w >> 48) & 0xFFU] ^ t[0][w >> 56];
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ std::to_integer<std::uint32_t>(*p)) & 0xFFU] ^ (crc >> 8);
  return crc;
}

/// a * b modulo the polynomial, in the reflected bit order of the CRC register.
inline constexpr std::uint32_t crc32c_multiply(std::uint32_t a, std::uint32_t b) noexcept {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 1U << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1U) ? (b >> 1) ^ crc32c_polynomial : b >> 1;
  }
  return product;
}
/// x^(8 n) modulo the polynomial: what multiplies a register to append n zero bytes.
inline constexpr std::uint32_t crc32c_zeros(std::size_t n) noexcept {
  std::uint32_t result = 1U << 31;  // x^0, reflected
  std::uint32_t power = 1U << 23;   // x^8
  for (; n != 0; n >>= 1) {
    if (n & 1U) result = crc32c_multiply(result, power);
    power = crc32c_multiply(power, power);
  }
  return result;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
inline constexpr bool crc32c_hardware_possible = true;
inline constexpr std::size_t crc32c_lane = 4096;  // bytes per lane of a three-lane block
inline constexpr std::uint32_t crc32c_shift_one = crc32c_zeros(crc32c_lane);
inline constexpr std::uint32_t crc32c_shift_two = crc32c_zeros(2 * crc32c_lane);

__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_hardware(const std::byte* p, std::size_t n, std::uint32_t crc) noexcept {
  auto word = [](const std::byte* q) {
    std::uint64_t w = 0;
    std::memcpy(&w, q, 8);
    return w;
  };
  for (; n >= 3 * crc32c_lane; n -= 3 * crc32c_lane, p += 3 * crc32c_lane) {
    std::uint64_t a = crc, b = 0, c = 0;
    for (std::size_t i = 0; i < crc32c_lane; i += 8) {
      a = __builtin_ia32_crc32di(a, word(p + i));
      b = __builtin_ia32_crc32di(b, word(p + crc32c_lane + i));
      c = __builtin_ia32_crc32di(c, word(p + 2 * crc32c_lane + i));
    }
    crc = crc32c_multiply(static_cast<std::uint32_t>(a), crc32c_shift_two) ^
          crc32c_multiply(static_cast<std::uint32_t>(b), crc32c_shift_one) ^ static_cast<std::uint32_t>(c);
  }
  std::uint64_t r = crc;
  for (; n >= 8; n -= 8, p += 8) r = __builtin_ia32_crc32di(r, word(p));
  crc = static_cast<std::uint32_t>(r);
  for (; n > 0; --n, ++p) crc = __builtin_ia32_crc32qi(crc, std::to_integer<unsigned char>(*p));
  return crc;
}

inline bool crc32c_has_hardware() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2");  // a fact of the machine, set once
  return has;
}
#else
inline constexpr bool crc32c_hardware_possible = false;
#endif

inline std::uint32_t crc32c_update(const std::byte* p, std::size_t n, std::uint32_t crc) noexcept {
  crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (crc32c_has_hardware()) return ~crc32c_hardware(p, n, crc);
#endif
  return ~crc32c_table(p, n, crc);
}

}  // namespace detail

/// CRC-32C of `data`, continuing from `crc` (the CRC-32C of everything before it; 0 to start).
inline std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept {
  return detail::crc32c_update(data.data(), data.size(), crc);
}

/// The same computed by the table alone, whatever the processor (to check the hardware path
/// against, and where a value must not depend on the machine's instructions).
inline std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept {
  return ~detail::crc32c_table(data.data(), data.size(), ~crc);
}

}  // namespace flotilla
#endif  // FLOTILLA_CORE_CRC32C_HPP_INCLUDED
