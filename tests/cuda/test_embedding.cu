// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// cuda::EmbeddingLookup on the GPU against flotilla::EmbeddingLookup, embedding_forward and
// embedding_backward on random batches (tests/cuda/embedding_batches.hpp: sum and mean pooling,
// weights or none, empty fields, IDs repeated within and across samples, hot IDs): the same
// distinct keys and slots exactly, forward and backward within 1e-5 relative, backward identical
// from run to run. One lookup serves every batch in turn, so its buffers are reused as they grow
// and shrink.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/embedding_batches.hpp"
#include "cuda/gpu_compare.hpp"
#include "flotilla/core/error.hpp"
#include "flotilla/core/tensor.hpp"
#include "flotilla/cuda/context.hpp"
#include "flotilla/cuda/embedding.hpp"
#include "flotilla/nn/embedding.hpp"

namespace gpu_embedding {

namespace {

using flotilla::Pooling;
using flotilla_test::to_device;
using flotilla_test::to_host;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

std::string describe(const flotilla_test::EmbeddingBatchSpec& s, std::uint64_t buckets, Pooling pooling) {
  return std::to_string(s.batch) + " samples x " + std::to_string(s.fields) + " fields from " +
         std::to_string(s.first_field) + ", up to " + std::to_string(s.max_ids) + " IDs of " +
         std::to_string(s.vocabulary) + (s.weighted ? ", weighted" : "") + ", buckets " + std::to_string(buckets) +
         (pooling == Pooling::mean ? ", mean" : ", sum");
}

}  // namespace

TEST_CASE("the GPU lookup gives the CPU's keys and slots, and its forward and backward within 1e-5") {
  flotilla::cuda::Context ctx;
  flotilla::cuda::EmbeddingLookup gpu;
  std::uint64_t seed = 1;
  std::size_t batches = 0;
  for (const auto& spec : flotilla_test::embedding_batch_specs())
    for (const std::uint64_t buckets : {std::uint64_t{0}, std::uint64_t{50}})
      for (const Pooling pooling : {Pooling::sum, Pooling::mean}) {
        INFO(describe(spec, buckets, pooling));
        const auto examples = flotilla_test::embedding_batch(spec, seed++);
        flotilla::EmbeddingLookup cpu;
        cpu.build(examples, spec.first_field, spec.fields, buckets);
        gpu.build(ctx.compute(), examples, spec.first_field, spec.fields, buckets);
        ++batches;

        REQUIRE(gpu.keys().size() == cpu.keys.size());
        CHECK(std::equal(cpu.keys.begin(), cpu.keys.end(), gpu.keys().begin()));
        CHECK(to_host(gpu.device_keys(), cpu.keys.size()) == cpu.keys);
        CHECK(gpu.entries() == cpu.slots.size());
        CHECK(to_host(gpu.device_slots(), cpu.slots.size()) == cpu.slots);
        CHECK(to_host(gpu.device_weights(), cpu.weights.size()) == cpu.weights);

        const std::size_t dim = 8, first_row = 3, ld = first_row + spec.fields * dim + 2;
        const std::vector<float> rows = random_floats(cpu.keys.size() * dim, seed);
        std::vector<float> out_cpu = random_floats(ld * spec.batch, seed + 1);
        auto d_rows = to_device<float>(rows);
        auto d_out = to_device<float>(out_cpu);
        flotilla::embedding_forward<float>(cpu, rows, dim, pooling,
                                           flotilla::MatrixView<float>(out_cpu.data(), static_cast<Eigen::Index>(ld),
                                                                       static_cast<Eigen::Index>(spec.batch)),
                                           first_row);
        gpu.forward(ctx.compute(), d_rows.data(), rows.size(), dim, pooling, {d_out.data(), ld, spec.batch}, first_row);
        const std::vector<float> out_gpu = to_host(d_out.data(), out_cpu.size());
        FLOTILLA_CHECK_CLOSE("forward", out_gpu, out_cpu, 1e-5);
        for (std::size_t i = 0; i < spec.batch; ++i)
          for (std::size_t r = 0; r < ld; ++r)
            if (r < first_row || r >= first_row + spec.fields * dim) CHECK(out_gpu[i * ld + r] == out_cpu[i * ld + r]);

        // Backward into zeroed rows (the usual case) and into rows that already hold values.
        const std::vector<float> dout = random_floats(ld * spec.batch, seed + 2);
        auto d_dout = to_device<float>(dout);
        for (const bool zeroed : {true, false}) {
          INFO((zeroed ? "into zeroed rows" : "added to rows"));
          const std::vector<float> start = zeroed ? std::vector<float>(cpu.keys.size() * dim, 0.0f)
                                                  : random_floats(cpu.keys.size() * dim, seed + 3);
          std::vector<float> grad_cpu = start;
          flotilla::embedding_backward<float>(
              cpu,
              flotilla::ConstMatrixView<float>(dout.data(), static_cast<Eigen::Index>(ld),
                                               static_cast<Eigen::Index>(spec.batch)),
              first_row, dim, pooling, grad_cpu);
          auto d_grad = to_device<float>(start);
          gpu.backward(ctx.compute(), {d_dout.data(), ld, spec.batch}, first_row, dim, pooling, d_grad.data(),
                       start.size());
          const std::vector<float> grad_gpu = to_host(d_grad.data(), start.size());
          FLOTILLA_CHECK_CLOSE("backward", grad_gpu, grad_cpu, 1e-5);

          // Run to run: the same inputs give the same bits.
          auto d_again = to_device<float>(start);
          gpu.backward(ctx.compute(), {d_dout.data(), ld, spec.batch}, first_row, dim, pooling, d_again.data(),
                       start.size());
          CHECK(to_host(d_again.data(), start.size()) == grad_gpu);
        }
      }
  CHECK(batches == flotilla_test::embedding_batch_specs().size() * 4);
}

TEST_CASE("the GPU lookup de-duplicates raw 64-bit keys given directly, all weighing 1 without weights") {
  flotilla::cuda::Context ctx;
  flotilla::cuda::EmbeddingLookup gpu;
  constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  // 2 samples x 2 fields: (0,0) {top, 0}, (0,1) {}, (1,0) {5, top, 5}, (1,1) {0}.
  const std::vector<std::uint64_t> keys{top, 0, 5, top, 5, 0};
  const std::vector<std::uint32_t> offsets{0, 2, 2, 5, 6};
  gpu.build(ctx.compute(), 2, 2, keys, offsets, {});
  CHECK(std::vector<std::uint64_t>(gpu.keys().begin(), gpu.keys().end()) == std::vector<std::uint64_t>{0, 5, top});
  CHECK(to_host(gpu.device_slots(), keys.size()) == std::vector<std::uint32_t>{2, 0, 1, 2, 1, 0});
  CHECK(to_host(gpu.device_weights(), keys.size()) == std::vector<float>(keys.size(), 1.0f));

  // Forward with dim 1 and rows 1, 10, 100: sums per field; mean divides by the field's count.
  const std::vector<float> rows{1.0f, 10.0f, 100.0f};
  auto d_rows = to_device<float>(rows);
  flotilla::cuda::DeviceBuffer<float> d_out(4);
  gpu.forward(ctx.compute(), d_rows.data(), rows.size(), 1, Pooling::sum, {d_out.data(), 2, 2}, 0);
  CHECK(to_host(d_out.data(), 4) == std::vector<float>{101.0f, 0.0f, 120.0f, 1.0f});
  gpu.forward(ctx.compute(), d_rows.data(), rows.size(), 1, Pooling::mean, {d_out.data(), 2, 2}, 0);
  CHECK(to_host(d_out.data(), 4) == std::vector<float>{50.5f, 0.0f, 40.0f, 1.0f});
}

TEST_CASE("the GPU lookup refuses mismatched shapes and a forward before any build") {
  flotilla::cuda::Context ctx;
  flotilla::cuda::EmbeddingLookup gpu;
  flotilla::cuda::DeviceBuffer<float> d(16);
  CHECK_THROWS_WITH_AS(gpu.forward(ctx.compute(), d.data(), 0, 4, Pooling::sum, {d.data(), 4, 0}, 0),
                       doctest::Contains("build() it first"), flotilla::ShapeError);
  const std::vector<std::uint64_t> keys{3, 4};
  const std::vector<std::uint32_t> bad{0, 1};
  CHECK_THROWS_AS(gpu.build(ctx.compute(), 1, 1, keys, bad, {}), flotilla::ShapeError);
  const std::vector<std::uint32_t> offsets{0, 2};
  gpu.build(ctx.compute(), 1, 1, keys, offsets, {});
  CHECK_THROWS_WITH_AS(gpu.forward(ctx.compute(), d.data(), 7, 4, Pooling::sum, {d.data(), 4, 1}, 0),
                       doctest::Contains("2 keys of 4 values need 8 row values, got 7"), flotilla::ShapeError);
  CHECK_THROWS_WITH_AS(gpu.backward(ctx.compute(), {d.data(), 3, 1}, 0, 4, Pooling::sum, d.data(), 8),
                       doctest::Contains("need a matrix of at least 4 x 1, got 3 x 1"), flotilla::ShapeError);
}

}  // namespace gpu_embedding
