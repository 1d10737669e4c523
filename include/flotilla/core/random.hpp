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
  /// Uniform in [lo, hi).
  template <class T>
  T uniform(T lo, T hi) noexcept {
    return lo + (hi - lo) * uniform<T>();
  }
  /// Standard normal, by Box-Muller in double precision.
  template <class T = double>
  T normal() noexcept {
    const double u1 = 1.0 - uniform<double>();  // (0, 1]: log stays finite
    const double u2 = uniform<double>();
    return static_cast<T>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
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
