// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Throughput of the built-in codecs' encode, decode and decode_add, in GB/s of float data (4 bytes
// per value), best of repeated timings, for a buffer in L2 (64 Ki values) and one far out of cache
// (16 Mi values). The "scalar" rows call the scalar reference directly, whatever the flags. See
// README.md.
#include <flotilla/codec/bf16.hpp>
#include <flotilla/codec/fp16.hpp>
#include <flotilla/codec/fp32.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

template <class F>
double best_gbps(std::size_t n, F&& f) {
  double best = 1e30;
  const int reps = n > (1u << 20) ? 7 : 200;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock_type::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  return 4.0 * static_cast<double>(n) / best / 1e9;
}

template <class C>
void row(const char* name, std::size_t n, const std::vector<float>& v, std::vector<float>& out, std::vector<std::byte>& b) {
  const std::span<const float> in(v.data(), n);
  const std::span<std::byte> bytes(b.data(), C::encoded_size(n));
  const std::span<float> o(out.data(), n);
  const double e = best_gbps(n, [&] { C::encode(in, bytes); });
  const double d = best_gbps(n, [&] { C::decode(bytes, o); });
  const double a = best_gbps(n, [&] { C::decode_add(bytes, o); });
  std::printf("  %-14s %9zu  encode %6.2f  decode %6.2f  decode_add %6.2f GB/s\n", name, n, e, d, a);
}

// The scalar references behind the codecs, as codecs.
struct ScalarFp16 {
  static constexpr std::size_t encoded_size(std::size_t n) { return 2 * n; }
  static void encode(std::span<const float> v, std::span<std::byte> b) {
    flotilla::detail::fp16_encode_scalar(v.data(), b.data(), v.size());
  }
  static void decode(std::span<const std::byte> b, std::span<float> v) {
    flotilla::detail::fp16_decode_scalar(b.data(), v.data(), v.size());
  }
  static void decode_add(std::span<const std::byte> b, std::span<float> v) {
    flotilla::detail::fp16_decode_add_scalar(b.data(), v.data(), v.size());
  }
};
struct ScalarBf16 {
  static constexpr std::size_t encoded_size(std::size_t n) { return 2 * n; }
  static void encode(std::span<const float> v, std::span<std::byte> b) {
    flotilla::detail::bf16_encode_scalar<true>(v.data(), b.data(), v.size());
  }
  static void decode(std::span<const std::byte> b, std::span<float> v) {
    flotilla::detail::bf16_decode_scalar(b.data(), v.data(), v.size());
  }
  static void decode_add(std::span<const std::byte> b, std::span<float> v) {
    flotilla::detail::bf16_decode_add_scalar(b.data(), v.data(), v.size());
  }
};

}  // namespace

int main() {
  namespace codec = flotilla::codec;
  std::printf("vector paths: fp16 %s, bf16 %s\n", std::string(flotilla::detail::fp16_path).c_str(),
              std::string(flotilla::detail::bf16_path).c_str());
  const std::size_t big = std::size_t{16} << 20;
  std::vector<float> v(big), out(big);
  std::vector<std::byte> b(4 * big);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (auto& x : v) x = normal(rng) * 0.01f;  // gradient-like magnitudes
  for (std::size_t n : {std::size_t{65536}, big}) {
    row<codec::Fp32>("fp32 (a copy)", n, v, out, b);
    row<codec::Fp16>("fp16", n, v, out, b);
    row<ScalarFp16>("fp16 scalar", n, v, out, b);
    row<codec::Bf16>("bf16", n, v, out, b);
    row<codec::Bf16Truncate>("bf16-truncate", n, v, out, b);
    row<ScalarBf16>("bf16 scalar", n, v, out, b);
  }
}
