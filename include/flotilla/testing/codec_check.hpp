// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_TESTING_CODECCHECK_HPP_INCLUDED
#define FLOTILLA_TESTING_CODECCHECK_HPP_INCLUDED
// Checks of a codec's contract, for flotilla's tests and for users' own codecs:
//
//   auto r = flotilla::testing::check_codec<MyCodec, float>();
//   CHECK(r.passed());   // or print r.report()
//
// The Codec concept checks the signatures; this checks what a compiler cannot
// (docs/concepts/codec.md, "What the compiler cannot check"): encoding is total (infinities and
// NaN stay non-finite, finite values stay finite), deterministic, `decode_add` is `+= decode` value for
// value, `lossless` tells the truth, and a sub-range of any length encodes and decodes on its own.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "flotilla/concepts/codec.hpp"
#include "flotilla/core/random.hpp"

namespace flotilla::testing {

struct CodecCheckResult {
  std::string codec;
  std::vector<std::string> failures;
  std::size_t checks = 0;
  bool passed() const noexcept { return failures.empty() && checks > 0; }
  std::string report() const {
    std::ostringstream out;
    out << "codec " << codec << ": " << checks << " checks, " << failures.size() << " failed";
    for (const auto& f : failures) out << "\n  " << f;
    return out.str();
  }
};

struct CodecCheckOptions {
  std::uint64_t seed = 1;
  /// Values per test buffer; sub-ranges of every length up to 17 are checked besides.
  std::size_t values = 1000;
};

template <class C, class T>
  requires Codec<C, T>
CodecCheckResult check_codec(const CodecCheckOptions& o = {}) {
  CodecCheckResult r;
  r.codec = std::string(C::name);
  auto expect = [&](bool ok, const std::string& what) {
    ++r.checks;
    if (!ok) r.failures.push_back(what);
  };
  auto encode = [](std::span<const T> values) {
    std::vector<std::byte> bytes(C::encoded_size(values.size()));
    C::encode(values, std::span<std::byte>(bytes));
    return bytes;
  };
  auto decode = [](const std::vector<std::byte>& bytes, std::size_t n) {
    std::vector<T> out(n);
    C::decode(std::span<const std::byte>(bytes), std::span<T>(out));
    return out;
  };
  auto same_bits = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; };

  // Values of every kind a gradient holds: ordinary, tiny, huge, zero of both signs.
  Generator g(o.seed);
  std::vector<T> values(o.values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double scale = std::pow(10.0, static_cast<double>(static_cast<int>(g.below(13)) - 8));  // 1e-8 .. 1e4
    values[i] = static_cast<T>(g.normal<double>() * scale);
  }
  values[0] = T(0);
  values[1] = -T(0);
  values[2] = std::numeric_limits<T>::max();
  values[3] = std::numeric_limits<T>::lowest();
  values[4] = std::numeric_limits<T>::min();  // the smallest normal
  values[5] = std::numeric_limits<T>::denorm_min();

  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, values.size()})
    expect(C::encoded_size(n) == C::encoded_size(n), "encoded_size(" + std::to_string(n) + ") is not a function of n alone");

  // Deterministic: the same values, the same bytes.
  const auto bytes = encode(values);
  expect(bytes == encode(values), "encoding the same values twice gave different bytes");

  // Total, and finite values stay finite (saturating rather than overflowing).
  const auto back = decode(bytes, values.size());
  std::size_t infinite = 0, wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    infinite += std::isfinite(back[i]) ? 0 : 1;
    if (C::lossless && !same_bits(back[i], values[i])) ++wrong;
  }
  expect(infinite == 0, std::to_string(infinite) + " finite values decoded as infinite or NaN (encoding must saturate)");
  if (C::lossless) expect(wrong == 0, std::to_string(wrong) + " values changed, but the codec says it is lossless");

  // Infinities and NaN stay non-finite, so a diverging run is still seen to diverge (a narrow
  // format may decode an infinity as NaN, but not as the other infinity).
  const std::vector<T> special = {std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                                  std::numeric_limits<T>::quiet_NaN()};
  const auto special_back = decode(encode(special), special.size());
  expect(!std::isfinite(special_back[0]) && !(special_back[0] < 0), "+inf did not decode as +inf or NaN");
  expect(!std::isfinite(special_back[1]) && !(special_back[1] > 0), "-inf did not decode as -inf or NaN");
  expect(std::isnan(special_back[2]), "NaN did not decode as NaN");

  // decode_add(b, v) is v += decode(b), value for value.
  std::vector<T> sum(values.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = static_cast<T>(g.normal<double>());
  std::vector<T> want = sum;
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = want[i] + back[i];
  C::decode_add(std::span<const std::byte>(bytes), std::span<T>(sum));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < sum.size(); ++i) differ += same_bits(sum[i], want[i]) ? 0 : 1;
  expect(differ == 0, "decode_add differs from adding decode's values at " + std::to_string(differ) + " values");

  // Each message stands alone: sub-ranges of any length, at any offset, encode to encoded_size
  // bytes and decode to finite values (exactly, for a lossless codec).
  for (std::size_t n = 1; n <= 17 && n + 7 <= values.size(); ++n) {
    const std::span<const T> part = std::span<const T>(values).subspan(7, n);
    const auto part_bytes = encode(part);
    const auto part_back = decode(part_bytes, n);
    bool ok = part_bytes.size() == C::encoded_size(n);
    for (std::size_t i = 0; i < n; ++i)
      ok = ok && std::isfinite(part_back[i]) && (!C::lossless || same_bits(part_back[i], part[i]));
    expect(ok, "a sub-range of " + std::to_string(n) + " values did not encode and decode on its own");
  }
  return r;
}

}  // namespace flotilla::testing
#endif  // FLOTILLA_TESTING_CODECCHECK_HPP_INCLUDED
