// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_CUDA_EMBEDDINGSTEPS_HPP_INCLUDED
#define FLOTILLA_CUDA_EMBEDDINGSTEPS_HPP_INCLUDED
// The steps of cuda::EmbeddingLookup (cuda/embedding.hpp): Thrust algorithms and per-element
// functors over raw pointers, generic in Thrust's execution policy. The GPU runs them with
// thrust::cuda::par_nosync on a stream; the host runs the very same steps with thrust::cpp::par,
// which is how tests/cuda/test_embedding_steps.cpp checks the index arithmetic, the order of every
// sum and the distinct keys against flotilla::EmbeddingLookup, embedding_forward and
// embedding_backward on a machine without a GPU. Needs Thrust's headers (the CUDA toolkit's), not
// nvcc.
//
// The batch's entries (one per ID, sample after sample, field after field: the CPU lookup's
// numbering) are indexed once per step:
//
//   1. stable sort of (key, entry) by key: equal keys keep their entries ascending;
//   2. the first sorted position of every key (copy_if where the key changes) and, gathered from
//      there, the distinct keys, ascending;
//   3. each sorted entry's slot (index of its key among the distinct keys), by a binary search of
//      its position among the key starts; scattered back, each entry's slot;
//   4. each key's entries cut into chunks of at most embedding_chunk consecutive entries, and the
//      first chunk of every key (a binary search of the key starts among the chunk starts);
//   5. each entry's (sample, field), by a binary search of the entry among the offsets.
//
// (No inclusive_scan for the slots: CUB's scan dispatch draws g++ 12's -Wmaybe-uninitialized in
// an optimized host build, an error under the project's flags; the searches cost as little.)
//
// Forward pools one output value per thread, adding the field's entries in entry order, as the
// CPU does. Backward coalesces without atomics and without a floating-point scan (Thrust's scans
// and reductions by key may associate floats differently from run to run): one thread per
// (chunk, value) adds its chunk's entry gradients in entry order, then one thread per (key,
// value) adds its chunks in order to the gradient row. Every sum has one fixed order, so results
// are the same from run to run; a key with at most embedding_chunk entries, added to a zeroed
// gradient, is summed in exactly the CPU's order. The chunks bound the serial work of a hot key
// (a popular ID in every sample) to embedding_chunk + its entries / embedding_chunk additions.
#if !__has_include(<thrust/sort.h>)
#error "flotilla/cuda/embedding_steps.hpp needs Thrust, from the CUDA toolkit: link your target to flotilla::cuda (see docs/gpu.md)"
#endif
#include <thrust/binary_search.h>
#include <thrust/copy.h>
#include <thrust/for_each.h>
#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/scatter.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/host_device.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/nn/embedding.hpp"

namespace flotilla::cuda::detail {

/// Most entries one thread adds in the first pass of backward's coalescing.
inline constexpr std::uint32_t embedding_chunk = 32;

/// A batch's entries and their index, as pointers into one memory space (the device's, or the
/// host's when the steps run on the CPU). Inputs: sorted_keys (each entry's key; sorted in place),
/// offsets, weights. Every output array has room for entries + 1 values.
struct EmbeddingIndex {
  std::size_t batch = 0, fields = 0, entries = 0;
  std::size_t distinct = 0, chunks = 0;        // set by index_embedding_entries
  std::uint64_t* sorted_keys = nullptr;        // [entries]
  const std::uint32_t* offsets = nullptr;      // [batch * fields + 1], (i, f) at i * fields + f
  const float* weights = nullptr;              // [entries]
  std::uint32_t* order = nullptr;              // sorted position -> entry
  std::uint32_t* rank = nullptr;               // sorted position -> slot
  std::uint32_t* slots = nullptr;              // entry -> slot
  std::uint32_t* owner = nullptr;              // entry -> i * fields + f
  std::uint32_t* key_start = nullptr;          // [distinct + 1] slot -> first sorted position; entries
  std::uint32_t* chunk_start = nullptr;        // [chunks + 1] chunk -> first sorted position; entries
  std::uint32_t* key_chunk = nullptr;          // [distinct + 1] slot -> first chunk; chunks
  std::uint64_t* keys = nullptr;               // [distinct] the distinct keys, ascending
};

// True at the first sorted position of every key, and at the end (n).
struct EmbeddingStartsKey {
  const std::uint64_t* keys;
  std::uint32_t n;
  FLOTILLA_HOST_DEVICE bool operator()(std::uint32_t j) const noexcept {
    return j == 0 || j == n || keys[j] != keys[j - 1];
  }
};

// True at the first sorted position of every chunk (every embedding_chunk-th entry of a key,
// counting from the key's first), and at the end (n).
struct EmbeddingStartsChunk {
  const std::uint32_t* rank;
  const std::uint32_t* key_start;
  std::uint32_t n;
  FLOTILLA_HOST_DEVICE bool operator()(std::uint32_t j) const noexcept {
    return j == n || (j - key_start[rank[j]]) % embedding_chunk == 0;
  }
};

// Output value t of the pooled forward: value d of field f of sample i, at t = (i * fields + f) *
// dim + d, the order of a column, so neighbouring threads write neighbouring values.
struct EmbeddingPool {
  const std::uint32_t* offsets;
  const std::uint32_t* slots;
  const float* weights;
  const float* rows;
  float* out;
  std::int64_t ld, first_row, dim, fields;
  bool mean;
  FLOTILLA_HOST_DEVICE void operator()(std::int64_t t) const noexcept {
    const std::int64_t d = t % dim, s = t / dim, i = s / fields, f = s % fields;
    const std::uint32_t begin = offsets[s], end = offsets[s + 1];
    float sum = 0;
    for (std::uint32_t e = begin; e < end; ++e) sum += weights[e] * rows[static_cast<std::int64_t>(slots[e]) * dim + d];
    if (mean && end - begin > 1) sum *= 1.0f / static_cast<float>(end - begin);
    out[i * ld + first_row + f * dim + d] = sum;
  }
};

// Value d of chunk c's gradient, at t = c * dim + d: its entries' weight * dout value (divided by
// the field's number of IDs for mean pooling), added in sorted (= entry) order.
struct EmbeddingChunkGradient {
  const std::uint32_t* chunk_start;
  const std::uint32_t* order;
  const std::uint32_t* owner;
  const std::uint32_t* offsets;
  const float* weights;
  const float* dout;
  float* partial;
  std::int64_t ld, first_row, dim, fields;
  bool mean;
  FLOTILLA_HOST_DEVICE void operator()(std::int64_t t) const noexcept {
    const std::int64_t d = t % dim, c = t / dim;
    float sum = 0;
    for (std::uint32_t j = chunk_start[c]; j < chunk_start[c + 1]; ++j) {
      const std::uint32_t e = order[j];
      const std::int64_t s = owner[e];
      const std::uint32_t count = offsets[s + 1] - offsets[s];
      const float scale = mean && count > 1 ? 1.0f / static_cast<float>(count) : 1.0f;
      const float w = weights[e] * scale;
      sum += w * dout[(s / fields) * ld + first_row + (s % fields) * dim + d];
    }
    partial[t] = sum;
  }
};

// Value d of key k's gradient row, at t = k * dim + d: the row plus its chunks, in order.
struct EmbeddingKeyGradient {
  const std::uint32_t* key_chunk;
  const float* partial;
  float* grad;
  std::int64_t dim;
  FLOTILLA_HOST_DEVICE void operator()(std::int64_t t) const noexcept {
    const std::int64_t d = t % dim, k = t / dim;
    float sum = grad[t];
    for (std::uint32_t c = key_chunk[k]; c < key_chunk[k + 1]; ++c)
      sum += partial[static_cast<std::int64_t>(c) * dim + d];
    grad[t] = sum;
  }
};

/// Steps 1 to 5 of the header's comment: fills x's outputs, distinct and chunks. Algorithms that
/// return a count (copy_if) wait for the work queued before them.
template <class Exec>
void index_embedding_entries(Exec&& exec, EmbeddingIndex& x) {
  x.distinct = x.chunks = 0;
  if (x.entries == 0) return;
  const auto n = static_cast<std::uint32_t>(x.entries);
  const thrust::counting_iterator<std::uint32_t> pos(0);
  thrust::sequence(exec, x.order, x.order + n);
  thrust::stable_sort_by_key(exec, x.sorted_keys, x.sorted_keys + n, x.order);
  const std::uint32_t* key_end =
      thrust::copy_if(exec, pos, pos + (n + 1), x.key_start, EmbeddingStartsKey{x.sorted_keys, n});
  x.distinct = static_cast<std::size_t>(key_end - x.key_start) - 1;
  thrust::gather(exec, x.key_start, x.key_start + x.distinct, x.sorted_keys, x.keys);
  // Slot k holds sorted positions [key_start[k], key_start[k + 1]): the first later start is k + 1's.
  thrust::upper_bound(exec, x.key_start + 1, x.key_start + x.distinct + 1, pos, pos + n, x.rank);
  thrust::scatter(exec, x.rank, x.rank + n, x.order, x.slots);
  const std::uint32_t* chunk_end =
      thrust::copy_if(exec, pos, pos + (n + 1), x.chunk_start, EmbeddingStartsChunk{x.rank, x.key_start, n});
  x.chunks = static_cast<std::size_t>(chunk_end - x.chunk_start) - 1;
  thrust::lower_bound(exec, x.chunk_start, x.chunk_start + x.chunks + 1, x.key_start, x.key_start + x.distinct + 1,
                      x.key_chunk);
  const std::size_t segments = x.batch * x.fields;
  thrust::upper_bound(exec, x.offsets + 1, x.offsets + segments + 1, pos, pos + n, x.owner);
}

/// Pooled forward into the (ld x batch) column-major `out`, rows [first_row, first_row + fields *
/// dim) of every column; `rows` is distinct x dim, row-major.
template <class Exec>
void pool_embedding_rows(Exec&& exec, const EmbeddingIndex& x, const float* rows, std::size_t dim, Pooling pooling,
                         float* out, std::size_t ld, std::size_t first_row) {
  const std::size_t n = x.batch * x.fields * dim;
  if (n == 0) return;
  const EmbeddingPool pool{x.offsets,
                           x.slots,
                           x.weights,
                           rows,
                           out,
                           static_cast<std::int64_t>(ld),
                           static_cast<std::int64_t>(first_row),
                           static_cast<std::int64_t>(dim),
                           static_cast<std::int64_t>(x.fields),
                           pooling == Pooling::mean};
  thrust::for_each_n(exec, thrust::counting_iterator<std::int64_t>(0), static_cast<std::int64_t>(n), pool);
}

/// grad (distinct x dim, row-major) += the coalesced gradient of every key, from dout (ld x batch,
/// column-major, the field's values from first_row). `partial` has room for chunks x dim values.
template <class Exec>
void coalesce_embedding_gradients(Exec&& exec, const EmbeddingIndex& x, const float* dout, std::size_t ld,
                                  std::size_t first_row, std::size_t dim, Pooling pooling, float* partial,
                                  float* grad) {
  if (x.distinct == 0 || dim == 0) return;
  const EmbeddingChunkGradient chunk{x.chunk_start,
                                     x.order,
                                     x.owner,
                                     x.offsets,
                                     x.weights,
                                     dout,
                                     partial,
                                     static_cast<std::int64_t>(ld),
                                     static_cast<std::int64_t>(first_row),
                                     static_cast<std::int64_t>(dim),
                                     static_cast<std::int64_t>(x.fields),
                                     pooling == Pooling::mean};
  const thrust::counting_iterator<std::int64_t> t(0);
  thrust::for_each_n(exec, t, static_cast<std::int64_t>(x.chunks * dim), chunk);
  const EmbeddingKeyGradient key{x.key_chunk, partial, grad, static_cast<std::int64_t>(dim)};
  thrust::for_each_n(exec, t, static_cast<std::int64_t>(x.distinct * dim), key);
}

/// Checks a batch given as entries: offsets must hold batch * fields + 1 values, start at 0, never
/// decrease and end at the number of keys; weights are one per key, or none (every entry weighs
/// 1). Throws ShapeError naming the sample and field.
inline void check_embedding_entries(std::size_t batch, std::size_t fields, std::size_t keys,
                                    std::span<const std::uint32_t> offsets, std::size_t weights) {
  const std::string where = "cuda::EmbeddingLookup::build: ";
  if (batch != 0 && fields > (std::numeric_limits<std::uint32_t>::max() - 1) / batch)
    throw ShapeError(where + std::to_string(batch) + " samples of " + std::to_string(fields) +
                     " fields are more (sample, field) pairs than 32-bit offsets address");
  if (offsets.size() != batch * fields + 1)
    throw ShapeError(where + std::to_string(batch) + " samples of " + std::to_string(fields) + " fields need " +
                     std::to_string(batch * fields + 1) + " offsets, got " + std::to_string(offsets.size()));
  if (keys > std::numeric_limits<std::uint32_t>::max() - 1)
    throw ShapeError(where + std::to_string(keys) + " IDs in one batch, more than 2^32 - 2");
  if (offsets[0] != 0)
    throw ShapeError(where + "the offsets start at " + std::to_string(offsets[0]) + ", not 0");
  for (std::size_t s = 0; s + 1 < offsets.size(); ++s)
    if (offsets[s] > offsets[s + 1])
      throw ShapeError(where + "sample " + std::to_string(s / fields) + ", field " + std::to_string(s % fields) +
                       ": its IDs start at offset " + std::to_string(offsets[s]) + " but end at " +
                       std::to_string(offsets[s + 1]));
  if (offsets.back() != keys)
    throw ShapeError(where + "the offsets end at " + std::to_string(offsets.back()) + " but there are " +
                     std::to_string(keys) + " keys");
  if (weights != 0 && weights != keys)
    throw ShapeError(where + std::to_string(keys) + " keys but " + std::to_string(weights) +
                     " weights (give one per key, or none for all 1)");
}

/// The entries of fields [first_field, first_field + fields) of examples, as the CPU lookup numbers
/// them: keys (embedding_key of each ID), per (sample, field) offsets, weights (1 where an example
/// has no values). The vectors keep their capacity. Throws as EmbeddingLookup::build does.
inline void gather_embedding_entries(std::span<const data::CtrExample> examples, std::size_t first_field,
                                     std::size_t fields, std::uint64_t buckets, std::vector<std::uint64_t>& keys,
                                     std::vector<std::uint32_t>& offsets, std::vector<float>& weights) {
  const std::size_t last_field = first_field + fields;
  if (buckets == 0 && last_field > embedding_max_unbucketed_fields)
    throw ConfigError("cuda::EmbeddingLookup: fields [" + std::to_string(first_field) + ", " +
                      std::to_string(last_field) + ") without buckets, but only fields below " +
                      std::to_string(embedding_max_unbucketed_fields) +
                      " have keys of their own; give the table buckets");
  if (buckets > 0 && last_field > 0 && buckets > std::numeric_limits<std::uint64_t>::max() / last_field)
    throw ConfigError("cuda::EmbeddingLookup: " + std::to_string(last_field) + " fields of " +
                      std::to_string(buckets) + " buckets each do not fit in 64-bit keys");
  const std::size_t batch = examples.size();
  std::size_t total = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const data::CtrExample& e = examples[i];
    const std::string where =
        "cuda::EmbeddingLookup: example " + std::to_string(i) + " of the batch (line " + std::to_string(e.line) + ")";
    if (e.fields() < last_field)
      throw ShapeError(where + " has " + std::to_string(e.fields()) + " fields, the table reads [" +
                       std::to_string(first_field) + ", " + std::to_string(last_field) + ")");
    if (fields == 0) continue;
    const std::uint64_t end = e.offsets.back();
    if (end != e.ids.size() || (!e.values.empty() && e.values.size() != e.ids.size()))
      throw ShapeError(where + " has " + std::to_string(e.ids.size()) + " IDs, " + std::to_string(e.values.size()) +
                       " values and offsets ending at " + std::to_string(end));
    for (std::size_t f = first_field; f < last_field; ++f)
      if (e.offsets[f] > e.offsets[f + 1])
        throw ShapeError(where + ": field " + std::to_string(f) + "'s IDs start at " + std::to_string(e.offsets[f]) +
                         " but end at " + std::to_string(e.offsets[f + 1]));
    total += e.offsets[last_field] - e.offsets[first_field];
  }
  if (total > std::numeric_limits<std::uint32_t>::max() - 1)
    throw ShapeError("cuda::EmbeddingLookup: " + std::to_string(total) + " IDs in one batch, more than 2^32 - 2");
  keys.resize(total);
  weights.resize(total);
  offsets.resize(batch * fields + 1);
  std::uint32_t entry = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const data::CtrExample& e = examples[i];
    for (std::size_t f = 0; f < fields; ++f) {
      offsets[i * fields + f] = entry;
      const std::size_t field = first_field + f;
      const auto ids = e.field_ids(field);
      const auto values = e.field_values(field);
      for (std::size_t j = 0; j < ids.size(); ++j, ++entry) {
        keys[entry] = embedding_key(field, ids[j], buckets);
        weights[entry] = values.empty() ? 1.0f : values[j];
      }
    }
  }
  offsets[batch * fields] = entry;
}

}  // namespace flotilla::cuda::detail
#endif  // FLOTILLA_CUDA_EMBEDDINGSTEPS_HPP_INCLUDED
