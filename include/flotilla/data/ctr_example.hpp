// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_DATA_CTREXAMPLE_HPP_INCLUDED
#define FLOTILLA_DATA_CTREXAMPLE_HPP_INCLUDED
// One labelled example of a click log, as every click-through reader produces it and every sparse
// model reads it: a label, dense numeric features, and per categorical field a list of raw IDs
// (one for a one-ID field such as Criteo's, several for a multi-ID field, none where the value is
// missing). IDs are the values as the file spells them (Criteo's 32-bit hex tokens, libsvm's
// feature indices); models hash them into their tables.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace flotilla::data {

/// The Criteo display-advertising format: label, 13 integer features, 26 categorical IDs.
inline constexpr std::size_t criteo_dense_features = 13;
inline constexpr std::size_t criteo_categorical_fields = 26;

struct CtrExample {
  float label = 0;                      // 0 or 1
  std::vector<float> dense;             // numeric features; a missing one is 0
  std::vector<std::uint32_t> offsets;   // fields + 1 entries: field f's IDs are ids[offsets[f], offsets[f+1])
  std::vector<std::uint64_t> ids;       // raw IDs, field after field
  std::vector<float> values;            // weights of the IDs (libsvm's values); empty: every ID weighs 1
  std::uint64_t line = 0;               // 1-based line in its file (a stable id for shuffling and errors)

  std::size_t fields() const noexcept { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::span<const std::uint64_t> field_ids(std::size_t f) const noexcept {
    return std::span<const std::uint64_t>(ids).subspan(offsets[f], offsets[f + 1] - offsets[f]);
  }
  /// Weights of field f's IDs; empty when every ID weighs 1.
  std::span<const float> field_values(std::size_t f) const noexcept {
    if (values.empty()) return {};
    return std::span<const float>(values).subspan(offsets[f], offsets[f + 1] - offsets[f]);
  }
};

}  // namespace flotilla::data
#endif  // FLOTILLA_DATA_CTREXAMPLE_HPP_INCLUDED
