// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CORE_RANDOM_HPP_INCLUDED
#define FLOTILLA_CORE_RANDOM_HPP_INCLUDED
// Seeded random numbers that give the same sequence on every platform and standard library.
//
// std::uniform_real_distribution and friends are implementation-defined, so two compilers given the
// same seed may initialise different networks. flotilla draws its own: xoshiro256** for streams,
// and a stateless 64-bit mix for per-sample randomness (dropout masks) that must not depend on how
// a batch was split across threads or workers.
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace flotilla {

namespace detail {
inline constexpr std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/// A stateless hash of several words; the same inputs give the same 64 bits everywhere.
inline constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t s = a ^ (b * 0xd1342543de82ef95ULL);
  return splitmix64(s);
}
inline constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

// The logarithm and cosine of the normal distribution, computed here rather than by the maths
// library: std::log and std::cos are not correctly rounded, and libraries (glibc, musl, Apple's,
// Microsoft's) differ in the last bit, which would make a seed initialise different networks on
// different platforms. These use only operations IEEE 754 rounds exactly the same everywhere
// (+, -, *, /, frexp, ldexp, and std::fma, which is spelt out wherever a product meets a sum so
// that no compiler can fuse one and not another). Both are within a few units in the last place
// of the true values; what matters is that they are the same bits everywhere.

/// ln(x) for a finite x > 0.
inline double portable_log(double x) noexcept {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m 2^e, m in [0.5, 1)
  if (m < std::numbers::sqrt2 / 2) {
    m *= 2;
    --e;
  }
  // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the series in s^2 = z below 1e-17
  // after the 1 / 25 term.
  const double f = m - 1;
  const double s = f / (2 + f);
  const double z = s * s;
  double p = 1.0 / 25;
  for (const double c : {1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3})
    p = std::fma(p, z, c);
  const double ln_m = std::fma(2 * s * z, p, 2 * s);
  // e ln 2 in two parts: the high one has few enough bits that e * high is exact.
  constexpr double ln2_high = 0x1.62e42feep-1, ln2_low = 0x1.a39ef35793c76p-33;
  return std::fma(static_cast<double>(e), ln2_high, std::fma(static_cast<double>(e), ln2_low, ln_m));
}

/// cos(2 pi u) for u in [0, 1).
inline double portable_cos_turns(double u) noexcept {
  // Quarter turns: 4u = q + r exactly, r in [-1/2, 1/2], so the angle left is |r pi/2| <= pi/4.
  const double quarters = 4 * u;
  const double q = std::floor(quarters + 0.5);
  const double r = quarters - q;
  const double t = r * (std::numbers::pi / 2);
  // Taylor series in x = -t^2, to the t^18 / 18! and t^19 / 19! terms (below 1e-18 at pi/4):
  // cos t = 1 + x (1/2! + x (1/4! + ...)), sin t = t + t x (1/3! + x (1/5! + ...)).
  const double x = -(t * t);
  constexpr double cos_terms[] = {1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, 1.0 / 87178291200.0, 1.0 / 479001600.0,
                                  1.0 / 3628800.0,          1.0 / 40320.0,          1.0 / 720.0,         1.0 / 24.0,
                                  1.0 / 2.0};
  constexpr double sin_terms[] = {1.0 / 121645100408832000.0, 1.0 / 355687428096000.0, 1.0 / 1307674368000.0,
                                  1.0 / 6227020800.0,         1.0 / 39916800.0,        1.0 / 362880.0,
                                  1.0 / 5040.0,               1.0 / 120.0,             1.0 / 6.0};
  const int quadrant = static_cast<int>(q) & 3;  // cos(q pi/2 + t): cos t, -sin t, -cos t, sin t
  double p = 0;
  if (quadrant % 2 == 0) {
    for (const double k : cos_terms) p = std::fma(p, x, k);
    const double cosine = std::fma(x, p, 1.0);
    return quadrant == 0 ? cosine : -cosine;
  }
  for (const double k : sin_terms) p = std::fma(p, x, k);
  const double sine = std::fma(t * x, p, t);
  return quadrant == 3 ? sine : -sine;
}
}  // namespace detail

/// Converts 64 random bits to a uniform value in [0, 1).
template <class T>
inline T bits_to_unit(std::uint64_t bits) noexcept {
  if constexpr (sizeof(T) <= 4) {
    return static_cast<T>(static_cast<float>(bits >> 40) * 0x1.0p-24f);
  } else {
    return static_cast<T>(static_cast<double>(bits >> 11) * 0x1.0p-53);
  }
}

/// xoshiro256** seeded through splitmix64. Its whole state is four words, which checkpoints save.
class Generator {
 public:
  using result_type = std::uint64_t;
  using state_type = std::array<std::uint64_t, 4>;

  explicit Generator(std::uint64_t seed = 0x5eed) noexcept { reseed(seed); }

  void reseed(std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (auto& w : s_) w = detail::splitmix64(x);
  }

  /// A generator for a named sub-stream (a layer, a worker) that does not overlap this one's use.
  Generator fork(std::uint64_t stream) const noexcept {
    return Generator(detail::mix(s_[0] ^ s_[3], stream));
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return ~std::uint64_t{0}; }

  result_type operator()() noexcept {
    const std::uint64_t result = detail::rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = detail::rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1).
  template <class T = double>
  T uniform() noexcept {
    return bits_to_unit<T>((*this)());
  }
  /// Uniform in [lo, hi). (One fused multiply-add, spelt out: a compiler that fused it on one
  /// machine and not on another would draw different values.)
  template <class T>
  T uniform(T lo, T hi) noexcept {
    return std::fma(hi - lo, uniform<T>(), lo);
  }
  /// Standard normal, by Box-Muller in double precision, the same bits on every platform (its
  /// logarithm and cosine are flotilla's own: see detail::portable_log).
  template <class T = double>
  T normal() noexcept {
    const double u1 = 1.0 - uniform<double>();  // (0, 1]: log stays finite
    const double u2 = uniform<double>();
    return static_cast<T>(std::sqrt(-2.0 * detail::portable_log(u1)) * detail::portable_cos_turns(u2));
  }
  /// Uniform integer in [0, n), without modulo bias (rejection of the incomplete last block).
  std::uint64_t below(std::uint64_t n) noexcept {
    if (n <= 1) return 0;
    const std::uint64_t limit = max() - max() % n;
    std::uint64_t x = (*this)();
    while (x >= limit) x = (*this)();
    return x % n;
  }

  const state_type& state() const noexcept { return s_; }

  friend bool operator==(const Generator&, const Generator&) = default;

 private:
  state_type s_{};
};

/// Fisher-Yates shuffle driven by Generator, identical on every standard library.
template <class RandomIt>
inline void shuffle(RandomIt first, RandomIt last, Generator& g) {
  const auto n = last - first;
  for (auto i = n - 1; i > 0; --i) {
    const auto j = static_cast<decltype(i)>(g.below(static_cast<std::uint64_t>(i) + 1));
    std::swap(first[i], first[j]);
  }
}

}  // namespace flotilla
#endif  // FLOTILLA_CORE_RANDOM_HPP_INCLUDED
