// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The built-in codecs: exhaustive checks of fp16 and bfloat16 against references computed
// independently (exact arithmetic in double), vector paths against the scalar reference bit for
// bit, the lossless codec, and error feedback.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "flotilla/codec/bf16.hpp"
#include "flotilla/codec/error_feedback.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/codec/fp32.hpp"

#if defined(__AVX512BF16__) && !defined(FLOTILLA_NO_CODEC_SIMD)
#include <immintrin.h>
#endif

namespace unit_codec {

using namespace flotilla;

namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// ---- independent references ------------------------------------------------------------------

/// The value of a binary16 code, from its definition.
double fp16_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double mag = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

/// Round-to-nearest-even float -> fp16 with saturation, by searching the sorted positive codes
/// and comparing distances exactly in double (a float and a half differ by at most 2^53 units of
/// the smaller's last place, so the differences are exact).
std::uint16_t fp16_reference(float f) {
  const double x = std::fabs(double(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (x >= 65504.0) return sign | 0x7bff;
  // Largest code with value <= x among 0x0000..0x7bff (values increase with the code).
  std::uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (fp16_value(mid) <= x) lo = mid; else hi = static_cast<std::uint16_t>(mid - 1);
  }
  const double below = x - fp16_value(lo), above = fp16_value(static_cast<std::uint16_t>(lo + 1)) - x;
  std::uint16_t r = lo;
  if (above < below || (above == below && (lo & 1))) r = static_cast<std::uint16_t>(lo + 1);
  return sign | r;
}

/// Round-to-nearest-even float -> bfloat16 with saturation, by comparing exact distances to the
/// two neighbouring bfloat16 values (both floats; their differences with x are exact in double).
std::uint16_t bf16_reference(float f) {
  const std::uint32_t u = bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const std::uint32_t a = u & 0x7fffffff;
  const std::uint16_t lo = static_cast<std::uint16_t>(a >> 16);  // truncated magnitude
  if (lo >= 0x7f7f) return sign | 0x7f7f;                        // at or beyond the largest: saturate
  const double x = double(from_bits(a));
  const double vlo = double(from_bits(std::uint32_t(lo) << 16)), vhi = double(from_bits(std::uint32_t(lo + 1) << 16));
  const double below = x - vlo, above = vhi - x;
  std::uint16_t r = lo;
  if (above < below || (above == below && (lo & 1))) r = static_cast<std::uint16_t>(lo + 1);
  return sign | r;
}

bool fp16_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

template <class C>
std::vector<std::uint16_t> encode_codes(std::span<const float> v) {
  std::vector<std::byte> b(C::encoded_size(v.size()));
  C::encode(v, b);
  std::vector<std::uint16_t> codes(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    codes[i] = static_cast<std::uint16_t>(std::to_integer<unsigned>(b[2 * i]) | std::to_integer<unsigned>(b[2 * i + 1]) << 8);
  return codes;
}

std::vector<std::byte> codes_to_bytes(std::span<const std::uint16_t> codes) {
  std::vector<std::byte> b(2 * codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) {
    b[2 * i] = std::byte(codes[i] & 0xff);
    b[2 * i + 1] = std::byte(codes[i] >> 8);
  }
  return b;
}

/// Floats that exercise every branch: specials, saturation, both sides of every boundary,
/// subnormals of float, fp16 and bfloat16, and random bit patterns.
std::vector<float> edge_and_random_floats(std::size_t n, std::uint32_t seed) {
  std::vector<float> v;
  const std::uint32_t specials[] = {
      0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
      0x7f800001, 0xff800001, 0x7fbfffff, 0x7f80ffff, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x477fe000,
      0x477fefff, 0x477ff000, 0x47800000, 0xc77ff000, 0x38800000, 0x387fffff, 0x387fe000, 0x33000000, 0x33000001,
      0x32ffffff, 0xb3000001, 0x33800000, 0x33c00000, 0x34200000, 0x3f808000, 0x3f818000, 0x3f800001, 0x3f807fff,
      0x0080ffff, 0x00008000, 0x3f801000, 0x3f803000, 0x3f802000, 0x3f806000};
  for (std::uint32_t s : specials) v.push_back(from_bits(s));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any;
  std::uniform_int_distribution<std::uint32_t> exponent(90, 150);  // around the fp16 range
  while (v.size() < n) {
    const std::uint32_t r = any(rng);
    switch (r % 4) {
      case 0: v.push_back(from_bits(any(rng))); break;
      case 1: v.push_back(from_bits((r & 0x807fffff) | exponent(rng) << 23)); break;
      case 2: v.push_back(from_bits((r & 0x80000000) | ((any(rng) & 0x3ff) << 13) | exponent(rng) << 23 | 0x1000)); break;
      default: v.push_back(std::normal_distribution<float>(0.f, 1.f)(rng)); break;
    }
  }
  return v;
}

/// Bitwise equality of float buffers (NaN payloads included).
bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/// Bitwise equality of sums, except that any NaN equals any NaN: which payload a + b keeps when
/// both are NaN depends on the operand order (x86 keeps the first), and compilers commute a + b.
bool same_sums(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}

}  // namespace

TEST_CASE("codec concept: which codecs serve which value types") {
  static_assert(Codec<codec::Fp32, float> && Codec<codec::Fp64, double> && Codec<codec::Raw<std::uint64_t>, std::uint64_t>);
  static_assert(Codec<codec::Fp16, float> && Codec<codec::Bf16, float> && Codec<codec::Bf16Truncate, float>);
  static_assert(!Codec<codec::Fp32, double> && !Codec<codec::Fp16, double>);
  // The lossless codec follows the values; the others stay what they are.
  static_assert(std::is_same_v<codec::for_value_t<codec::Fp32, double>, codec::Fp64>);
  static_assert(std::is_same_v<codec::for_value_t<codec::Fp32, std::uint64_t>, codec::Raw<std::uint64_t>>);
  static_assert(std::is_same_v<codec::for_value_t<codec::Fp16, double>, codec::Fp16>);
  static_assert(codec::Fp32::lossless && !codec::Fp16::lossless && !codec::Bf16::lossless);
  static_assert(codec::Fp16::encoded_size(10) == 20 && codec::Fp64::encoded_size(3) == 24);
  CHECK(codec::Fp32::name == "fp32");
  CHECK(codec::Bf16Truncate::name == "bf16-truncate");
  MESSAGE("vector paths compiled: fp16 " << detail::fp16_path << ", bf16 " << detail::bf16_path);
}

TEST_CASE("fp16: every one of the 65536 codes decodes exactly and re-encodes to itself") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const auto bytes = codes_to_bytes(all);
  std::vector<float> decoded(all.size()), decoded_scalar(all.size());
  codec::Fp16::decode(bytes, decoded);
  detail::fp16_decode_scalar(bytes.data(), decoded_scalar.data(), all.size());
  CHECK(same_bits(decoded, decoded_scalar));
  const auto again = encode_codes<codec::Fp16>(decoded);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto h = all[i];
    const float f = decoded[i];
    if (fp16_is_nan(h)) {
      const bool ok = std::isnan(f) && std::signbit(f) == bool(h & 0x8000) && fp16_is_nan(again[i]) &&
                      (again[i] & 0x8000) == (h & 0x8000) && (again[i] | 0x0200) == (h | 0x0200);
      bad += !ok;
    } else {
      const bool value_ok = (h & 0x7fff) == 0x7c00 ? std::isinf(f) : double(f) == fp16_value(h);
      bad += !(value_ok && std::signbit(f) == bool(h & 0x8000) && again[i] == h &&
               detail::fp16_from_float(f) == h);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("fp16: round to nearest even at every tie, against exact arithmetic") {
  // For every pair of adjacent finite codes: the midpoint (an exact tie: 12 significant bits fit a
  // float) and the floats just below and above it.
  std::vector<float> in;
  std::size_t inexact_midpoints = 0;
  for (std::uint32_t h = 0; h < 0x7bff; ++h) {
    const float mid = static_cast<float>((fp16_value(std::uint16_t(h)) + fp16_value(std::uint16_t(h + 1))) / 2);
    inexact_midpoints += double(mid) * 2 != fp16_value(std::uint16_t(h)) + fp16_value(std::uint16_t(h + 1));
    for (float f : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      in.push_back(f);
      in.push_back(-f);
    }
  }
  const auto codes = encode_codes<codec::Fp16>(in);
  std::size_t bad = 0, ties_to_odd = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto ref = fp16_reference(in[i]);
    bad += codes[i] != ref || detail::fp16_from_float(in[i]) != ref;
    ties_to_odd += (i % 6 < 2) && (ref & 1);  // an exact tie must go to the even code
  }
  REQUIRE(inexact_midpoints == 0);
  CHECK(bad == 0);
  CHECK(ties_to_odd == 0);
}

TEST_CASE("fp16: random floats agree with exact arithmetic") {
  const auto in = edge_and_random_floats(400000, 7);
  const auto codes = encode_codes<codec::Fp16>(in);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      bad += !fp16_is_nan(codes[i]) || bool(codes[i] & 0x8000) != std::signbit(in[i]);
    } else if (std::isinf(in[i])) {
      bad += codes[i] != (std::signbit(in[i]) ? 0xfc00 : 0x7c00);
    } else {
      bad += codes[i] != fp16_reference(in[i]);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("fp16: saturation, infinities, NaN, subnormals, signed zero") {
  const auto enc = [](float f) { return detail::fp16_from_float(f); };
  CHECK(enc(65504.f) == 0x7bff);
  CHECK(enc(65519.99f) == 0x7bff);
  CHECK(enc(65520.f) == 0x7bff);  // round-to-nearest would give inf here
  CHECK(enc(1e10f) == 0x7bff);
  CHECK(enc(std::numeric_limits<float>::max()) == 0x7bff);
  CHECK(enc(-1e30f) == 0xfbff);
  CHECK(enc(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(enc(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(enc(from_bits(0x7fc00000)) == 0x7e00);
  CHECK(enc(from_bits(0xffc00000)) == 0xfe00);
  CHECK(enc(from_bits(0x7f800001)) == 0x7e00);  // payload only in the dropped bits: still NaN
  CHECK(enc(from_bits(0x7fa02000)) == 0x7f01);  // top payload bits kept, quiet bit set
  CHECK(enc(0x1p-24f) == 0x0001);               // smallest subnormal
  CHECK(enc(0x1p-25f) == 0x0000);               // tie between 0 and 2^-24: even
  CHECK(enc(std::nextafter(0x1p-25f, 1.f)) == 0x0001);
  CHECK(enc(1.5f * 0x1p-24f) == 0x0002);        // tie: to even
  CHECK(enc(2.5f * 0x1p-24f) == 0x0002);        // tie: to even
  CHECK(enc(1023.f * 0x1p-24f) == 0x03ff);      // largest subnormal
  CHECK(enc(1023.5f * 0x1p-24f) == 0x0400);     // tie: rounds up into the smallest normal
  CHECK(enc(-0x1p-24f) == 0x8001);
  CHECK(enc(-0.f) == 0x8000);
  CHECK(enc(from_bits(0x00000001)) == 0x0000);  // float subnormals are far below fp16's range
  CHECK(enc(from_bits(0x80000001)) == 0x8000);
  CHECK(enc(1.f) == 0x3c00);
  CHECK(enc(1.f + 0x1p-11f) == 0x3c00);         // tie at 1: to even
  CHECK(enc(1.f + 3 * 0x1p-11f) == 0x3c02);     // tie: to even (up)
  CHECK(detail::float_from_fp16(0x0001) == 0x1p-24f);
  CHECK(detail::float_from_fp16(0x7bff) == 65504.f);
  CHECK(bits(detail::float_from_fp16(0x7c01)) == 0x7fc02000);  // NaN quieted, payload kept (as F16C)
  static_assert(detail::fp16_from_float(1.f) == 0x3c00, "the reference is usable at compile time");
}

TEST_CASE("bf16: every one of the 65536 codes decodes exactly and re-encodes to itself") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const auto bytes = codes_to_bytes(all);
  std::vector<float> decoded(all.size()), decoded_scalar(all.size());
  codec::Bf16::decode(bytes, decoded);
  detail::bf16_decode_scalar(bytes.data(), decoded_scalar.data(), all.size());
  CHECK(same_bits(decoded, decoded_scalar));
  const auto rne = encode_codes<codec::Bf16>(decoded);
  const auto trunc = encode_codes<codec::Bf16Truncate>(decoded);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto h = all[i];
    bad += bits(decoded[i]) != std::uint32_t(h) << 16;
    if (bf16_is_nan(h))
      bad += !bf16_is_nan(rne[i]) || !bf16_is_nan(trunc[i]) || rne[i] != (h | 0x40) || trunc[i] != (h | 0x40);
    else
      bad += rne[i] != h || trunc[i] != h;
  }
  CHECK(bad == 0);
}

TEST_CASE("bf16: rounding against exact arithmetic, and where truncation differs from it") {
  // Every low half-word under a sample of high half-words (both signs, subnormals, the top of the
  // range, specials), plus random floats.
  std::vector<std::uint32_t> highs = {0x0000, 0x0001, 0x007f, 0x0080, 0x0081, 0x3f80, 0x3f81, 0x4049, 0x7f7e,
                                      0x7f7f, 0x7f80, 0x7fc0, 0x7fff, 0x8000, 0x807f, 0xbf80, 0xff7f, 0xff80};
  std::mt19937 rng(11);
  for (int i = 0; i < 48; ++i) highs.push_back(rng() & 0xffff);
  std::vector<float> in;
  for (std::uint32_t hi : highs)
    for (std::uint32_t lo = 0; lo < 65536; ++lo) in.push_back(from_bits(hi << 16 | lo));
  const auto extra = edge_and_random_floats(200000, 13);
  in.insert(in.end(), extra.begin(), extra.end());

  const auto rne = encode_codes<codec::Bf16>(in);
  const auto trunc = encode_codes<codec::Bf16Truncate>(in);
  std::size_t bad_rne = 0, bad_trunc = 0, bad_difference = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t u = bits(in[i]);
    const auto high = static_cast<std::uint16_t>(u >> 16);
    if (std::isnan(in[i])) {
      bad_rne += rne[i] != (high | 0x40);
      bad_trunc += trunc[i] != (high | 0x40);
      continue;
    }
    bad_trunc += trunc[i] != high;
    if (std::isinf(in[i])) {
      bad_rne += rne[i] != high;
      continue;
    }
    bad_rne += rne[i] != bf16_reference(in[i]);
    // Rounding goes up (in magnitude) exactly when the dropped half-word is above half, or is
    // half and the kept part is odd; except where that would pass the largest finite value.
    const std::uint32_t low = u & 0xffff;
    const bool up = low > 0x8000 || (low == 0x8000 && (high & 1));
    const bool saturates = (high & 0x7fff) == 0x7f7f;
    const std::uint16_t expected = up && !saturates ? static_cast<std::uint16_t>(high + 1) : high;
    bad_difference += rne[i] != expected;
  }
  CHECK(bad_rne == 0);
  CHECK(bad_trunc == 0);
  CHECK(bad_difference == 0);
}

TEST_CASE("bf16: saturation, infinities, NaN, subnormals") {
  CHECK(detail::bf16_from_float(std::numeric_limits<float>::max()) == 0x7f7f);
  CHECK(detail::bf16_from_float(from_bits(0x7f7f8000)) == 0x7f7f);  // tie past the largest: saturate
  CHECK(detail::bf16_from_float(from_bits(0xff7fffff)) == 0xff7f);
  CHECK(detail::bf16_truncate_from_float(std::numeric_limits<float>::max()) == 0x7f7f);
  CHECK(detail::bf16_from_float(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(detail::bf16_from_float(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(detail::bf16_from_float(from_bits(0x7f800001)) == 0x7fc0);  // the carry must not make it inf
  CHECK(detail::bf16_from_float(from_bits(0x7fffffff)) == 0x7fff);  // nor overflow past the sign
  CHECK(detail::bf16_truncate_from_float(from_bits(0x7f800001)) == 0x7fc0);  // truncation would give inf
  CHECK(detail::bf16_from_float(from_bits(0x007fffff)) == 0x0080);  // largest subnormal rounds up to normal
  CHECK(detail::bf16_from_float(from_bits(0x00008000)) == 0x0000);  // tie to even
  CHECK(detail::bf16_from_float(from_bits(0x00018000)) == 0x0002);  // tie to even
  CHECK(detail::bf16_from_float(from_bits(0x80018001)) == 0x8002);
  CHECK(detail::bf16_from_float(1.f) == 0x3f80);
}

TEST_CASE("vector paths agree with the scalar reference bit for bit") {
  const auto all = edge_and_random_floats(5000, 3);
  // Every length from 0 to 70 at several offsets (vector bodies, tails, unaligned), then long runs.
  std::vector<std::pair<std::size_t, std::size_t>> cases;
  for (std::size_t len = 0; len <= 70; ++len)
    for (std::size_t off : {0, 1, 3, 17}) cases.emplace_back(off, len);
  cases.emplace_back(0, all.size());
  cases.emplace_back(5, all.size() - 5);
  std::size_t bad = 0;
  for (auto [off, len] : cases) {
    const std::span<const float> in(all.data() + off, len);
    std::vector<std::byte> v(2 * len), s(2 * len);
    std::vector<float> dv(len), ds(len), av(in.begin(), in.end()), as(in.begin(), in.end());

    codec::Fp16::encode(in, v);
    detail::fp16_encode_scalar(in.data(), s.data(), len);
    bad += v != s;
    codec::Fp16::decode(s, dv);
    detail::fp16_decode_scalar(s.data(), ds.data(), len);
    bad += !same_bits(dv, ds);
    codec::Fp16::decode_add(s, av);
    detail::fp16_decode_add_scalar(s.data(), as.data(), len);
    bad += !same_sums(av, as);

    codec::Bf16::encode(in, v);
    detail::bf16_encode_scalar<true>(in.data(), s.data(), len);
    bad += v != s;
    codec::Bf16Truncate::encode(in, v);
    detail::bf16_encode_scalar<false>(in.data(), s.data(), len);
    bad += v != s;
    codec::Bf16::decode(s, dv);
    detail::bf16_decode_scalar(s.data(), ds.data(), len);
    bad += !same_bits(dv, ds);
    std::copy(in.begin(), in.end(), av.begin());
    std::copy(in.begin(), in.end(), as.begin());
    codec::Bf16::decode_add(s, av);
    detail::bf16_decode_add_scalar(s.data(), as.data(), len);
    bad += !same_sums(av, as);
  }
  CHECK(bad == 0);

  // Random 16-bit codes (all NaN payloads, subnormals) through decode and decode_add.
  std::mt19937 rng(5);
  std::vector<std::uint16_t> codes(4099);
  for (auto& c : codes) c = static_cast<std::uint16_t>(rng());
  const auto bytes = codes_to_bytes(codes);
  std::vector<float> dv(codes.size()), ds(codes.size());
  codec::Fp16::decode(bytes, dv);
  detail::fp16_decode_scalar(bytes.data(), ds.data(), codes.size());
  CHECK(same_bits(dv, ds));
}

#if defined(__AVX512BF16__) && !defined(FLOTILLA_NO_CODEC_SIMD)
TEST_CASE("AVX-512 BF16's vcvtneps2bf16 is not our rounding: it flushes subnormals and overflows to inf") {
  // Why bf16.hpp does not use it: it agrees with the reference on normal values and NaN, but not
  // on subnormal inputs or on values that round past the largest bfloat16.
  auto hw = [](float f) {
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_set1_ps(f));
    std::uint16_t out[16];
    std::memcpy(out, &r, sizeof out);
    return out[0];
  };
  const auto in = edge_and_random_floats(100000, 17);
  std::size_t normal_mismatch = 0;
  for (float f : in) {
    const std::uint32_t a = bits(f) & 0x7fffffff;
    const bool subnormal = a != 0 && a < 0x00800000, saturating = a >= 0x7f7f8000 && a < 0x7f800000;
    if (!subnormal && !saturating) normal_mismatch += hw(f) != detail::bf16_from_float(f);
  }
  CHECK(normal_mismatch == 0);
  CHECK(hw(from_bits(0x007fffff)) != detail::bf16_from_float(from_bits(0x007fffff)));
  CHECK(hw(std::numeric_limits<float>::max()) == 0x7f80);
}
#endif

TEST_CASE("the lossless codec is a bitwise copy, for float, double and integers") {
  std::vector<float> f = edge_and_random_floats(1000, 9), f2(f.size());
  std::vector<std::byte> b(codec::Fp32::encoded_size(f.size()));
  codec::Fp32::encode(f, b);
  CHECK(std::to_integer<int>(b[0]) == 0);  // the first edge value is +0: little-endian zeros
  codec::Fp32::decode(b, f2);
  CHECK(same_bits(f, f2));

  std::vector<double> d = {1.0, -0.0, 1e300, std::numeric_limits<double>::denorm_min(), std::nan("7")}, d2(d.size());
  std::vector<std::byte> bd(codec::Fp64::encoded_size(d.size()));
  codec::Fp64::encode(d, bd);
  codec::Fp64::decode(bd, d2);
  CHECK(std::memcmp(d.data(), d2.data(), d.size() * sizeof(double)) == 0);
  // Little-endian on the wire: 1.0 is 0x3ff0000000000000.
  CHECK(std::to_integer<int>(bd[7]) == 0x3f);
  CHECK(std::to_integer<int>(bd[6]) == 0xf0);

  std::vector<std::uint64_t> u = {1, 2, 0xffffffffffffffffull};
  std::vector<std::byte> bu(codec::Raw<std::uint64_t>::encoded_size(u.size()));
  codec::Raw<std::uint64_t>::encode(u, bu);
  std::vector<std::uint64_t> acc = {10, 20, 1};
  codec::Raw<std::uint64_t>::decode_add(bu, acc);
  CHECK(acc == std::vector<std::uint64_t>{11, 22, 0});

  std::vector<float> sum = {1.f, 2.f};
  std::vector<std::byte> two(8);
  codec::Fp32::encode(std::vector<float>{0.5f, -2.f}, two);
  codec::Fp32::decode_add(two, sum);
  CHECK(sum == std::vector<float>{1.5f, 0.f});
}

TEST_CASE("codecs reject buffers of the wrong size") {
  std::vector<float> v(10);
  std::vector<std::byte> b(19);
  CHECK_THROWS_WITH_AS(codec::Fp16::encode(v, b), doctest::Contains("encode of 10 values with 19 bytes"), ShapeError);
  CHECK_THROWS_AS(codec::Bf16::decode(b, v), ShapeError);
  CHECK_THROWS_AS(codec::Fp32::decode_add(b, v), ShapeError);
}

TEST_CASE("error feedback: the sum of what was sent tracks the sum of the inputs") {
  // Values that no 16-bit codec represents exactly, with a bias (mean 0.1) so that truncation's
  // error accumulates without feedback.
  const std::size_t n = 256, steps = 2000;
  std::mt19937 rng(21);
  std::normal_distribution<float> noise(0.1f, 0.05f);
  auto run = [&](auto codec, bool feedback) {
    using C = decltype(codec);
    codec::ErrorFeedback<float> ef(n);
    std::vector<float> v(n), decoded(n);
    std::vector<double> sent(n, 0.0), truth(n, 0.0);
    std::vector<std::byte> bytes(C::encoded_size(n));
    std::vector<double> max_error_at;
    for (std::size_t t = 1; t <= steps; ++t) {
      for (auto& x : v) x = noise(rng);
      if (feedback)
        ef.encode(codec, std::span<const float>(v), bytes);
      else
        C::encode(std::span<const float>(v), bytes);
      C::decode(bytes, decoded);
      double worst = 0;
      for (std::size_t i = 0; i < n; ++i) {
        sent[i] += decoded[i];
        truth[i] += v[i];
        worst = std::max(worst, std::fabs(sent[i] - truth[i]));
      }
      if (t == 10 || t == 100 || t == steps) max_error_at.push_back(worst);
    }
    return max_error_at;
  };
  for (bool truncate : {false, true}) {
    CAPTURE(truncate);
    const auto with = truncate ? run(codec::Bf16Truncate{}, true) : run(codec::Fp16{}, true);
    const auto without = truncate ? run(codec::Bf16Truncate{}, false) : run(codec::Fp16{}, false);
    // With feedback the accumulated error is one residual: below one unit in the last place of
    // the values (|v| < 0.5: 2^-12 in fp16, 2^-8 in bfloat16), however many steps; the float sums
    // of 2000 steps add a little.
    const double bound = truncate ? 0x1p-8 + 1e-4 : 0x1p-12 + 1e-4;
    for (double e : with) CHECK(e < bound);
    CHECK(with[2] < 2 * with[0] + 1e-4);  // not growing with steps
    if (truncate) CHECK(without[2] > 50 * with[2]);  // biased: grows linearly without feedback
  }

  // round_trip: values become exactly representable, the residual keeps the rest.
  codec::ErrorFeedback<float> ef;
  std::vector<float> v = {1.0001f, 3.14159f, 1e-3f};
  const std::vector<float> original = v;
  ef.round_trip(codec::Fp16{}, std::span<float>(v));
  for (std::size_t i = 0; i < v.size(); ++i) {
    CHECK(detail::float_from_fp16(detail::fp16_from_float(v[i])) == v[i]);
    CHECK(v[i] + ef.residual()[i] == doctest::Approx(original[i]).epsilon(1e-7));
  }
  // A non-finite value is sent as it is and leaves no residual behind.
  std::vector<float> bad = {std::numeric_limits<float>::infinity(), 0.f, 0.f};
  ef.round_trip(codec::Fp16{}, std::span<float>(bad));
  CHECK(std::isinf(bad[0]));
  CHECK(ef.residual()[0] == 0.f);
  CHECK_THROWS_AS(ef.round_trip(codec::Fp16{}, std::span<float>(v.data(), 2)), ShapeError);
}

}  // namespace unit_codec
