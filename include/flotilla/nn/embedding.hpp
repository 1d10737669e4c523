// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_NN_EMBEDDING_HPP_INCLUDED
#define FLOTILLA_NN_EMBEDDING_HPP_INCLUDED
// Embeddings of categorical fields: each raw ID of a field selects a row of `dim` values in a table,
// and the rows of a field's IDs are pooled (summed, or averaged) into `dim` features of the sample.
//
// A table has millions of rows and a batch touches a few thousand, so nothing here sees the table:
// EmbeddingLookup::build() turns a batch of examples into the sorted list of distinct row keys it
// touches and, per (sample, field), the positions of its IDs in that list. Whoever owns the table
// (a local map, parameter servers) gathers those rows into a dense (keys x dim) block; forward pools
// from it, backward writes one coalesced gradient per distinct key into a block of the same shape,
// which is what a per-row optimizer (concepts/row_optimizer.hpp) is applied to.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/core/detail/key_map.hpp"
#include "flotilla/core/detail/prefetch.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/ctr_example.hpp"

namespace flotilla {

/// How the rows of a field's IDs become the field's features.
enum class Pooling {
  sum,   ///< the weighted sum of the rows
  mean,  ///< the weighted sum divided by the number of IDs (an empty field gives zeros)
};

/// A categorical field's embedding: Dim values per row, pooled over the field's IDs with P. With
/// Buckets > 0 each field's IDs are hashed into that many rows (the hashing trick: memory bounded
/// in advance, at the price of collisions); with 0 every distinct ID has its own row.
template <std::size_t Dim, Pooling P = Pooling::sum, std::uint64_t Buckets = 0>
struct Embedding {
  static_assert(Dim > 0, "Embedding<Dim>: the number of values per row, Dim, must be > 0");
  static constexpr std::size_t dim = Dim;
  static constexpr Pooling pooling = P;
  static constexpr std::uint64_t buckets = Buckets;
};

/// With buckets == 0, a key keeps the field in its top bits: this many fields have keys of their own.
inline constexpr std::size_t embedding_max_unbucketed_fields = 256;

namespace detail {

inline constexpr std::uint64_t low56_mask = (std::uint64_t{1} << 56) - 1;

// A bijection of [0, 2^56): xor-shifts and odd multipliers modulo 2^56 are each invertible, so
// distinct IDs stay distinct while their bits are spread over the whole key (servers shard by key).
constexpr std::uint64_t mix56(std::uint64_t x) noexcept {
  x &= low56_mask;
  x ^= x >> 29;
  x = (x * 0xbf58476d1ce4e5b9ULL) & low56_mask;
  x ^= x >> 27;
  x = (x * 0x94d049bb133111ebULL) & low56_mask;
  x ^= x >> 31;
  return x;
}

// SplitMix64's finaliser: a bijection of 64-bit values with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace detail

/// The row key of field `field`'s raw ID `raw_id`.
///
/// buckets > 0 (the hashing trick): the ID and the field are mixed into 64 bits (the field is part
/// of the hash, so two fields' collisions differ), reduced modulo `buckets`, and offset by
/// field * buckets: field f's keys are exactly [f * buckets, (f + 1) * buckets), so fields never
/// share a row and a table has at most fields * buckets rows (which must fit in 64 bits).
///
/// buckets == 0 (a row per distinct ID): the key is field << 56 | mix56(ID), mix56 a bijection of
/// 56-bit values. Fields below embedding_max_unbucketed_fields never share a row, and distinct IDs
/// below 2^56 (every 32-bit token, every feature index) always have distinct rows; the top byte of
/// larger IDs is folded into the low bits, so those may collide (with probability ~2^-56 a pair).
inline std::uint64_t embedding_key(std::size_t field, std::uint64_t raw_id, std::uint64_t buckets) noexcept {
  const auto f = static_cast<std::uint64_t>(field);
  if (buckets > 0) {
    const std::uint64_t h = detail::mix64(raw_id ^ detail::mix64(f + 0x9e3779b97f4a7c15ULL));
    return f * buckets + h % buckets;
  }
  const std::uint64_t folded = raw_id ^ ((raw_id >> 56) * 0x9e3779b97f4a7cULL);
  return (f << 56) | detail::mix56(folded);
}

/// One table's lookups for a batch: the distinct keys it touches, ascending, and per (sample,
/// field) the positions of its IDs in that list with their weights. Built once per step; its
/// vectors keep their capacity, so a steady state allocates nothing.
struct EmbeddingLookup {
  std::size_t batch = 0, fields = 0;
  std::vector<std::uint64_t> keys;     // distinct, ascending
  std::vector<std::uint32_t> offsets;  // batch*fields + 1; (i, f)'s entries: [offsets[i*fields+f], offsets[i*fields+f+1])
  std::vector<std::uint32_t> slots;    // index into keys
  std::vector<float> weights;          // weight of each entry (1 unless the example has values)

  /// Fills from examples[0..n): fields [first_field, first_field + fields) of each example, keys
  /// made with embedding_key(field, id, buckets). Throws ShapeError naming the example (its line)
  /// when one has fewer fields or inconsistent IDs and values, ConfigError when the fields cannot
  /// have keys of their own (see embedding_key).
  void build(std::span<const data::CtrExample> examples, std::size_t first_field, std::size_t field_count,
             std::uint64_t buckets) {
    build_from(examples.size(), [&](std::size_t i) -> const data::CtrExample& { return examples[i]; }, first_field,
               field_count, buckets);
  }
  /// The same from examples held elsewhere (a batch drawn from a larger set, without copying).
  void build(std::span<const data::CtrExample* const> examples, std::size_t first_field, std::size_t field_count,
             std::uint64_t buckets) {
    build_from(examples.size(), [&](std::size_t i) -> const data::CtrExample& { return *examples[i]; }, first_field,
               field_count, buckets);
  }
  /// The same from `n` examples, example(i) the i-th.
  template <class Example>
  void build_from(std::size_t n, Example&& example, std::size_t first_field, std::size_t field_count,
                  std::uint64_t buckets);

  /// Entries of sample i's field f: [begin, end) into slots and weights.
  std::pair<std::uint32_t, std::uint32_t> entries(std::size_t i, std::size_t f) const noexcept {
    return {offsets[i * fields + f], offsets[i * fields + f + 1]};
  }

 private:
  void check_fields(std::size_t first_field, std::size_t field_count, std::uint64_t buckets) const;
  void index_entries();

  // The batch's distinct keys (key -> index in order of first appearance), those keys with their
  // index as they are sorted (and the radix sort's second buffer and counts), and each index's
  // place in the sorted order: all reused step to step.
  std::vector<std::uint64_t> entry_keys_;
  detail::KeyMap distinct_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> sorted_, spare_;
  std::vector<std::uint32_t> counts_, rank_;
};

namespace detail {

// The arrays an embedding lookup reads of one example (see core/detail/prefetch.hpp for why this is
// always inlined).
[[gnu::always_inline]] inline void prefetch_arrays(const data::CtrExample& e) noexcept {
  flotilla::detail::prefetch(e.offsets.data());
  const auto* ids = reinterpret_cast<const char*>(e.ids.data());
  const std::size_t id_bytes = e.ids.size() * sizeof(std::uint64_t);
  for (std::size_t b = 0; b < id_bytes; b += 64) flotilla::detail::prefetch(ids + b);
  flotilla::detail::prefetch(e.dense.data());
}

// Sorts (key, index) pairs by key (a batch's distinct keys, so no two are equal): an LSD radix
// sort, six passes of 11 bits, skipping those whose digit is the same for every key (the top ones
// when keys are bucketed); std::sort for small inputs, where clearing the counts would cost more
// than it saves.
using KeyEntry = std::pair<std::uint64_t, std::uint32_t>;
inline void sort_by_key(std::vector<KeyEntry>& a, std::vector<KeyEntry>& spare, std::vector<std::uint32_t>& counts) {
  const std::size_t n = a.size();
  if (n < 4096) {
    std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    return;
  }
  constexpr unsigned bits = 11, passes = 6;
  constexpr std::size_t radix = std::size_t{1} << bits;
  counts.assign(radix * passes, 0);
  for (const auto& x : a)
    for (unsigned p = 0; p < passes; ++p) ++counts[p * radix + ((x.first >> (p * bits)) & (radix - 1))];
  spare.resize(n);
  for (unsigned p = 0; p < passes; ++p) {
    std::uint32_t* c = counts.data() + p * radix;
    if (c[(a[0].first >> (p * bits)) & (radix - 1)] == n) continue;
    std::uint32_t sum = 0;
    for (std::size_t d = 0; d < radix; ++d) sum += std::exchange(c[d], sum);
    for (const auto& x : a) spare[c[(x.first >> (p * bits)) & (radix - 1)]++] = x;
    a.swap(spare);
  }
}

}  // namespace detail

template <class Example>
void EmbeddingLookup::build_from(std::size_t n, Example&& example, std::size_t first_field, std::size_t field_count,
                                 std::uint64_t buckets) {
  const std::size_t last_field = first_field + field_count;
  check_fields(first_field, field_count, buckets);
  batch = n;
  fields = field_count;
  offsets.resize(batch * fields + 1);
  slots.clear();
  weights.clear();

  // A batch drawn in shuffled order visits examples (and their arrays) all over the heap: their
  // memory is asked for a few examples ahead, the struct first and then, once it is in, its arrays.
  constexpr std::size_t ahead = flotilla::detail::prefetch_distance;
  for (std::size_t i = 0; i < std::min(batch, 2 * ahead); ++i) flotilla::detail::prefetch(&example(i));
  for (std::size_t i = 0; i < std::min(batch, ahead); ++i) detail::prefetch_arrays(example(i));
  std::size_t total = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    if (i + 2 * ahead < batch) flotilla::detail::prefetch(&example(i + 2 * ahead));
    if (i + ahead < batch) detail::prefetch_arrays(example(i + ahead));
    const data::CtrExample& e = example(i);
    if (e.fields() < last_field)
      throw ShapeError("embedding lookup: example " + std::to_string(i) + " of the batch (line " +
                       std::to_string(e.line) + ") has " + std::to_string(e.fields()) + " fields, the table reads [" +
                       std::to_string(first_field) + ", " + std::to_string(last_field) + ")");
    if (field_count == 0) continue;
    const std::uint64_t end = e.offsets.back();
    if (end != e.ids.size() || (!e.values.empty() && e.values.size() != e.ids.size()))
      throw ShapeError("embedding lookup: example " + std::to_string(i) + " of the batch (line " +
                       std::to_string(e.line) + ") has " + std::to_string(e.ids.size()) + " IDs, " +
                       std::to_string(e.values.size()) + " values and offsets ending at " + std::to_string(end));
    // Offsets that went backwards would make a field's ID count wrap around to billions.
    for (std::size_t f = first_field; f < last_field; ++f)
      if (e.offsets[f] > e.offsets[f + 1])
        throw ShapeError("embedding lookup: example " + std::to_string(i) + " of the batch (line " +
                         std::to_string(e.line) + "): field " + std::to_string(f) + "'s IDs start at " +
                         std::to_string(e.offsets[f]) + " but end at " + std::to_string(e.offsets[f + 1]));
    total += e.offsets[last_field] - e.offsets[first_field];
  }
  if (total > std::numeric_limits<std::uint32_t>::max())
    throw ShapeError("embedding lookup: " + std::to_string(total) + " IDs in one batch, more than 2^32 - 1");
  slots.resize(total);
  weights.resize(total);

  // Each entry's key (in entry_keys_), then the distinct keys through a flat hash map
  // (a batch repeats popular IDs: a few distinct keys per several entries), its cells asked for a
  // few entries ahead; an entry's slot is first its key's index in order of first appearance, then,
  // once only the distinct keys are sorted, its index in that order.
  entry_keys_.resize(total);
  std::uint32_t entry = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const data::CtrExample& e = example(i);
    const std::uint32_t* field_offsets = e.offsets.data();
    const std::uint64_t* ids = e.ids.data();
    const float* values = e.values.empty() ? nullptr : e.values.data();
    for (std::size_t f = 0; f < fields; ++f) {
      offsets[i * fields + f] = entry;
      const std::size_t field = first_field + f;
      for (std::uint32_t k = field_offsets[field], end = field_offsets[field + 1]; k < end; ++k, ++entry) {
        entry_keys_[entry] = embedding_key(field, ids[k], buckets);
        weights[entry] = values ? values[k] : 1.0f;
      }
    }
  }
  offsets[batch * fields] = entry;
  index_entries();
}

inline void EmbeddingLookup::check_fields(std::size_t first_field, std::size_t field_count, std::uint64_t buckets) const {
  const std::size_t last_field = first_field + field_count;
  if (buckets == 0 && last_field > embedding_max_unbucketed_fields)
    throw ConfigError("embedding lookup: fields [" + std::to_string(first_field) + ", " + std::to_string(last_field) +
                      ") without buckets, but only fields below " +
                      std::to_string(embedding_max_unbucketed_fields) +
                      " have keys of their own; give the table buckets");
  if (buckets > 0 && last_field > 0 && buckets > std::numeric_limits<std::uint64_t>::max() / last_field)
    throw ConfigError("embedding lookup: " + std::to_string(last_field) + " fields of " + std::to_string(buckets) +
                      " buckets each do not fit in 64-bit keys");
}

inline void EmbeddingLookup::index_entries() {
  const std::size_t total = entry_keys_.size();
  distinct_.clear();
  sorted_.clear();
  constexpr std::size_t map_ahead = flotilla::detail::prefetch_distance;
  for (std::size_t k = 0; k < total; ++k) {
    if (k + map_ahead < total) distinct_.prefetch(entry_keys_[k + map_ahead]);
    const auto [slot, fresh] = distinct_.insert(entry_keys_[k], static_cast<std::uint32_t>(sorted_.size()));
    if (fresh) sorted_.emplace_back(entry_keys_[k], slot);
    slots[k] = slot;
  }

  detail::sort_by_key(sorted_, spare_, counts_);
  keys.resize(sorted_.size());
  rank_.resize(sorted_.size());
  for (std::size_t r = 0; r < sorted_.size(); ++r) {
    keys[r] = sorted_[r].first;
    rank_[sorted_[r].second] = static_cast<std::uint32_t>(r);
  }
  for (auto& slot : slots) slot = rank_[slot];
}

namespace detail {
template <class T>
void check_embedding_shapes(const char* what, const EmbeddingLookup& l, std::size_t rows_size, std::size_t dim,
                            Eigen::Index out_rows, Eigen::Index out_cols, std::size_t first_row) {
  if (rows_size != l.keys.size() * dim)
    throw ShapeError(std::string(what) + ": " + std::to_string(l.keys.size()) + " keys of " + std::to_string(dim) +
                     " values need " + std::to_string(l.keys.size() * dim) + " row values, got " +
                     std::to_string(rows_size));
  if (static_cast<std::size_t>(out_cols) != l.batch ||
      static_cast<std::size_t>(out_rows) < first_row + l.fields * dim)
    throw ShapeError(std::string(what) + ": " + std::to_string(l.batch) + " samples of " + std::to_string(l.fields) +
                     " fields x " + std::to_string(dim) + " values from row " + std::to_string(first_row) +
                     " need a matrix of at least " + std::to_string(first_row + l.fields * dim) + " x " +
                     std::to_string(l.batch) + ", got " + std::to_string(out_rows) + " x " + std::to_string(out_cols));
  if (l.offsets.size() != l.batch * l.fields + 1)
    throw ShapeError(std::string(what) + ": the lookup has " + std::to_string(l.offsets.size()) + " offsets for " +
                     std::to_string(l.batch) + " x " + std::to_string(l.fields) + " fields; build() it first");
}
}  // namespace detail

namespace detail {

// Calls f with the row width as a compile-time constant when it is one of the usual ones (so that
// the per-entry loops of pooling unroll into a few vector operations), else with 0: read it at run
// time.
template <class F>
void with_row_width(std::size_t dim, F&& f) {
  switch (dim) {
    case 4: return f(std::integral_constant<std::size_t, 4>{});
    case 8: return f(std::integral_constant<std::size_t, 8>{});
    case 16: return f(std::integral_constant<std::size_t, 16>{});
    case 32: return f(std::integral_constant<std::size_t, 32>{});
    case 64: return f(std::integral_constant<std::size_t, 64>{});
    default: return f(std::integral_constant<std::size_t, 0>{});
  }
}

template <std::size_t Width, class T>
void pool_forward(const EmbeddingLookup& l, const T* rows, std::size_t runtime_dim, Pooling pooling, T* out,
                  std::size_t ld, std::size_t first_row) {
  const std::size_t dim = Width != 0 ? Width : runtime_dim;
  for (std::size_t i = 0; i < l.batch; ++i) {
    T* column = out + i * ld + first_row;
    for (std::size_t f = 0; f < l.fields; ++f) {
      T* o = column + f * dim;
      const auto [begin, end] = l.entries(i, f);
      const T scale = pooling == Pooling::mean && end - begin > 1 ? T(1) / static_cast<T>(end - begin) : T(1);
      if constexpr (Width != 0) {
        // A known width: the sum stays in registers, stored once.
        std::array<T, Width> sum{};
        for (std::uint32_t e = begin; e < end; ++e) {
          const T w = static_cast<T>(l.weights[e]);
          const T* r = rows + static_cast<std::size_t>(l.slots[e]) * Width;
          for (std::size_t d = 0; d < Width; ++d) sum[d] += w * r[d];
        }
        for (std::size_t d = 0; d < Width; ++d) o[d] = sum[d] * scale;
      } else {
        std::fill(o, o + dim, T(0));
        for (std::uint32_t e = begin; e < end; ++e) {
          const T w = static_cast<T>(l.weights[e]);
          const T* r = rows + static_cast<std::size_t>(l.slots[e]) * dim;
          for (std::size_t d = 0; d < dim; ++d) o[d] += w * r[d];
        }
        if (scale != T(1))
          for (std::size_t d = 0; d < dim; ++d) o[d] *= scale;
      }
    }
  }
}

template <std::size_t Width, class T>
void pool_backward(const EmbeddingLookup& l, const T* dout, std::size_t ld, std::size_t first_row, std::size_t runtime_dim,
                   Pooling pooling, T* grad_rows) {
  const std::size_t dim = Width != 0 ? Width : runtime_dim;
  for (std::size_t i = 0; i < l.batch; ++i) {
    const T* column = dout + i * ld + first_row;
    for (std::size_t f = 0; f < l.fields; ++f) {
      const T* g = column + f * dim;
      const auto [begin, end] = l.entries(i, f);
      const T scale = pooling == Pooling::mean && end - begin > 1 ? T(1) / static_cast<T>(end - begin) : T(1);
      for (std::uint32_t e = begin; e < end; ++e) {
        const T w = static_cast<T>(l.weights[e]) * scale;
        T* r = grad_rows + static_cast<std::size_t>(l.slots[e]) * dim;
        for (std::size_t d = 0; d < dim; ++d) r[d] += w * g[d];
      }
    }
  }
}

}  // namespace detail

/// Pooled forward: for each sample i and field f, rows [first_row + f*dim, first_row + (f+1)*dim)
/// of column i of `out` become the sum over the field's IDs of weight * rows[slot] (divided by
/// the number of IDs for Pooling::mean; an empty field gives zeros). `rows` is keys.size() x dim,
/// row-major (row r at r*dim). Other rows of `out` are left as they are.
template <class T>
void embedding_forward(const EmbeddingLookup& l, std::span<const T> rows, std::size_t dim, Pooling pooling,
                       MatrixView<T> out, std::size_t first_row) {
  detail::check_embedding_shapes<T>("embedding_forward", l, rows.size(), dim, out.rows(), out.cols(), first_row);
  detail::with_row_width(dim, [&](auto width) {
    detail::pool_forward<decltype(width)::value>(l, rows.data(), dim, pooling, out.data(),
                                                 static_cast<std::size_t>(out.rows()), first_row);
  });
}

/// Backward: grad_rows (keys.size() x dim, row-major) += for every entry, weight * the rows of
/// field f in column i of dout (divided by the field's number of IDs for Pooling::mean). Repeated
/// keys, in a sample or across samples, add into their one row: one coalesced gradient per key.
template <class T>
void embedding_backward(const EmbeddingLookup& l, ConstMatrixView<T> dout, std::size_t first_row, std::size_t dim,
                        Pooling pooling, std::span<T> grad_rows) {
  detail::check_embedding_shapes<T>("embedding_backward", l, grad_rows.size(), dim, dout.rows(), dout.cols(),
                                    first_row);
  detail::with_row_width(dim, [&](auto width) {
    detail::pool_backward<decltype(width)::value>(l, dout.data(), static_cast<std::size_t>(dout.rows()), first_row, dim,
                                                  pooling, grad_rows.data());
  });
}

}  // namespace flotilla
#endif  // FLOTILLA_NN_EMBEDDING_HPP_INCLUDED
