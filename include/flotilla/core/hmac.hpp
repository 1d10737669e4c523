// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_HMAC_HPP_INCLUDED
#define FLOTILLA_CORE_HMAC_HPP_INCLUDED
// HMAC-SHA256 (RFC 2104, FIPS 198-1) and a constant-time comparison, for the TCP transport's
// challenge-response authentication of peers (transport/tcp/wire.hpp). Checked against RFC 4231's
// test vectors (tests/unit/test_data.cpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "flotilla/core/linkage.hpp"
#include "flotilla/core/sha256.hpp"

namespace flotilla {

/// HMAC-SHA256 computed over a message given in pieces: update() them, then digest() (once).
class HmacSha256 {
 public:
  using Digest = Sha256::Digest;

  FLOTILLA_DECL explicit HmacSha256(std::span<const std::uint8_t> key) noexcept;
  explicit HmacSha256(std::string_view key) noexcept
      : HmacSha256(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(key.data()), key.size())) {}

  HmacSha256& update(std::span<const std::uint8_t> data) noexcept {
    inner_.update(data);
    return *this;
  }
  HmacSha256& update(std::span<const std::byte> data) noexcept {
    inner_.update(data);
    return *this;
  }
  HmacSha256& update(std::string_view data) noexcept {
    inner_.update(data);
    return *this;
  }
  Digest digest() noexcept {
    const auto inner = inner_.digest();
    return outer_.update(inner).digest();
  }

 private:
  Sha256 inner_, outer_;
};

/// Whether `a` and `b` hold the same bytes, in a time that depends on their sizes only: comparing
/// an authentication code byte by byte and stopping at the first difference would tell an attacker,
/// by the time a refusal takes, how many leading bytes of a guess were right.
FLOTILLA_DECL bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

#if FLOTILLA_IMPLEMENTATION
FLOTILLA_DECL HmacSha256::HmacSha256(std::span<const std::uint8_t> key) noexcept {
  // A key longer than a block is hashed first; a shorter one is padded with zeros.
  std::array<std::uint8_t, Sha256::block_size> k{};
  if (key.size() > k.size()) {
    const auto d = Sha256().update(key).digest();
    for (std::size_t i = 0; i < d.size(); ++i) k[i] = d[i];
  } else {
    for (std::size_t i = 0; i < key.size(); ++i) k[i] = key[i];
  }
  std::array<std::uint8_t, Sha256::block_size> pad{};
  for (std::size_t i = 0; i < k.size(); ++i) pad[i] = static_cast<std::uint8_t>(k[i] ^ 0x36);
  inner_.update(pad);
  for (std::size_t i = 0; i < k.size(); ++i) pad[i] = static_cast<std::uint8_t>(k[i] ^ 0x5c);
  outer_.update(pad);
}

FLOTILLA_DECL bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  if (a.size() != b.size()) return false;
  std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = static_cast<std::uint8_t>(diff | (a[i] ^ b[i]));
  // volatile: so that the compiler cannot turn the loop into an early exit.
  volatile std::uint8_t result = diff;
  return result == 0;
}
#endif  // FLOTILLA_IMPLEMENTATION

}  // namespace flotilla
#endif  // FLOTILLA_CORE_HMAC_HPP_INCLUDED
