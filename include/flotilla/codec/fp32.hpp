// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CODEC_FP32_HPP_INCLUDED
#define FLOTILLA_CODEC_FP32_HPP_INCLUDED
// The lossless codec: values go on the wire as their own bytes (little-endian).
//
// codec::Fp32 is the default codec of every policy and collective. The Codec concept asks for
// encoded_size(n) as a function of n alone, so one codec type serves one value type: the lossless
// codec is a family, Raw<T>, with Fp32 = Raw<float> and Fp64 = Raw<double>. Lossless means "the
// values' own type", so for_value_t<Fp32, double> is Fp64: the collectives resolve their codec
// through it, and a double model with the default codec sends doubles, exactly.
#include <bit>
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "flotilla/codec/little_endian.hpp"
#include "flotilla/concepts/codec.hpp"

namespace flotilla::codec {

/// Lossless: n values of T are the n * sizeof(T) little-endian bytes of the values themselves.
template <class T>
struct Raw {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "codec::Raw<T>: T must be an arithmetic type (float, double, an integer)");

  static constexpr std::string_view name = std::is_same_v<T, float>    ? std::string_view("fp32")
                                           : std::is_same_v<T, double> ? std::string_view("fp64")
                                                                       : std::string_view("raw");
  static constexpr bool lossless = true;
  static constexpr std::size_t encoded_size(std::size_t n) noexcept { return n * sizeof(T); }

  static void encode(std::span<const T> values, std::span<std::byte> bytes) {
    detail::check_codec_sizes(name, "encode", values.size(), bytes.size(), encoded_size(values.size()));
    if constexpr (std::endian::native == std::endian::little) {
      if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      for (std::size_t i = 0; i < values.size(); ++i) detail::store_le(bytes.data() + i * sizeof(T), values[i]);
    }
  }

  static void decode(std::span<const std::byte> bytes, std::span<T> values) {
    detail::check_codec_sizes(name, "decode", values.size(), bytes.size(), encoded_size(values.size()));
    if constexpr (std::endian::native == std::endian::little) {
      if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    } else {
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = detail::load_le<T>(bytes.data() + i * sizeof(T));
    }
  }

  static void decode_add(std::span<const std::byte> bytes, std::span<T> values) {
    detail::check_codec_sizes(name, "decode_add", values.size(), bytes.size(), encoded_size(values.size()));
    T* out = values.data();
    const std::byte* in = bytes.data();
    // A memcpy per element is how bytes become a T without aliasing trouble; compilers turn the
    // loop into vector loads and adds.
    for (std::size_t i = 0, n = values.size(); i < n; ++i) out[i] += detail::load_le<T>(in + i * sizeof(T));
  }
};

/// float as float: the default codec.
using Fp32 = Raw<float>;
/// double as double.
using Fp64 = Raw<double>;

static_assert(Codec<Fp32, float> && Codec<Fp64, double>);

/// The lossless family follows the values: for_value<Raw<U>, T> is Raw<T> for any arithmetic T.
/// Every other codec is for the value type it was written for, and stays itself.
template <class C, class T>
struct for_value {
  using type = C;
};
template <class U, class T>
  requires std::is_arithmetic_v<T> && (!std::is_same_v<T, bool>)
struct for_value<Raw<U>, T> {
  using type = Raw<T>;
};
/// The codec that encodes values of type T when C is asked to: Raw<T> if C is a lossless Raw
/// codec (Fp32 given doubles is Fp64), C otherwise.
template <class C, class T>
using for_value_t = typename for_value<C, T>::type;

static_assert(std::is_same_v<for_value_t<Fp32, double>, Fp64> && std::is_same_v<for_value_t<Fp64, float>, Fp32>);

}  // namespace flotilla::codec
#endif  // FLOTILLA_CODEC_FP32_HPP_INCLUDED
