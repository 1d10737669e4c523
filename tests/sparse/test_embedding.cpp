// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Embedding lookups: keys, the lookup's layout, pooled forward and backward (against hand-computed
// values, central differences and a Dense layer fed the equivalent one-hot input).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "flotilla/core/error.hpp"
#include "flotilla/core/layer_args.hpp"
#include "flotilla/core/shape.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/data/ctr_example.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/embedding.hpp"

namespace {

using flotilla::EmbeddingLookup;
using flotilla::Pooling;
using flotilla::data::CtrExample;

// An example from its fields' IDs and, when given, their weights (field after field).
CtrExample example(const std::vector<std::vector<std::uint64_t>>& fields, const std::vector<float>& values = {},
                   std::uint64_t line = 1) {
  CtrExample e;
  e.line = line;
  e.offsets.push_back(0);
  for (const auto& f : fields) {
    e.ids.insert(e.ids.end(), f.begin(), f.end());
    e.offsets.push_back(static_cast<std::uint32_t>(e.ids.size()));
  }
  e.values = values;
  return e;
}

// The batch the gradient tests share: weighted IDs, a repeated ID within a sample (7 in sample 0,
// field 0), IDs shared across samples (7, 3), and empty fields (sample 1 field 1, sample 2 field 0).
std::vector<CtrExample> mixed_batch() {
  return {example({{7, 3, 7}, {5}}, {0.5f, 2.0f, 1.5f, -1.0f}, 1),
          example({{3}, {}}, {0.25f}, 2),
          example({{}, {5, 9}}, {}, 3),
          example({{11, 7}, {9}}, {}, 4)};
}

std::vector<double> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

}  // namespace

TEST_CASE("embedding keys of different fields never collide, with or without buckets") {
  std::set<std::uint64_t> unbucketed, bucketed;
  for (std::size_t field = 0; field < 26; ++field)
    for (std::uint64_t id = 0; id < 1000; ++id) {
      const std::uint64_t k = flotilla::embedding_key(field, id, 0);
      CHECK((k >> 56) == field);
      unbucketed.insert(k);
      const std::uint64_t b = flotilla::embedding_key(field, id, 50);
      CHECK(b >= field * 50);
      CHECK(b < (field + 1) * 50);
      bucketed.insert(b);
    }
  // Every (field, id) without buckets is a row of its own; with 50 buckets, every bucket of every
  // field is reached by some of its 1000 IDs.
  CHECK(unbucketed.size() == 26 * 1000);
  CHECK(bucketed.size() == 26 * 50);
  CHECK(flotilla::embedding_key(3, 42, 0) == flotilla::embedding_key(3, 42, 0));
}

TEST_CASE("distinct IDs below 2^56 have distinct unbucketed keys, and buckets bound the range evenly") {
  std::mt19937_64 g(5);
  std::set<std::uint64_t> ids, keys;
  while (ids.size() < 20000) ids.insert(g() >> 8);
  for (auto id : ids) keys.insert(flotilla::embedding_key(1, id, 0));
  CHECK(keys.size() == ids.size());

  // 100000 consecutive IDs into 100 buckets: a mixed hash puts about 1000 in each.
  std::vector<int> count(100, 0);
  for (std::uint64_t id = 0; id < 100000; ++id) {
    const std::uint64_t k = flotilla::embedding_key(4, id, 100);
    REQUIRE(k >= 400);
    REQUIRE(k < 500);
    ++count[k - 400];
  }
  CHECK(*std::min_element(count.begin(), count.end()) > 850);
  CHECK(*std::max_element(count.begin(), count.end()) < 1150);
}

TEST_CASE("a lookup lists distinct keys ascending, and each entry's slot names its own key") {
  const auto batch = mixed_batch();
  EmbeddingLookup l;
  l.build(batch, 0, 2, 0);
  CHECK(l.batch == 4);
  CHECK(l.fields == 2);
  CHECK(std::is_sorted(l.keys.begin(), l.keys.end()));
  CHECK(std::adjacent_find(l.keys.begin(), l.keys.end()) == l.keys.end());
  // Distinct (field, id): field 0 {7, 3, 11}, field 1 {5, 9}.
  CHECK(l.keys.size() == 5);
  REQUIRE(l.offsets.size() == 9);
  CHECK(l.offsets == std::vector<std::uint32_t>{0, 3, 4, 5, 5, 5, 7, 9, 10});
  for (std::size_t i = 0; i < batch.size(); ++i)
    for (std::size_t f = 0; f < 2; ++f) {
      const auto ids = batch[i].field_ids(f);
      const auto [begin, end] = l.entries(i, f);
      REQUIRE(end - begin == ids.size());
      for (std::uint32_t e = begin; e < end; ++e)
        CHECK(l.keys[l.slots[e]] == flotilla::embedding_key(f, ids[e - begin], 0));
    }
  CHECK(l.weights == std::vector<float>{0.5f, 2.0f, 1.5f, -1.0f, 0.25f, 1, 1, 1, 1, 1});

  // A second build (smaller, other fields' offset) reuses the lookup and leaves nothing behind.
  const std::vector<CtrExample> two{example({{1}, {2, 2}, {4}}), example({{1}, {}, {4}})};
  l.build(two, 1, 2, 8);
  CHECK(l.batch == 2);
  CHECK(l.offsets == std::vector<std::uint32_t>{0, 2, 3, 3, 4});
  CHECK(l.slots.size() == 4);
  CHECK(l.weights == std::vector<float>{1, 1, 1, 1});
  CHECK(l.keys.size() == 2);
  CHECK(l.slots[0] == l.slots[1]);
  CHECK(l.keys[l.slots[0]] == flotilla::embedding_key(1, 2, 8));
  CHECK(l.keys[l.slots[2]] == flotilla::embedding_key(2, 4, 8));
  CHECK(l.keys[l.slots[3]] == flotilla::embedding_key(2, 4, 8));
}

TEST_CASE("a large batch's lookup (sorted by radix) has exactly the distinct keys of its IDs") {
  // 400 examples of 26 fields, some with two IDs: over 10^4 entries, past the size where the
  // lookup stops using std::sort. IDs from a small range repeat across samples.
  std::mt19937_64 g(11);
  std::vector<CtrExample> batch;
  for (std::uint64_t i = 0; i < 400; ++i) {
    std::vector<std::vector<std::uint64_t>> fields(26);
    for (std::size_t f = 0; f < 26; ++f) {
      fields[f].push_back(f % 2 ? g() % 50 : g());
      if (g() % 3 == 0) fields[f].push_back(g() % 1000);
    }
    batch.push_back(example(fields, {}, i + 1));
  }
  for (const std::uint64_t buckets : {std::uint64_t{0}, std::uint64_t{1} << 20, std::uint64_t{64}}) {
    CAPTURE(buckets);
    EmbeddingLookup l;
    l.build(batch, 0, 26, buckets);
    std::set<std::uint64_t> expected;
    std::size_t entries = 0;
    for (std::size_t i = 0; i < batch.size(); ++i)
      for (std::size_t f = 0; f < 26; ++f) {
        const auto ids = batch[i].field_ids(f);
        const auto [begin, end] = l.entries(i, f);
        REQUIRE(end - begin == ids.size());
        for (std::uint32_t e = begin; e < end; ++e) {
          const std::uint64_t k = flotilla::embedding_key(f, ids[e - begin], buckets);
          expected.insert(k);
          REQUIRE(l.keys[l.slots[e]] == k);
          ++entries;
        }
      }
    CHECK(entries > 10000);
    CHECK(l.keys == std::vector<std::uint64_t>(expected.begin(), expected.end()));
  }
}

TEST_CASE("a lookup rejects examples with too few fields or mismatched values, naming the line") {
  EmbeddingLookup l;
  const std::vector<CtrExample> short_one{example({{1}, {2}}, {}, 1), example({{1}}, {}, 17)};
  CHECK_THROWS_WITH_AS(l.build(short_one, 0, 2, 0), doctest::Contains("line 17"), flotilla::ShapeError);
  const std::vector<CtrExample> bad_values{example({{1, 2}, {3}}, {1.0f, 2.0f}, 9)};
  CHECK_THROWS_WITH_AS(l.build(bad_values, 0, 2, 0), doctest::Contains("line 9"), flotilla::ShapeError);
  CtrExample backwards = example({{1, 2}, {3}}, {}, 12);
  backwards.offsets[1] = 3;  // field 0 would end after field 1 starts
  backwards.offsets[2] = 2;
  backwards.offsets.push_back(3);
  CHECK_THROWS_WITH_AS(l.build(std::span<const CtrExample>(&backwards, 1), 0, 2, 0), doctest::Contains("line 12"),
                       flotilla::ShapeError);
  CHECK_THROWS_AS(l.build(short_one, 250, 10, 0), flotilla::ConfigError);
  // No fields read: an empty lookup, whatever the examples hold.
  const std::vector<CtrExample> no_fields{CtrExample{}, CtrExample{}};
  l.build(no_fields, 0, 0, 0);
  CHECK(l.batch == 2);
  CHECK(l.keys.empty());
  CHECK(l.offsets == std::vector<std::uint32_t>{0});
  CHECK_THROWS_AS(l.build(short_one, 0, 2, std::uint64_t{1} << 63), flotilla::ConfigError);
}

TEST_CASE("pooled forward equals the weighted sum (or mean) of the rows, computed by hand") {
  // One field, dim 2; sample 0: IDs 10 (weight 2) and 20 (weight -1); sample 1: ID 20 twice; sample
  // 2: no ID.
  const std::vector<CtrExample> batch{example({{10, 20}}, {2.0f, -1.0f}), example({{20, 20}}), example({{}})};
  EmbeddingLookup l;
  l.build(batch, 0, 1, 0);
  REQUIRE(l.keys.size() == 2);
  const std::size_t r10 = l.slots[0], r20 = l.slots[1];
  std::vector<double> rows(4);
  rows[r10 * 2] = 1.0, rows[r10 * 2 + 1] = 3.0;    // row of ID 10: (1, 3)
  rows[r20 * 2] = 0.5, rows[r20 * 2 + 1] = -2.0;   // row of ID 20: (0.5, -2)

  // The output has a row above and one below the embedding's two, which must stay untouched.
  std::vector<double> out(4 * 3, 99.0);
  flotilla::embedding_forward<double>(l, rows, 2, Pooling::sum, flotilla::MatrixView<double>(out.data(), 4, 3), 1);
  // sample 0: 2*(1, 3) - (0.5, -2) = (1.5, 8); sample 1: 2*(0.5, -2) = (1, -4); sample 2: (0, 0).
  CHECK(out == std::vector<double>{99, 1.5, 8, 99, 99, 1, -4, 99, 99, 0, 0, 99});

  flotilla::embedding_forward<double>(l, rows, 2, Pooling::mean, flotilla::MatrixView<double>(out.data(), 4, 3), 1);
  // Means over the number of IDs: (0.75, 4), (0.5, -2), (0, 0).
  CHECK(out == std::vector<double>{99, 0.75, 4, 99, 99, 0.5, -2, 99, 99, 0, 0, 99});
}

TEST_CASE("embedding backward equals central differences of the pooled forward, sum and mean") {
  const auto batch = mixed_batch();
  EmbeddingLookup l;
  l.build(batch, 0, 2, 0);
  constexpr std::size_t dim = 3, first_row = 2, out_rows = first_row + 2 * dim + 1;
  const std::size_t n = batch.size();
  auto rows = random_values(l.keys.size() * dim, 1);
  const auto r = random_values(out_rows * n, 2);  // L = sum(r .* out)

  for (const Pooling pooling : {Pooling::sum, Pooling::mean}) {
    CAPTURE(static_cast<int>(pooling));
    auto loss = [&] {
      std::vector<double> out(out_rows * n, 0.0);
      flotilla::embedding_forward<double>(l, rows, dim, pooling,
                                          flotilla::MatrixView<double>(out.data(), out_rows, static_cast<long>(n)),
                                          first_row);
      double s = 0;
      for (std::size_t k = 0; k < out.size(); ++k) s += r[k] * out[k];
      return s;
    };
    // Gradients accumulate: start from a known value and subtract it afterwards.
    std::vector<double> grad(rows.size(), 0.25);
    flotilla::embedding_backward<double>(l, flotilla::ConstMatrixView<double>(r.data(), out_rows, static_cast<long>(n)),
                                         first_row, dim, pooling, grad);
    const double h = 1e-6;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double keep = rows[k];
      rows[k] = keep + h;
      const double up = loss();
      rows[k] = keep - h;
      const double down = loss();
      rows[k] = keep;
      CHECK(grad[k] - 0.25 == doctest::Approx((up - down) / (2 * h)).epsilon(1e-7));
    }
  }
}

TEST_CASE("an embedding equals a Dense layer fed the weighted multi-hot input, forward and gradient") {
  // One field with IDs 0..V-1; the Dense weight's column j (its inputs are column-major: column j
  // holds input j's Outputs weights) is the row of ID j, the bias is zero.
  constexpr std::size_t V = 6, D = 4;
  using Layer = flotilla::Dense<D>::layer<flotilla::Shape<V>, double>;
  const std::vector<CtrExample> batch{example({{0, 5, 0}}, {1.5f, -0.5f, 2.0f}), example({{2}}, {3.0f}),
                                      example({{}}), example({{5, 1, 2, 3}}, {1, 1, 0.5f, 0.25f}),
                                      example({{4}}, {})};
  const std::size_t n = batch.size();
  EmbeddingLookup l;
  l.build(batch, 0, 1, 0);
  std::vector<std::size_t> slot_of(V, V);  // ID -> its slot
  for (std::size_t i = 0; i < n; ++i) {
    const auto [begin, end] = l.entries(i, 0);
    for (auto e = begin; e < end; ++e) slot_of[batch[i].ids[e - begin]] = l.slots[e];
  }
  REQUIRE(l.keys.size() == V);

  const auto rows = random_values(V * D, 3);
  std::vector<double> params(Layer::parameter_count, 0.0);
  for (std::size_t j = 0; j < V; ++j)
    for (std::size_t d = 0; d < D; ++d) params[j * D + d] = rows[slot_of[j] * D + d];
  const auto dout = random_values(D * n, 4);

  for (const Pooling pooling : {Pooling::sum, Pooling::mean}) {
    CAPTURE(static_cast<int>(pooling));
    std::vector<double> x(V * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto ids = batch[i].field_ids(0);
      const auto values = batch[i].field_values(0);
      for (std::size_t j = 0; j < ids.size(); ++j)
        x[i * V + ids[j]] +=
            (values.empty() ? 1.0 : values[j]) / (pooling == Pooling::mean ? static_cast<double>(ids.size()) : 1.0);
    }
    const auto cols = static_cast<long>(n);
    Layer dense;
    std::vector<double> y(D * n), emb(D * n);
    flotilla::ForwardArgs<double> fa{flotilla::ConstMatrixView<double>(x.data(), V, cols),
                                     flotilla::MatrixView<double>(y.data(), D, cols), params,
                                     flotilla::Mode::eval, {}, 0};
    dense.forward(fa);
    flotilla::embedding_forward<double>(l, rows, D, pooling, flotilla::MatrixView<double>(emb.data(), D, cols), 0);
    for (std::size_t k = 0; k < y.size(); ++k) CHECK(emb[k] == doctest::Approx(y[k]).epsilon(1e-12));

    std::vector<double> dparams(Layer::parameter_count, 0.0), grad_rows(rows.size(), 0.0);
    dense.backward({flotilla::ConstMatrixView<double>(x.data(), V, cols),
                    flotilla::ConstMatrixView<double>(y.data(), D, cols),
                    flotilla::ConstMatrixView<double>(dout.data(), D, cols), flotilla::empty_view<double>(), params,
                    dparams});
    flotilla::embedding_backward<double>(l, flotilla::ConstMatrixView<double>(dout.data(), D, cols), 0, D, pooling,
                                         grad_rows);
    for (std::size_t j = 0; j < V; ++j)
      for (std::size_t d = 0; d < D; ++d)
        CHECK(grad_rows[slot_of[j] * D + d] == doctest::Approx(dparams[j * D + d]).epsilon(1e-12));
  }
}

TEST_CASE("forward and backward reject blocks and outputs whose shapes disagree with the lookup") {
  const auto batch = mixed_batch();
  EmbeddingLookup l;
  l.build(batch, 0, 2, 0);
  std::vector<double> rows(l.keys.size() * 2), out(4 * 4);
  CHECK_THROWS_AS(flotilla::embedding_forward<double>(l, std::span<const double>(rows).first(3), 2, Pooling::sum,
                                                      flotilla::MatrixView<double>(out.data(), 4, 4), 0),
                  flotilla::ShapeError);
  // 2 fields x 2 values from row 1 need 5 rows.
  CHECK_THROWS_AS(flotilla::embedding_forward<double>(l, std::span<const double>(rows), 2, Pooling::sum,
                                                      flotilla::MatrixView<double>(out.data(), 4, 4), 1),
                  flotilla::ShapeError);
  CHECK_THROWS_AS(flotilla::embedding_backward<double>(l, flotilla::ConstMatrixView<double>(out.data(), 4, 3), 0, 2,
                                                       Pooling::sum, std::span<double>(rows)),
                  flotilla::ShapeError);
  CHECK_NOTHROW(flotilla::embedding_forward<double>(l, std::span<const double>(rows), 2, Pooling::sum,
                                                    flotilla::MatrixView<double>(out.data(), 4, 4), 0));
}
