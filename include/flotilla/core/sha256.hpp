// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_SHA256_HPP_INCLUDED
#define FLOTILLA_CORE_SHA256_HPP_INCLUDED
// SHA-256 (FIPS 180-4), for authenticating peers (core/hmac.hpp). Written here rather than taken
// from OpenSSL so that the header-only library needs nothing more to link; it is checked against
// the standard's test vectors (tests/unit/test_data.cpp). Speed is not a goal: it hashes a few
// dozen bytes per connection.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "flotilla/core/linkage.hpp"

namespace flotilla {

namespace detail {

inline constexpr std::array<std::uint32_t, 64> sha256_k = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline constexpr std::uint32_t sha256_rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

}  // namespace detail

/// Incremental SHA-256: update() with the message in pieces, then digest() (once).
class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;
  static constexpr std::size_t block_size = 64;

  FLOTILLA_DECL Sha256& update(std::span<const std::uint8_t> data) noexcept;
  Sha256& update(std::span<const std::byte> data) noexcept {
    return update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
  }
  Sha256& update(std::string_view data) noexcept {
    return update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
  }

  FLOTILLA_DECL Digest digest() noexcept;

 private:
  FLOTILLA_DECL void compress() noexcept;

  std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<std::uint8_t, block_size> block_{};
  std::size_t fill_ = 0;
  std::uint64_t bits_ = 0;
};

/// SHA-256 of `data` in one call.
inline Sha256::Digest sha256(std::span<const std::byte> data) noexcept { return Sha256().update(data).digest(); }
inline Sha256::Digest sha256(std::string_view data) noexcept { return Sha256().update(data).digest(); }

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL Sha256& Sha256::update(std::span<const std::uint8_t> data) noexcept {
  for (const std::uint8_t b : data) {
    block_[fill_++] = b;
    if (fill_ == block_size) {
      compress();
      fill_ = 0;
    }
  }
  bits_ += static_cast<std::uint64_t>(data.size()) * 8;
  return *this;
}

FLOTILLA_DECL Sha256::Digest Sha256::digest() noexcept {
  const std::uint64_t bits = bits_;
  // Padding: a 1 bit, zeros up to 56 bytes into a block, then the message length in bits.
  block_[fill_++] = 0x80;
  if (fill_ > 56) {
    while (fill_ < block_size) block_[fill_++] = 0;
    compress();
    fill_ = 0;
  }
  while (fill_ < 56) block_[fill_++] = 0;
  for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<std::uint8_t>(bits >> (8 * i));
  compress();
  Digest d{};
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 4; ++j) d[4 * i + j] = static_cast<std::uint8_t>(h_[i] >> (24 - 8 * j));
  return d;
}

FLOTILLA_DECL void Sha256::compress() noexcept {
  using detail::sha256_rotr;
  std::array<std::uint32_t, 64> w{};
  for (std::size_t i = 0; i < 16; ++i)
    w[i] = std::uint32_t{block_[4 * i]} << 24 | std::uint32_t{block_[4 * i + 1]} << 16 |
           std::uint32_t{block_[4 * i + 2]} << 8 | std::uint32_t{block_[4 * i + 3]};
  for (std::size_t i = 16; i < 64; ++i) {
    const std::uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (std::size_t i = 0; i < 64; ++i) {
    const std::uint32_t s1 = sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25);
    const std::uint32_t ch = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + s1 + ch + detail::sha256_k[i] + w[i];
    const std::uint32_t s0 = sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22);
    const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_CORE_SHA256_HPP_INCLUDED
