// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The GPU embedding lookup's steps (cuda/embedding_steps.hpp), run on the host by Thrust's C++
// backend: the same Thrust algorithms and functors that the GPU runs, against
// flotilla::EmbeddingLookup, embedding_forward and embedding_backward. No GPU needed; the GPU test
// (test_embedding.cu) runs the same batches on the device.
#include <doctest/doctest.h>
#include <thrust/system/cpp/execution_policy.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/embedding_batches.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/cuda/embedding_steps.hpp"
#include "flotilla/nn/embedding.hpp"

namespace {

using flotilla::Pooling;
using flotilla::data::CtrExample;
namespace detail = flotilla::cuda::detail;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// max |a - b| / max |b| (0 when both are all zero).
double relative_difference(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// The GPU lookup's arrays in host memory, indexed by the same steps on the host.
struct HostSteps {
  std::vector<std::uint64_t> entry_keys, sorted_keys, keys;
  std::vector<std::uint32_t> offsets, order, rank, slots, owner, key_start, chunk_start, key_chunk;
  std::vector<float> weights, partial;
  detail::EmbeddingIndex x;

  void build(std::span<const CtrExample> examples, std::size_t first_field, std::size_t fields,
             std::uint64_t buckets) {
    detail::gather_embedding_entries(examples, first_field, fields, buckets, entry_keys, offsets, weights);
    detail::check_embedding_entries(examples.size(), fields, entry_keys.size(), offsets, weights.size());
    const std::size_t n = entry_keys.size();
    sorted_keys = entry_keys;
    sorted_keys.resize(n + 1);
    weights.resize(n + 1);
    for (auto* v : {&order, &rank, &slots, &owner, &key_start, &chunk_start, &key_chunk}) v->assign(n + 1, 0xdeadbeef);
    keys.assign(n + 1, 0);
    x = detail::EmbeddingIndex{};
    x.batch = examples.size();
    x.fields = fields;
    x.entries = n;
    x.sorted_keys = sorted_keys.data();
    x.offsets = offsets.data();
    x.weights = weights.data();
    x.order = order.data();
    x.rank = rank.data();
    x.slots = slots.data();
    x.owner = owner.data();
    x.key_start = key_start.data();
    x.chunk_start = chunk_start.data();
    x.key_chunk = key_chunk.data();
    x.keys = keys.data();
    detail::index_embedding_entries(thrust::cpp::par, x);
  }
  std::vector<std::uint64_t> distinct_keys() const {
    return {keys.begin(), keys.begin() + static_cast<long>(x.distinct)};
  }
  std::vector<std::uint32_t> entry_slots() const {
    return {slots.begin(), slots.begin() + static_cast<long>(x.entries)};
  }
};

struct Case {
  flotilla_test::EmbeddingBatchSpec spec;
  std::vector<CtrExample> examples;
  flotilla::EmbeddingLookup cpu;
  HostSteps steps;
  std::uint64_t buckets;
};

Case make_case(const flotilla_test::EmbeddingBatchSpec& spec, std::uint64_t seed, std::uint64_t buckets) {
  Case c{spec, flotilla_test::embedding_batch(spec, seed), {}, {}, buckets};
  c.cpu.build(c.examples, spec.first_field, spec.fields, buckets);
  c.steps.build(c.examples, spec.first_field, spec.fields, buckets);
  return c;
}

std::string describe(const flotilla_test::EmbeddingBatchSpec& s, std::uint64_t buckets) {
  return std::to_string(s.batch) + " samples x " + std::to_string(s.fields) + " fields from " +
         std::to_string(s.first_field) + ", up to " + std::to_string(s.max_ids) + " IDs of " +
         std::to_string(s.vocabulary) + (s.weighted ? ", weighted" : "") + ", buckets " + std::to_string(buckets);
}

}  // namespace

TEST_CASE("the steps find the CPU lookup's distinct keys and every entry's slot exactly") {
  std::uint64_t seed = 1;
  for (const auto& spec : flotilla_test::embedding_batch_specs())
    for (const std::uint64_t buckets : {std::uint64_t{0}, std::uint64_t{50}}) {
      INFO(describe(spec, buckets));
      const Case c = make_case(spec, seed++, buckets);
      CHECK(c.steps.x.distinct == c.cpu.keys.size());
      CHECK(c.steps.distinct_keys() == c.cpu.keys);
      CHECK(c.steps.entry_slots() == c.cpu.slots);
      CHECK(c.steps.offsets == c.cpu.offsets);
      CHECK(std::equal(c.cpu.weights.begin(), c.cpu.weights.end(), c.steps.weights.begin()));
    }
}

TEST_CASE("the index sorts entries stably, splits keys into chunks of at most 32, and finds each entry's field") {
  std::uint64_t seed = 100;
  std::size_t keys_over_one_chunk = 0;
  for (const auto& spec : flotilla_test::embedding_batch_specs()) {
    INFO(describe(spec, 0));
    const Case c = make_case(spec, seed++, 0);
    const detail::EmbeddingIndex& x = c.steps.x;
    const std::size_t n = x.entries;
    // Sorted order: keys ascending, entries ascending within a key, every entry once.
    std::vector<bool> seen(n, false);
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint32_t e = c.steps.order[j];
      REQUIRE(e < n);
      CHECK_FALSE(seen[e]);
      seen[e] = true;
      CHECK(c.steps.sorted_keys[j] == c.steps.entry_keys[e]);
      CHECK(c.steps.rank[j] == c.cpu.slots[e]);
      if (j > 0 && c.steps.sorted_keys[j] == c.steps.sorted_keys[j - 1]) CHECK(c.steps.order[j - 1] < e);
    }
    // Key starts and chunks.
    if (n == 0) {
      CHECK(x.distinct == 0);
      CHECK(x.chunks == 0);
      continue;
    }
    CHECK(c.steps.key_start[x.distinct] == n);
    CHECK(c.steps.chunk_start[x.chunks] == n);
    CHECK(c.steps.key_chunk[x.distinct] == x.chunks);
    for (std::size_t k = 0; k < x.distinct; ++k) {
      const std::uint32_t begin = c.steps.key_start[k], end = c.steps.key_start[k + 1];
      REQUIRE(begin < end);
      CHECK(c.steps.sorted_keys[begin] == c.cpu.keys[k]);
      const std::uint32_t first = c.steps.key_chunk[k], last = c.steps.key_chunk[k + 1];
      CHECK(last - first == (end - begin + detail::embedding_chunk - 1) / detail::embedding_chunk);
      CHECK(c.steps.chunk_start[first] == begin);
      CHECK(c.steps.chunk_start[last] == end);
      for (std::uint32_t ch = first; ch < last; ++ch)
        CHECK(c.steps.chunk_start[ch + 1] - c.steps.chunk_start[ch] <= detail::embedding_chunk);
      if (last - first > 1) ++keys_over_one_chunk;
    }
    // Owners: entry e lies in the entries of its (sample, field).
    for (std::size_t e = 0; e < n; ++e) {
      const std::uint32_t s = c.steps.owner[e];
      REQUIRE(s < x.batch * x.fields);
      CHECK(c.steps.offsets[s] <= e);
      CHECK(e < c.steps.offsets[s + 1]);
    }
  }
  CHECK(keys_over_one_chunk > 0);  // the hot IDs exercise the second pass of the coalescing
}

TEST_CASE("pooling on the host agrees with embedding_forward, sum and mean, within 1e-5") {
  std::uint64_t seed = 200;
  for (const auto& spec : flotilla_test::embedding_batch_specs())
    for (const Pooling pooling : {Pooling::sum, Pooling::mean})
      for (const std::size_t dim : {std::size_t{1}, std::size_t{8}}) {
        INFO(describe(spec, 0) << (pooling == Pooling::mean ? ", mean" : ", sum") << ", dim " << dim);
        const Case c = make_case(spec, seed++, 0);
        const std::vector<float> rows = random_floats(c.cpu.keys.size() * dim, seed);
        // A matrix with rows above and below the table's, which must be left as they were.
        const std::size_t first_row = 3, ld = first_row + spec.fields * dim + 2;
        std::vector<float> cpu = random_floats(ld * spec.batch, seed + 1), host = cpu;
        flotilla::embedding_forward<float>(c.cpu, rows, dim, pooling,
                                           flotilla::MatrixView<float>(cpu.data(), static_cast<Eigen::Index>(ld),
                                                                       static_cast<Eigen::Index>(spec.batch)),
                                           first_row);
        detail::pool_embedding_rows(thrust::cpp::par, c.steps.x, rows.data(), dim, pooling, host.data(), ld, first_row);
        CHECK(relative_difference(host, cpu) <= 1e-5);
        for (std::size_t i = 0; i < spec.batch; ++i)
          for (std::size_t r = 0; r < ld; ++r)
            if (r < first_row || r >= first_row + spec.fields * dim) CHECK(host[i * ld + r] == cpu[i * ld + r]);
      }
}

TEST_CASE("coalescing on the host agrees with embedding_backward within 1e-5, and adds to the gradient rows") {
  std::uint64_t seed = 300;
  for (const auto& spec : flotilla_test::embedding_batch_specs())
    for (const Pooling pooling : {Pooling::sum, Pooling::mean})
      for (const bool zeroed : {true, false}) {
        const std::size_t dim = 4;
        INFO(describe(spec, 0) << (pooling == Pooling::mean ? ", mean" : ", sum") << (zeroed ? ", zeroed" : ", added"));
        Case c = make_case(spec, seed++, 0);
        const std::size_t first_row = 2, ld = first_row + spec.fields * dim + 1;
        const std::vector<float> dout = random_floats(ld * spec.batch, seed);
        std::vector<float> cpu = zeroed ? std::vector<float>(c.cpu.keys.size() * dim, 0.0f)
                                        : random_floats(c.cpu.keys.size() * dim, seed + 1);
        std::vector<float> host = cpu;
        flotilla::embedding_backward<float>(
            c.cpu,
            flotilla::ConstMatrixView<float>(dout.data(), static_cast<Eigen::Index>(ld),
                                             static_cast<Eigen::Index>(spec.batch)),
            first_row, dim, pooling, cpu);
        c.steps.partial.assign(c.steps.x.chunks * dim, 0.0f);
        detail::coalesce_embedding_gradients(thrust::cpp::par, c.steps.x, dout.data(), ld, first_row, dim, pooling,
                                             c.steps.partial.data(), host.data());
        CHECK(relative_difference(host, cpu) <= 1e-5);
      }
}

TEST_CASE("a key's gradient is the sum of its entries' terms, with repeats in a sample and across samples") {
  // Hand-computed: field 0 of sample 0 holds ID 7 twice (weights 0.5, 1.5) and ID 3 (2.0); sample
  // 1's field 0 holds 3 (0.25); mean pooling divides sample 0's terms by 3. dim 1, dout = column
  // values 10 (sample 0) and 100 (sample 1).
  CtrExample a, b;
  a.offsets = {0, 3};
  a.ids = {7, 3, 7};
  a.values = {0.5f, 2.0f, 1.5f};
  b.offsets = {0, 1};
  b.ids = {3};
  b.values = {0.25f};
  const std::vector<CtrExample> batch{a, b};
  HostSteps steps;
  steps.build(batch, 0, 1, 0);
  REQUIRE(steps.x.distinct == 2);
  const std::uint64_t k3 = flotilla::embedding_key(0, 3, 0), k7 = flotilla::embedding_key(0, 7, 0);
  const std::size_t slot3 = k3 < k7 ? 0 : 1, slot7 = 1 - slot3;
  const std::vector<float> dout{10.0f, 100.0f};
  for (const Pooling pooling : {Pooling::sum, Pooling::mean}) {
    const float scale = pooling == Pooling::mean ? 1.0f / 3.0f : 1.0f;
    std::vector<float> grad(2, 0.0f);
    steps.partial.assign(steps.x.chunks, 0.0f);
    detail::coalesce_embedding_gradients(thrust::cpp::par, steps.x, dout.data(), 1, 0, 1, pooling,
                                         steps.partial.data(), grad.data());
    CHECK(grad[slot7] == doctest::Approx(10.0f * scale * (0.5f + 1.5f)));
    CHECK(grad[slot3] == doctest::Approx(10.0f * scale * 2.0f + 100.0f * 0.25f));
  }
}

TEST_CASE("malformed entries are refused with the sample and field named") {
  const std::vector<std::uint32_t> ok{0, 1, 1, 3};
  CHECK_NOTHROW(detail::check_embedding_entries(3, 1, 3, ok, 3));
  CHECK_NOTHROW(detail::check_embedding_entries(3, 1, 3, ok, 0));
  CHECK_THROWS_WITH_AS(detail::check_embedding_entries(2, 1, 3, ok, 3),
                       doctest::Contains("2 samples of 1 fields need 3 offsets, got 4"), flotilla::ShapeError);
  const std::vector<std::uint32_t> backwards{0, 2, 1, 3};
  CHECK_THROWS_WITH_AS(detail::check_embedding_entries(3, 1, 3, backwards, 3),
                       doctest::Contains("sample 1, field 0: its IDs start at offset 2 but end at 1"),
                       flotilla::ShapeError);
  CHECK_THROWS_WITH_AS(detail::check_embedding_entries(3, 1, 4, ok, 4), doctest::Contains("end at 3 but there are 4"),
                       flotilla::ShapeError);
  CHECK_THROWS_WITH_AS(detail::check_embedding_entries(3, 1, 3, ok, 2), doctest::Contains("3 keys but 2 weights"),
                       flotilla::ShapeError);
  const std::vector<std::uint32_t> late{1, 1, 2, 3};
  CHECK_THROWS_WITH_AS(detail::check_embedding_entries(3, 1, 3, late, 3), doctest::Contains("start at 1, not 0"),
                       flotilla::ShapeError);

  // Examples: the CPU lookup's errors, naming the example's line.
  CtrExample short_one;
  short_one.offsets = {0, 1};
  short_one.ids = {5};
  short_one.line = 42;
  std::vector<std::uint64_t> keys;
  std::vector<std::uint32_t> offsets;
  std::vector<float> weights;
  const std::vector<CtrExample> batch{short_one};
  CHECK_THROWS_WITH_AS(detail::gather_embedding_entries(batch, 0, 2, 0, keys, offsets, weights),
                       doctest::Contains("example 0 of the batch (line 42) has 1 fields"), flotilla::ShapeError);
  CHECK_THROWS_AS(detail::gather_embedding_entries(batch, 250, 10, 0, keys, offsets, weights), flotilla::ConfigError);
  CtrExample unequal = short_one;
  unequal.values = {1.0f, 2.0f};
  const std::vector<CtrExample> unequal_batch{unequal};
  CHECK_THROWS_WITH_AS(detail::gather_embedding_entries(unequal_batch, 0, 1, 0, keys, offsets, weights),
                       doctest::Contains("has 1 IDs, 2 values"), flotilla::ShapeError);
}
