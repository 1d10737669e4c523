// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Random click-log batches for the embedding lookup tests, on the host and on the GPU: repeated
// IDs within a sample and across samples, multi-ID and empty fields, weights or none, and a hot ID
// that appears in most samples (more entries than one chunk of backward's coalescing).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "flotilla/data/ctr_example.hpp"

namespace flotilla_test {

struct EmbeddingBatchSpec {
  std::size_t batch = 64;
  std::size_t first_field = 0;  // fields before the table's, filled and ignored
  std::size_t fields = 4;
  std::size_t max_ids = 3;        // IDs per field: 0 to max_ids
  std::uint64_t vocabulary = 20;  // IDs drawn from [0, vocabulary); small: many repeats
  bool weighted = true;           // values (weights) or none (all 1)
  double hot = 0.3;               // probability that an ID is the field's hot ID (12345)
};

inline std::vector<flotilla::data::CtrExample> embedding_batch(const EmbeddingBatchSpec& spec, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<std::size_t> count(0, spec.max_ids);
  std::uniform_int_distribution<std::uint64_t> id(0, spec.vocabulary - 1);
  std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
  std::bernoulli_distribution hot(spec.hot);
  std::vector<flotilla::data::CtrExample> batch(spec.batch);
  for (std::size_t i = 0; i < spec.batch; ++i) {
    flotilla::data::CtrExample& e = batch[i];
    e.line = 100 + i;
    e.offsets.push_back(0);
    for (std::size_t f = 0; f < spec.first_field + spec.fields; ++f) {
      const std::size_t n = count(g);
      for (std::size_t j = 0; j < n; ++j) {
        e.ids.push_back(hot(g) ? 12345 : id(g));
        if (spec.weighted) e.values.push_back(weight(g));
      }
      e.offsets.push_back(static_cast<std::uint32_t>(e.ids.size()));
    }
  }
  return batch;
}

/// The specs both test files run: sum and mean pooling are applied to each. (Set member by member:
/// nvcc 13's device front end crashes on designated initializers.)
inline std::vector<EmbeddingBatchSpec> embedding_batch_specs() {
  const auto spec = [](std::size_t batch, std::size_t first_field, std::size_t fields, std::size_t max_ids,
                       std::uint64_t vocabulary, bool weighted, double hot) {
    EmbeddingBatchSpec s;
    s.batch = batch;
    s.first_field = first_field;
    s.fields = fields;
    s.max_ids = max_ids;
    s.vocabulary = vocabulary;
    s.weighted = weighted;
    s.hot = hot;
    return s;
  };
  return {
      spec(64, 0, 4, 3, 20, true, 0.3),           // small, weighted, many repeats
      spec(7, 2, 3, 1, 4, false, 0.3),            // one ID or none per field, after two other fields
      spec(300, 1, 5, 4, 1000, true, 0.5),        // hot IDs: hundreds of entries per key
      spec(2048, 0, 26, 2, 100000, false, 0.05),  // Criteo-like: 26 fields, mostly distinct IDs
      spec(5, 0, 2, 0, 20, true, 0.3),            // every field empty
      spec(0, 0, 3, 2, 20, true, 0.3),            // no samples
  };
}

}  // namespace flotilla_test
