// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CODEC_FP16_HPP_INCLUDED
#define FLOTILLA_CODEC_FP16_HPP_INCLUDED
// codec::Fp16: float values as IEEE 754 binary16 (half precision), two bytes each.
//
// Rounding is to nearest, ties to even; subnormal halves are kept (gradients are small: flushing
// them would lose every value below 6.1e-5). Finite values beyond the format's range saturate to
// +-65504 instead of becoming infinite (concepts/codec.hpp); infinities stay infinite and NaN stays
// NaN (quieted, its top payload bits kept, as the F16C instructions do).
//
// One scalar reference (detail::fp16_from_float, detail::float_from_fp16) defines every result;
// the vector paths must agree with it bit for bit, and tests/unit/test_codec.cpp checks that they
// do. Paths, chosen at compile time:
//   __AVX512F__            16 values per instruction (vcvtps2ph / vcvtph2ps on zmm)
//   __AVX__ && __F16C__     8 values per instruction (ymm)
//   __SSE2__               (any x86-64) integer arithmetic, 8 values per step; the rare subnormal
//                          results of an encode are redone by the scalar reference
//   otherwise              the scalar reference
// Define FLOTILLA_NO_CODEC_SIMD to use the scalar reference everywhere.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#if !defined(FLOTILLA_NO_CODEC_SIMD) && (defined(__SSE2__) || defined(__AVX__) || defined(__AVX512F__))
#include <immintrin.h>
#endif

// The kernels and the codec live in an inline namespace named after the path, so translation
// units built with different flags get distinct symbols rather than one (ODR-violating) definition
// that the linker picks for all of them (as core/detail/sgemm_kernel.hpp does).
#if !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX512F__)
#define FLOTILLA_FP16_ISA fp16_avx512
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX__) && defined(__F16C__)
#define FLOTILLA_FP16_ISA fp16_f16c
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__SSE2__)
#define FLOTILLA_FP16_ISA fp16_sse2
#else
#define FLOTILLA_FP16_ISA fp16_scalar
#endif

#include "flotilla/codec/little_endian.hpp"
#include "flotilla/concepts/codec.hpp"

namespace flotilla::detail {

// ---- the scalar reference ----------------------------------------------------------------------

/// float -> binary16 bits: round to nearest even, subnormals kept, finite overflow saturates to
/// +-65504, inf stays inf, NaN becomes a quiet NaN with the top 10 payload bits kept.
/// Integer arithmetic only, so the result does not depend on the floating-point environment
/// (rounding mode, flush-to-zero).
constexpr std::uint16_t fp16_from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf or NaN
    return static_cast<std::uint16_t>(sign | (a == 0x7f800000u ? 0x7c00u : 0x7e00u | ((a >> 13) & 0x3ffu)));
  // Above 65504 (0x477fe000) saturate. Up to 65520 round-to-nearest gives 65504 anyway; beyond,
  // it would give inf.
  if (a > 0x477fe000u) return static_cast<std::uint16_t>(sign | 0x7bffu);
  if (a >= 0x38800000u) {  // a normal half (>= 2^-14): rebias the exponent (127 - 15 = 112)
    // Adding 0xfff plus the lowest kept bit rounds to nearest even; a carry out of the mantissa
    // correctly bumps the exponent.
    return static_cast<std::uint16_t>(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // |f| <= 2^-25: zero (2^-25 itself is a tie, to even 0)
  // A subnormal half counts units of 2^-24: |f| = m * 2^(e - 150), so the count is m >> (126 - e).
  const std::uint32_t e = a >> 23;                            // 102 .. 112
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;        // 24-bit significand
  const std::uint32_t shift = 126u - e;                       // 14 .. 24
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;           // q may reach 0x400: the smallest normal
  return static_cast<std::uint16_t>(sign | q);
}

/// binary16 bits -> float (exact; NaN is quieted, as F16C's vcvtph2ps does).
constexpr float float_from_fp16(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;  // exponent and mantissa
  std::uint32_t bits;
  if (em >= 0x7c00u) {
    bits = 0x7f800000u | ((em & 0x3ffu) << 13) | (em > 0x7c00u ? 0x00400000u : 0u);
  } else if (em >= 0x0400u) {
    bits = (em << 13) + 0x38000000u;
  } else {
    // Zero or subnormal: em * 2^-24, exact in float (em < 2^10, and the product is normal).
    bits = std::bit_cast<std::uint32_t>(static_cast<float>(em) * 0x1p-24f);
  }
  return std::bit_cast<float>(bits | sign);
}

inline void fp16_encode_scalar(const float* in, std::byte* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) store_u16_le(out + 2 * i, fp16_from_float(in[i]));
}
inline void fp16_decode_scalar(const std::byte* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_from_fp16(load_u16_le(in + 2 * i));
}
inline void fp16_decode_add_scalar(const std::byte* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] += float_from_fp16(load_u16_le(in + 2 * i));
}

// ---- vector paths ------------------------------------------------------------------------------

inline namespace FLOTILLA_FP16_ISA {

#if !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX512F__)
#define FLOTILLA_FP16_PATH "avx512"
// The zero-masking forms with a full mask (maskz_..., 0xffff) are the plain instructions: GCC
// before 12.3 warns "__Y may be used uninitialized" inside its own unmasked AVX-512 intrinsics
// (they start from _mm512_undefined_*(), GCC bug 105593) in every translation unit that inlines
// them, which -Werror builds cannot have.
// Returns how many leading values were done (a multiple of 16); the caller does the rest.
inline std::size_t fp16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  // vcvtps2ph rounds (imm: to nearest even) but overflows to inf: clamp finite values to +-65504
  // first. min/max return their second operand when either is NaN, so NaN passes through; inf is
  // put back after the clamp.
  const __m512 hi = _mm512_set1_ps(65504.0f), lo = _mm512_set1_ps(-65504.0f);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __mmask16 all = 0xffff;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(in + i);
    const __mmask16 is_inf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), abs_mask), inf);
    const __m512 c = _mm512_mask_mov_ps(_mm512_maskz_max_ps(all, lo, _mm512_maskz_min_ps(all, hi, v)), is_inf, v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i),
                        _mm512_maskz_cvtps_ph(all, c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}
inline std::size_t fp16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i))));
  return i;
}
inline std::size_t fp16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 d = _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i)));
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), d));
  }
  return i;
}
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__AVX__) && defined(__F16C__)
#define FLOTILLA_FP16_PATH "f16c"
inline std::size_t fp16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  // As the AVX-512 path: clamp finite values (NaN passes min/max as their second operand), then
  // restore infinities, using float compares so that AVX without AVX2 suffices.
  const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    const __m256 is_inf = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_EQ_OQ);
    const __m256 c = _mm256_blendv_ps(_mm256_max_ps(lo, _mm256_min_ps(hi, v)), v, is_inf);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}
inline std::size_t fp16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i))));
  return i;
}
inline std::size_t fp16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), d));
  }
  return i;
}
#elif !defined(FLOTILLA_NO_CODEC_SIMD) && defined(__SSE2__)
#define FLOTILLA_FP16_PATH "sse2"
// Baseline x86-64 has no conversion instructions: the scalar reference's integer arithmetic, four
// lanes at a time. Encoding a subnormal half needs a shift by a per-lane amount, which SSE2 lacks;
// those lanes (|x| in (2^-25, 2^-14), rare) are flagged and redone by the scalar reference.
inline __m128i fp16_select(__m128i mask, __m128i a, __m128i b) noexcept {
  return _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b));
}
inline __m128i fp16_encode4_sse2(__m128i x, int& subnormal_lanes) noexcept {
  const __m128i a = _mm_and_si128(x, _mm_set1_epi32(0x7fffffff));
  const __m128i sign = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(0x8000));
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(a, 13), _mm_set1_epi32(1));
  // a - 0x38000000 + 0xfff + lsb, >> 13 (wraps for small a; those lanes are replaced below).
  __m128i r = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(a, _mm_set1_epi32(0xfff - 0x38000000)), lsb), 13);
  const __m128i gt_max = _mm_cmpgt_epi32(a, _mm_set1_epi32(0x477fe000));
  const __m128i is_inf = _mm_cmpeq_epi32(a, _mm_set1_epi32(0x7f800000));
  const __m128i is_nan = _mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f800000));
  const __m128i below_normal = _mm_cmpgt_epi32(_mm_set1_epi32(0x38800000), a);
  const __m128i is_zero = _mm_cmpgt_epi32(_mm_set1_epi32(0x33000001), a);
  r = fp16_select(gt_max, _mm_set1_epi32(0x7bff), r);
  r = fp16_select(is_inf, _mm_set1_epi32(0x7c00), r);
  r = fp16_select(is_nan, _mm_or_si128(_mm_set1_epi32(0x7e00), _mm_and_si128(_mm_srli_epi32(a, 13), _mm_set1_epi32(0x3ff))), r);
  r = _mm_andnot_si128(below_normal, r);
  subnormal_lanes = _mm_movemask_ps(_mm_castsi128_ps(_mm_andnot_si128(is_zero, below_normal)));
  return _mm_or_si128(r, sign);
}
// Packs eight 32-bit lanes holding 16-bit codes: packs_epi32 saturates signed, so shift the
// codes into the signed range and back.
inline __m128i fp16_pack_sse2(__m128i r0, __m128i r1) noexcept {
  const __m128i bias32 = _mm_set1_epi32(0x8000);
  const __m128i p = _mm_packs_epi32(_mm_sub_epi32(r0, bias32), _mm_sub_epi32(r1, bias32));
  return _mm_xor_si128(p, _mm_set1_epi16(static_cast<short>(0x8000)));
}
inline __m128i fp16_decode4_sse2(__m128i u) noexcept {
  const __m128i em = _mm_and_si128(u, _mm_set1_epi32(0x7fff));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(u, _mm_set1_epi32(0x8000)), 16);
  const __m128i o = _mm_slli_epi32(em, 13);
  const __m128i normal = _mm_add_epi32(o, _mm_set1_epi32(0x38000000));
  const __m128i is_nan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x7c00));
  const __m128i inf_nan = _mm_or_si128(_mm_add_epi32(o, _mm_set1_epi32(0x70000000)),
                                       _mm_and_si128(is_nan, _mm_set1_epi32(0x00400000)));
  // Zero and subnormals: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, an exact subtraction.
  const __m128i sub = _mm_castps_si128(
      _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(o, _mm_set1_epi32(0x38800000))), _mm_set1_ps(0x1p-14f)));
  const __m128i is_inf_nan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x7bff));
  const __m128i is_sub = _mm_cmpgt_epi32(_mm_set1_epi32(0x0400), em);
  const __m128i r = fp16_select(is_sub, sub, fp16_select(is_inf_nan, inf_nan, normal));
  return _mm_or_si128(r, sign);
}
inline std::size_t fp16_encode_simd(const float* in, std::byte* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int sub0 = 0, sub1 = 0;
    const __m128i r0 = fp16_encode4_sse2(_mm_castps_si128(_mm_loadu_ps(in + i)), sub0);
    const __m128i r1 = fp16_encode4_sse2(_mm_castps_si128(_mm_loadu_ps(in + i + 4)), sub1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), fp16_pack_sse2(r0, r1));
    if ((sub0 | sub1) != 0) [[unlikely]] {
      const int lanes = sub0 | (sub1 << 4);
      for (int j = 0; j < 8; ++j)
        if (lanes & (1 << j)) store_u16_le(out + 2 * (i + static_cast<std::size_t>(j)), fp16_from_float(in[i + static_cast<std::size_t>(j)]));
    }
  }
  return i;
}
inline std::size_t fp16_decode_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm_storeu_ps(out + i, _mm_castsi128_ps(fp16_decode4_sse2(_mm_unpacklo_epi16(h, zero))));
    _mm_storeu_ps(out + i + 4, _mm_castsi128_ps(fp16_decode4_sse2(_mm_unpackhi_epi16(h, zero))));
  }
  return i;
}
inline std::size_t fp16_decode_add_simd(const std::byte* in, float* out, std::size_t n) noexcept {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    const __m128 d0 = _mm_castsi128_ps(fp16_decode4_sse2(_mm_unpacklo_epi16(h, zero)));
    const __m128 d1 = _mm_castsi128_ps(fp16_decode4_sse2(_mm_unpackhi_epi16(h, zero)));
    _mm_storeu_ps(out + i, _mm_add_ps(_mm_loadu_ps(out + i), d0));
    _mm_storeu_ps(out + i + 4, _mm_add_ps(_mm_loadu_ps(out + i + 4), d1));
  }
  return i;
}
#else
#define FLOTILLA_FP16_PATH "scalar"
inline std::size_t fp16_encode_simd(const float*, std::byte*, std::size_t) noexcept { return 0; }
inline std::size_t fp16_decode_simd(const std::byte*, float*, std::size_t) noexcept { return 0; }
inline std::size_t fp16_decode_add_simd(const std::byte*, float*, std::size_t) noexcept { return 0; }
#endif

/// Which vector path this translation unit compiled ("avx512", "f16c", "sse2" or "scalar").
inline constexpr std::string_view fp16_path = FLOTILLA_FP16_PATH;
#undef FLOTILLA_FP16_PATH

inline void fp16_encode(const float* in, std::byte* out, std::size_t n) noexcept {
  const std::size_t done = fp16_encode_simd(in, out, n);
  fp16_encode_scalar(in + done, out + 2 * done, n - done);
}
inline void fp16_decode(const std::byte* in, float* out, std::size_t n) noexcept {
  const std::size_t done = fp16_decode_simd(in, out, n);
  fp16_decode_scalar(in + 2 * done, out + done, n - done);
}
inline void fp16_decode_add(const std::byte* in, float* out, std::size_t n) noexcept {
  const std::size_t done = fp16_decode_add_simd(in, out, n);
  fp16_decode_add_scalar(in + 2 * done, out + done, n - done);
}

}  // namespace FLOTILLA_FP16_ISA
}  // namespace flotilla::detail

namespace flotilla::codec {
inline namespace FLOTILLA_FP16_ISA {

/// float values as IEEE binary16: half the bytes, about 3.3 significant digits, range +-65504
/// (saturating). See the top of this file for rounding and special values.
struct Fp16 {
  static constexpr std::string_view name = "fp16";
  static constexpr bool lossless = false;
  static constexpr std::size_t encoded_size(std::size_t n) noexcept { return 2 * n; }

  static void encode(std::span<const float> values, std::span<std::byte> bytes) {
    detail::check_codec_sizes(name, "encode", values.size(), bytes.size(), encoded_size(values.size()));
    detail::fp16_encode(values.data(), bytes.data(), values.size());
  }
  static void decode(std::span<const std::byte> bytes, std::span<float> values) {
    detail::check_codec_sizes(name, "decode", values.size(), bytes.size(), encoded_size(values.size()));
    detail::fp16_decode(bytes.data(), values.data(), values.size());
  }
  static void decode_add(std::span<const std::byte> bytes, std::span<float> values) {
    detail::check_codec_sizes(name, "decode_add", values.size(), bytes.size(), encoded_size(values.size()));
    detail::fp16_decode_add(bytes.data(), values.data(), values.size());
  }
};

}  // namespace FLOTILLA_FP16_ISA

static_assert(Codec<Fp16, float>);

}  // namespace flotilla::codec

#undef FLOTILLA_FP16_ISA
#endif  // FLOTILLA_CODEC_FP16_HPP_INCLUDED
