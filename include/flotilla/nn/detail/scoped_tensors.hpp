// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_DETAIL_SCOPEDTENSORS_HPP_INCLUDED
#define FLOTILLA_NN_DETAIL_SCOPEDTENSORS_HPP_INCLUDED
// The tensor table of a layer made of layers (blocks, branches, residual connections): the parts'
// tensors one after another, each name qualified by the part it belongs to, as PyTorch names a
// module's parameters ("0.weight", "body.1.bias", "shortcut.weight").
//
// The qualified names are built by the compiler into a character table that the block type holds
// as a static constant, so its TensorSpec names are string_views with static storage like every
// other layer's.
#include <array>
#include <cstddef>
#include <string_view>

#include "flotilla/core/layer_args.hpp"

namespace flotilla::detail {

/// A part's tensor before its name is qualified: the scope is the part's position when `label`
/// is empty, the label otherwise.
struct ScopedTensor {
  std::string_view label;
  std::size_t position = 0;
  TensorSpec tensor;
};

constexpr std::size_t decimal_digits(std::size_t n) noexcept {
  std::size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

template <std::size_t K>
constexpr std::size_t qualified_name_chars(const std::array<ScopedTensor, K>& parts) noexcept {
  std::size_t n = 0;
  for (const auto& p : parts)
    n += (p.label.empty() ? decimal_digits(p.position) : p.label.size()) + 1 + p.tensor.name.size();
  return n;
}

/// The qualified names, "<scope>.<name>", packed in one character array.
template <std::size_t Chars, std::size_t K>
struct QualifiedNames {
  std::array<char, Chars + 1> chars{};  // + 1: never a zero-length array
  std::array<std::size_t, K + 1> starts{};

  constexpr std::string_view operator[](std::size_t i) const noexcept {
    return std::string_view(chars.data() + starts[i], starts[i + 1] - starts[i]);
  }
};

template <std::size_t Chars, std::size_t K>
constexpr QualifiedNames<Chars, K> qualify(const std::array<ScopedTensor, K>& parts) noexcept {
  QualifiedNames<Chars, K> out;
  std::size_t at = 0;
  for (std::size_t i = 0; i < K; ++i) {
    out.starts[i] = at;
    const auto& p = parts[i];
    if (p.label.empty()) {
      const std::size_t digits = decimal_digits(p.position);
      std::size_t v = p.position;
      for (std::size_t d = digits; d-- > 0; v /= 10) out.chars[at + d] = static_cast<char>('0' + v % 10);
      at += digits;
    } else {
      for (char c : p.label) out.chars[at++] = c;
    }
    out.chars[at++] = '.';
    for (char c : p.tensor.name) out.chars[at++] = c;
  }
  out.starts[K] = at;
  return out;
}

/// The tensor table, with names pointing into `names` (a static constant of the block type).
template <std::size_t K, class Names>
constexpr std::array<TensorSpec, K> qualified_tensors(const std::array<ScopedTensor, K>& parts, const Names& names) noexcept {
  std::array<TensorSpec, K> out{};
  for (std::size_t i = 0; i < K; ++i) out[i] = TensorSpec{names[i], parts[i].tensor.size, parts[i].tensor.role};
  return out;
}

/// How many tensors layer L declares (none without parameters).
template <class L>
constexpr std::size_t tensor_count_of() noexcept {
  if constexpr (L::parameter_count > 0) {
    return L::tensors.size();
  } else {
    return 0;
  }
}

/// Appends L's tensors to `out` from `k` on, scoped by `label` or, when it is empty, `position`.
template <class L, std::size_t K>
constexpr void append_scoped(std::array<ScopedTensor, K>& out, std::size_t& k, std::string_view label,
                             std::size_t position) noexcept {
  if constexpr (L::parameter_count > 0)
    for (const auto& t : L::tensors) out[k++] = ScopedTensor{label, position, t};
}

}  // namespace flotilla::detail
#endif  // FLOTILLA_NN_DETAIL_SCOPEDTENSORS_HPP_INCLUDED
