// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CODEC_BF16_HPP_INCLUDED
#define FLOTILLA_CODEC_BF16_HPP_INCLUDED
// codec::Bf16 and codec::Bf16Truncate: float values as bfloat16 (the top 16 bits of a float32:
// float's 8-bit exponent, so float's range, with 8 significant bits), two bytes each.
//
//  - Bf16Truncate is TensorFlow's original scheme: keep the high 16 bits. Cheapest, biased
//    towards zero (up to one unit in the last place, 2^-7 relative). It never overflows.
//  - Bf16 rounds to nearest, ties to even (half a unit, 2^-8 relative, unbiased). Finite values
//    that would round up past the largest bfloat16 (3.3895e38) saturate to it (concepts/codec.hpp).
// In both, subnormals are kept, inf stays inf, and NaN stays NaN: its quiet bit is set, so that a
// NaN whose payload lies in the discarded low bits does not become inf (truncation) and the
// rounding carry cannot run into the exponent (rounding).
//
// The AVX-512 BF16 instruction vcvtneps2bf16 is not used: it flushes subnormal inputs to zero and
// rounds overflow to inf, so it disagrees with the reference below (test_codec.cpp checks this
// where the instruction exists). The conversion is a few integer operations, as fast in AVX-512F,
// AVX2 or SSE2 integer code, which every path below uses.
//   __AVX512F__   16 values per step     __AVX2__   16 values per step
//   __SSE2__       8 values per step     otherwise  the scalar reference
// Define FLOTILLA_NO_CODEC_SIMD to use the scalar reference everywhere.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#if !defined(FLOTILLA_NO_CODEC_SIMD) && (defined(__SSE2__) || defined(__AVX2__) || defined(__AVX512F__))
#include <immintrin.h>
#endif

// Kernels and codecs in an inline namespace named after the path: see fp16.hpp.
#if !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX512F__)
#define FLOTILLA_BF16_ISA bf16_avx512
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX2__)
#define FLOTILLA_BF16_ISA bf16_avx2
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__SSE2__)
#define FLOTILLA_BF16_ISA bf16_sse2
#else
#define FLOTILLA_BF16_ISA bf16_scalar
#endif

#include "flotilla/codec/little_endian.hpp"
#include "flotilla/concepts/codec.hpp"

namespace flotilla::detail {

// ---- the scalar reference ----------------------------------------------------------------------

/// float -> bfloat16 bits, round to nearest even, saturating; NaN quieted.
constexpr std::uint16_t bf16_from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  // From 0x7f7f8000 (the tie between the largest bfloat16 and 2^128) up to inf: saturate.
  if (a >= 0x7f7f8000u && a < 0x7f800000u) return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7f7fu);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// float -> bfloat16 bits by truncation; NaN quieted.
constexpr std::uint16_t bf16_truncate_from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x0040u : x >> 16);
}

/// bfloat16 bits -> float (exact).
constexpr float float_from_bf16(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

template <bool Round>
inline void bf16_encode_scalar(const float* in, std::byte* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    store_u16_le(out + 2 * i, Round ? bf16_from_float(in[i]) : bf16_truncate_from_float(in[i]));
}
inline void bf16_decode_scalar(const std::byte* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_from_bf16(load_u16_le(in + 2 * i));
}
inline void bf16_decode_add_scalar(const std::byte* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] += float_from_bf16(load_u16_le(in + 2 * i));
}

// ---- vector paths ------------------------------------------------------------------------------

inline namespace FLOTILLA_BF16_ISA {
// Each returns how many leading values it did; the scalar reference does the rest.

#if !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX512F__)
#define FLOTILLA_BF16_PATH "avx512"
// Zero-masking forms with a full mask: see fp16.hpp (GCC bug 105593).
template <bool Round>
inline __m512i bf16_encode16_avx512(__m512i x) noexcept {
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __m512i hi = _mm512_maskz_srli_epi32(0xffff, x, 16);
  __m512i r = hi;
  if constexpr (Round) {
    // x + 0x7fff + lsb wraps only for negative NaNs, which are replaced below.
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    r = _mm512_maskz_srli_epi32(0xffff, _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 sat = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f7f7fff)) &
                          _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, sat, _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7f7f)));
  }
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x0040)));
}
template <bool Round>
inline std::size_t bf16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i r = bf16_encode16_avx512<Round>(_mm512_castps_si512(_mm512_loadu_ps(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_maskz_cvtepi32_epi16(0xffff, r));
  }
  return i;
}
inline __m512 bf16_decode16_avx512(const std::byte* p) noexcept {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
}
inline std::size_t bf16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, bf16_decode16_avx512(in + 2 * i));
  return i;
}
inline std::size_t bf16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), bf16_decode16_avx512(in + 2 * i)));
  return i;
}
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX2__)
#define FLOTILLA_BF16_PATH "avx2"
template <bool Round>
inline __m256i bf16_encode8_avx2(__m256i x) noexcept {
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i hi = _mm256_srli_epi32(x, 16);
  __m256i r = hi;
  if constexpr (Round) {
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i sat = _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7fffff)),
                                            _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7f7fff)));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7f7f)), sat);
  }
  const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x0040)), nan);
}
template <bool Round>
inline std::size_t bf16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i r0 = bf16_encode8_avx2<Round>(_mm256_castps_si256(_mm256_loadu_ps(in + i)));
    const __m256i r1 = bf16_encode8_avx2<Round>(_mm256_castps_si256(_mm256_loadu_ps(in + i + 8)));
    // packus works within 128-bit lanes: (r0 lo, r1 lo, r0 hi, r1 hi); reorder the 64-bit quarters.
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), p);
  }
  return i;
}
inline __m256 bf16_decode8_avx2(const std::byte* p) noexcept {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline std::size_t bf16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, bf16_decode8_avx2(in + 2 * i));
  return i;
}
inline std::size_t bf16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), bf16_decode8_avx2(in + 2 * i)));
  return i;
}
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__SSE2__)
#define FLOTILLA_BF16_PATH "sse2"
inline __m128i bf16_select(__m128i mask, __m128i a, __m128i b) noexcept {
  return _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b));
}
template <bool Round>
inline __m128i bf16_encode4_sse2(__m128i x) noexcept {
  const __m128i a = _mm_and_si128(x, _mm_set1_epi32(0x7fffffff));
  const __m128i hi = _mm_srli_epi32(x, 16);
  __m128i r = hi;
  if constexpr (Round) {
    const __m128i lsb = _mm_and_si128(hi, _mm_set1_epi32(1));
    r = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7fff)), lsb), 16);
    const __m128i sat = _mm_andnot_si128(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f7fffff)),
                                         _mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f7f7fff)));
    r = bf16_select(sat, _mm_or_si128(_mm_and_si128(hi, _mm_set1_epi32(0x8000)), _mm_set1_epi32(0x7f7f)), r);
  }
  const __m128i nan = _mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f800000));
  return bf16_select(nan, _mm_or_si128(hi, _mm_set1_epi32(0x0040)), r);
}
template <bool Round>
inline std::size_t bf16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  const __m128i bias32 = _mm_set1_epi32(0x8000);
  const __m128i bias16 = _mm_set1_epi16(static_cast<short>(0x8000));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i r0 = bf16_encode4_sse2<Round>(_mm_castps_si128(_mm_loadu_ps(in + i)));
    const __m128i r1 = bf16_encode4_sse2<Round>(_mm_castps_si128(_mm_loadu_ps(in + i + 4)));
    // packs_epi32 saturates signed: shift the 16-bit codes into the signed range and back.
    const __m128i p = _mm_xor_si128(_mm_packs_epi32(_mm_sub_epi32(r0, bias32), _mm_sub_epi32(r1, bias32)), bias16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), p);
  }
  return i;
}
inline std::size_t bf16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // Interleaving zeros below each code is the shift by 16.
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm_storeu_ps(out + i, _mm_castsi128_ps(_mm_unpacklo_epi16(zero, h)));
    _mm_storeu_ps(out + i + 4, _mm_castsi128_ps(_mm_unpackhi_epi16(zero, h)));
  }
  return i;
}
inline std::size_t bf16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm_storeu_ps(out + i, _mm_add_ps(_mm_loadu_ps(out + i), _mm_castsi128_ps(_mm_unpacklo_epi16(zero, h))));
    _mm_storeu_ps(out + i + 4, _mm_add_ps(_mm_loadu_ps(out + i + 4), _mm_castsi128_ps(_mm_unpackhi_epi16(zero, h))));
  }
  return i;
}
#else
#define FLOTILLA_BF16_PATH "scalar"
template <bool Round>
inline std::size_t bf16_encode_simd(const float*, std::byte*, std::size_t) noexcept {
  return 0;
}
inline std::size_t bf16_decode_simd(const std::byte*, float*, std::size_t) noexcept { return 0; }
inline std::size_t bf16_decode_add_simd(const std::byte*, float*, std::size_t) noexcept { return 0; }
#endif

/// Which vector path this translation unit compiled ("avx512", "avx2", "sse2" or "scalar").
inline constexpr std::string_view bf16_path = FLOTILLA_BF16_PATH;
#undef FLOTILLA_BF16_PATH

template <bool Round>
inline void bf16_encode(const float* in, std::byte* out, std::size_t n) noexcept {
  const std::size_t done = bf16_encode_simd<Round>(in, out, n);
  bf16_encode_scalar<Round>(in + done, out + 2 * done, n - done);
}
inline void bf16_decode(const std::byte* in, float* out, std::size_t n) noexcept {
  const std::size_t done = bf16_decode_simd(in, out, n);
  bf16_decode_scalar(in + 2 * done, out + done, n - done);
}
inline void bf16_decode_add(const std::byte* in, float* out, std::size_t n) noexcept {
  const std::size_t done = bf16_decode_add_simd(in, out, n);
  bf16_decode_add_scalar(in + 2 * done, out + done, n - done);
}

/// The two bfloat16 codecs differ only in how they encode.
template <bool Round>
struct Bf16Codec {
  static constexpr std::string_view name = Round ? "bf16" : "bf16-truncate";
  static constexpr bool lossless = false;
  static constexpr std::size_t encoded_size(std::size_t n) noexcept { return 2 * n; }

  static void encode(std::span<const float> values, std::span<std::byte> bytes) {
    check_codec_sizes(name, "encode", values.size(), bytes.size(), encoded_size(values.size()));
    bf16_encode<Round>(values.data(), bytes.data(), values.size());
  }
  static void decode(std::span<const std::byte> bytes, std::span<float> values) {
    check_codec_sizes(name, "decode", values.size(), bytes.size(), encoded_size(values.size()));
    bf16_decode(bytes.data(), values.data(), values.size());
  }
  static void decode_add(std::span<const std::byte> bytes, std::span<float> values) {
    check_codec_sizes(name, "decode_add", values.size(), bytes.size(), encoded_size(values.size()));
    bf16_decode_add(bytes.data(), values.data(), values.size());
  }
};

}  // namespace FLOTILLA_BF16_ISA
}  // namespace flotilla::detail

namespace flotilla::codec {
inline namespace FLOTILLA_BF16_ISA {

/// float values as bfloat16, rounded to nearest even (saturating). See the top of this file.
struct Bf16 : detail::Bf16Codec<true> {};
/// float values as bfloat16 by truncation (TensorFlow's original scheme). See the top of this file.
struct Bf16Truncate : detail::Bf16Codec<false> {};

}  // namespace FLOTILLA_BF16_ISA

static_assert(Codec<Bf16, float> && Codec<Bf16Truncate, float>);

}  // namespace flotilla::codec

#undef FLOTILLA_BF16_ISA
#endif  // FLOTILLA_CODEC_BF16_HPP_INCLUDED
