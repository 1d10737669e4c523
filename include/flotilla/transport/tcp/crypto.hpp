// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TRANSPORT_TCP_CRYPTO_HPP_INCLUDED
#define FLOTILLA_TRANSPORT_TCP_CRYPTO_HPP_INCLUDED
// The TCP transport's cryptography, all of it OpenSSL's (libcrypto 3.0 or later): HMAC-SHA-256 for
// the handshake's proofs and for the keys of a connection, AES-256-GMAC for the tag that
// authenticates each frame on a connection that leaves the host (wire.hpp has where each goes).
// Nothing here is hand-written cryptography; the functions only fix which primitive, which key
// and which bytes.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/opensslv.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/error.hpp"

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "flotilla's TCP transport needs OpenSSL 3.0 or later (Debian: libssl-dev)"
#endif

namespace flotilla::transport::tcp {

/// An HMAC-SHA-256 value: a handshake proof, or a key derived from the secret.
using Digest = std::array<std::uint8_t, 32>;

/// HMAC-SHA-256 (RFC 2104) with `key` over the concatenation of `parts`.
inline Digest hmac_sha256(std::span<const std::byte> key, std::initializer_list<std::span<const std::byte>> parts) {
  std::size_t total = 0;
  for (const auto p : parts) total += p.size();
  std::vector<unsigned char> message;
  message.reserve(total);
  for (const auto p : parts) {
    const auto* b = reinterpret_cast<const unsigned char*>(p.data());
    message.insert(message.end(), b, b + p.size());
  }
  Digest out{};
  unsigned int length = 0;
  static_assert(sizeof(Digest) == 32);
  if (key.size() > static_cast<std::size_t>(INT_MAX) ||
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), out.data(), &length) ==
          nullptr ||
      length != out.size())
    throw TransportError("tcp: OpenSSL's HMAC-SHA-256 failed");
  return out;
}

inline Digest hmac_sha256(std::string_view key, std::initializer_list<std::span<const std::byte>> parts) {
  return hmac_sha256(std::as_bytes(std::span<const char>(key.data(), key.size())), parts);
}

/// Whether `a` and `b` hold the same bytes, in a time that depends on their sizes only: a
/// comparison that stops at the first difference would tell an attacker, by the time a refusal
/// takes, how many leading bytes of a guessed proof or tag were right.
inline bool constant_time_equal(std::span<const std::byte> a, std::span<const std::byte> b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

/// The tag that authenticates one frame: AES-256-GMAC (GCM, NIST SP 800-38D, with the frame as
/// additional data and nothing encrypted) under a key of one connection and direction, with the
/// frame's sequence number as the nonce. GMAC runs at about 9 GB/s on one core where the
/// processor has AES and carry-less multiplication instructions (docs/benchmarks.md), and,
/// unlike a CRC, cannot be recomputed by whoever changes the bytes on the way. A nonce must never
/// repeat under one key: the sequence numbers of a connection's direction do not, and a
/// connection made anew (a rejoin) has new keys.
class FrameMac {
 public:
  static constexpr std::size_t tag_size = 16;
  static constexpr std::size_t key_size = 32;
  using Tag = std::array<std::byte, tag_size>;

  explicit FrameMac(const Digest& key) : ctx_(EVP_CIPHER_CTX_new()) {
    static_assert(sizeof(Digest) == key_size);
    if (!ctx_ || EVP_EncryptInit_ex(ctx_.get(), EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1)
      throw TransportError("tcp: OpenSSL's AES-256-GCM could not be set up");
  }

  /// The tag of the frame numbered `sequence` whose bytes are `header` then `payload`.
  Tag tag(std::uint64_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload) {
    std::array<unsigned char, 12> nonce{};
    for (std::size_t i = 0; i < 8; ++i) nonce[i] = static_cast<unsigned char>(sequence >> (8 * i));
    int n = 0;
    bool ok = EVP_EncryptInit_ex(ctx_.get(), nullptr, nullptr, nullptr, nonce.data()) == 1;
    for (auto part : {header, payload})
      while (ok && !part.empty()) {
        // EVP takes an int length: a payload of more than 1 GiB goes in pieces.
        const std::size_t piece = std::min<std::size_t>(part.size(), std::size_t{1} << 30);
        ok = EVP_EncryptUpdate(ctx_.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(part.data()),
                               static_cast<int>(piece)) == 1;
        part = part.subspan(piece);
      }
    unsigned char none[16];
    ok = ok && EVP_EncryptFinal_ex(ctx_.get(), none, &n) == 1;
    Tag out{};
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size), out.data()) == 1;
    if (!ok) throw TransportError("tcp: OpenSSL's AES-256-GMAC failed");
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
  };
  std::unique_ptr<EVP_CIPHER_CTX, Free> ctx_;
};

}  // namespace flotilla::transport::tcp
#endif  // FLOTILLA_TRANSPORT_TCP_CRYPTO_HPP_INCLUDED
