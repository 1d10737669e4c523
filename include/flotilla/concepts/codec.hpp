// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CONCEPTS_CODEC_HPP_INCLUDED
#define FLOTILLA_CONCEPTS_CODEC_HPP_INCLUDED
// The Codec extension point: what goes on the wire for a buffer of values. See
// docs/concepts/codec.md.
//
// A codec turns n values of type T into encoded_size(n) bytes and back. Lossy codecs (16-bit
// floats) halve the bytes of every push, pull and allreduce they wrap; a policy adds error
// feedback on top (the rounding error of one step is added to the next step's values before
// encoding), so no codec needs state of its own.
#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>

namespace flotilla {

/// A codec C for values of type T:
///  - `C::name`;
///  - `C::encoded_size(n)`: bytes for n values (a function of n alone, so receivers know what to
///    expect before anything arrives);
///  - `C::encode(values, bytes)`: bytes.size() == encoded_size(values.size());
///  - `C::decode(bytes, values)`: values = decoded;
///  - `C::decode_add(bytes, values)`: values += decoded (the reduction step of an allreduce, fused);
///  - `C::lossless`: whether decode(encode(x)) == x for every finite x.
/// Encoding is total: every input encodes to something that decodes without error. Finite values
/// beyond a narrow format's range saturate to its largest finite value rather than becoming
/// infinite (a large gradient stays large, it does not poison the sum); infinities and NaN stay
/// what they are, so a diverging run is still seen to diverge.
template <class C, class T>
concept Codec = requires(std::span<const T> values, std::span<std::byte> bytes, std::span<const std::byte> cbytes,
                         std::span<T> out, std::size_t n) {
  { C::name } -> std::convertible_to<std::string_view>;
  { C::lossless } -> std::convertible_to<bool>;
  { C::encoded_size(n) } -> std::same_as<std::size_t>;
  C::encode(values, bytes);
  C::decode(cbytes, out);
  C::decode_add(cbytes, out);
};

}  // namespace flotilla
#endif  // FLOTILLA_CONCEPTS_CODEC_HPP_INCLUDED
