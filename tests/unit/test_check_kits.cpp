// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// testing::check_codec and testing::check_policy: the built-in codecs and policies pass, and a
// codec or policy with a planted defect fails with a message that names it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "flotilla/flotilla.hpp"
#include "flotilla/testing/codec_check.hpp"
#include "flotilla/testing/policy_check.hpp"

namespace unit_check_kits {

using namespace flotilla;

namespace {

bool mentions(const std::vector<std::string>& failures, const std::string& part) {
  return std::any_of(failures.begin(), failures.end(), [&](const std::string& f) { return f.find(part) != std::string::npos; });
}

/// Claims to be lossless, but keeps only a float's upper 16 bits.
struct LyingCodec {
  static constexpr std::string_view name = "lying";
  static constexpr bool lossless = true;
  static std::size_t encoded_size(std::size_t n) { return 2 * n; }
  static void encode(std::span<const float> v, std::span<std::byte> b) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint32_t u;
      std::memcpy(&u, &v[i], 4);
      const auto h = static_cast<std::uint16_t>(u >> 16);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  static void decode(std::span<const std::byte> b, std::span<float> v) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      const std::uint32_t u = std::uint32_t{h} << 16;
      std::memcpy(&v[i], &u, 4);
    }
  }
  static void decode_add(std::span<const std::byte> b, std::span<float> v) {
    std::vector<float> d(v.size());
    decode(b, d);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += d[i];
  }
};

/// Raw floats, but decode_add subtracts, and large values become infinite.
struct CarelessCodec {
  static constexpr std::string_view name = "careless";
  static constexpr bool lossless = false;
  static std::size_t encoded_size(std::size_t n) { return 4 * n; }
  static void encode(std::span<const float> v, std::span<std::byte> b) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float x = std::abs(v[i]) > 1e30f ? v[i] * 1e10f : v[i];
      std::memcpy(b.data() + 4 * i, &x, 4);
    }
  }
  static void decode(std::span<const std::byte> b, std::span<float> v) { std::memcpy(v.data(), b.data(), 4 * v.size()); }
  static void decode_add(std::span<const std::byte> b, std::span<float> v) {
    std::vector<float> d(v.size());
    decode(b, d);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= d[i];
  }
};

/// Reduces in backward, but its exchange does nothing: each worker updates with its own gradient.
template <class T>
struct NoExchange {
  static constexpr std::string_view name = "none";
  template <class Peers>
  void exchange(GradientBucket<T, Peers>&) {}
};
struct ForgetfulPolicy {
  static constexpr std::string_view name = "forgetful";
  using topology = topology::Ring;
  static constexpr bool reduce_gradients_in_backward = true;
  template <class T>
  using exchange = NoExchange<T>;
  template <class Context>
  void step(Context& ctx) {
    ctx.apply_optimizer();
  }
};

/// Local SGD (docs/concepts/update_policy.md): averages the parameters every H steps.
template <std::size_t H>
struct LocalSGD {
  static constexpr std::string_view name = "local-sgd";
  using topology = topology::Ring;
  static constexpr bool reduce_gradients_in_backward = false;
  template <class Context>
  void step(Context& ctx) {
    ctx.apply_optimizer();
    if (ctx.step() % H == 0) ctx.allreduce(ctx.parameters(), /*average=*/true);
  }
};

}  // namespace

TEST_CASE("check_codec: the built-in codecs keep their contract") {
  for (const auto& r : {testing::check_codec<codec::Fp32, float>(), testing::check_codec<codec::Fp16, float>(),
                        testing::check_codec<codec::Bf16, float>(), testing::check_codec<codec::Bf16Truncate, float>()}) {
    INFO(r.report());
    CHECK(r.passed());
  }
  const auto r = testing::check_codec<codec::Fp64, double>();
  INFO(r.report());
  CHECK(r.passed());
}

TEST_CASE("check_codec: a codec that lies about being lossless, subtracts in decode_add or overflows is caught") {
  const auto lying = testing::check_codec<LyingCodec, float>();
  CHECK_FALSE(lying.passed());
  CHECK(mentions(lying.failures, "says it is lossless"));
  const auto careless = testing::check_codec<CarelessCodec, float>();
  CHECK_FALSE(careless.passed());
  CHECK(mentions(careless.failures, "decode_add differs"));
  CHECK(mentions(careless.failures, "must saturate"));
}

TEST_CASE("check_policy: the built-in policies and local SGD keep their contract") {
  using SyncPs = policy::Synchronous<topology::ParameterServer>;
  const std::vector<testing::PolicyCheckResult> results = {
      testing::check_policy<policy::Synchronous<>>(),
      testing::check_policy<policy::Compressed<codec::Fp16, policy::Synchronous<>, true>>(),
      testing::check_policy<policy::Accumulate<2>>(),
      testing::check_policy<LocalSGD<4>>(),  // 30 and 20 steps an epoch: both end on an averaging step
      testing::check_policy<SyncPs>(),
      testing::check_policy<policy::BoundedStaleness<0>>(),
      testing::check_policy<policy::BoundedStaleness<2>>(),
      testing::check_policy<policy::Asynchronous<>>()};
  for (const auto& r : results) {
    INFO(r.report());
    CHECK(r.passed());
  }
}

TEST_CASE("check_policy: a policy whose workers drift apart is caught") {
  const auto r = testing::check_policy<ForgetfulPolicy>();
  CHECK_FALSE(r.passed());
  CHECK(mentions(r.failures, "different parameters"));
}

}  // namespace unit_check_kits
