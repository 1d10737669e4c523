// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Gradients reported final during backward (StreamsGradients, Engine's on_ready), the buckets cut
// from them (make_buckets) and the runner that sends them (ReadyRunner): what is reported final
// must not change afterwards, the sum must not depend on the order in which the parts were
// computed, and every bucket is sent once, in order.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/train/detail/ready_runner.hpp"

namespace unit_streaming {

using namespace flotilla;

namespace {

void check_tiling(const std::vector<detail::Range>& buckets, std::size_t total, std::size_t bucket_elements) {
  REQUIRE(!buckets.empty());
  CHECK(buckets.front().end == total);
  CHECK(buckets.back().begin == 0);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    CAPTURE(i);
    CHECK(buckets[i].size() > 0);
    if (i + 1 < buckets.size()) {
      CHECK(buckets[i + 1].end == buckets[i].begin);  // contiguous, from the end of the buffer
      CHECK(buckets[i].size() >= bucket_elements);   // only the last bucket may be short
    }
  }
}

}  // namespace

TEST_CASE("make_buckets: small layers are merged, a large layer is cut, the start of the buffer is what is left") {
  // The Fashion-MNIST MLP: 784 -> 256 -> 128 -> 10, in 256 KiB buckets of floats.
  constexpr std::array<std::size_t, 3> counts{784 * 256 + 256, 256 * 128 + 128, 128 * 10 + 10};
  constexpr std::array<std::size_t, 3> offsets{0, counts[0], counts[0] + counts[1]};
  const std::size_t total = counts[0] + counts[1] + counts[2], bucket = 65536;
  const auto b = detail::make_buckets(offsets, counts, bucket);
  check_tiling(b, total, bucket);
  // The two small layers (34,186 values) and the end of the first make the first bucket; the
  // first layer's remaining 169,610 give two full buckets and a short last one.
  const std::vector<detail::Range> expected{
      {total - bucket, total}, {total - 2 * bucket, total - bucket}, {total - 3 * bucket, total - 2 * bucket},
      {0, total - 3 * bucket}};
  CHECK(b == expected);

  // A layer far larger than a bucket is cut into about eight, not into bucket-sized crumbs.
  constexpr std::array<std::size_t, 2> big_counts{1'000'000, 10};
  constexpr std::array<std::size_t, 2> big_offsets{0, 1'000'000};
  const auto big = detail::make_buckets(big_offsets, big_counts, 1000);
  check_tiling(big, 1'000'010, 1000);
  CHECK(big.size() == 8);
  for (const auto& r : big) CHECK(r.size() <= 125'010);

  // Whole layers smaller than a bucket stay together until the bucket is full.
  constexpr std::array<std::size_t, 4> small_counts{10, 0, 20, 30};
  constexpr std::array<std::size_t, 4> small_offsets{0, 10, 10, 30};
  const auto small = detail::make_buckets(small_offsets, small_counts, 50);
  CHECK(small == std::vector<detail::Range>{{10, 60}, {0, 10}});
  // One bucket per layer at the smallest bucket size would be 60 messages here; eighths instead.
  CHECK(detail::make_buckets(small_offsets, small_counts, 1).size() <= 3 * 8);
}

namespace {

// A first layer that streams in four blocks (256 x 256 weights) ahead of two small ones.
using StreamNet = Sequential<Input<256>, Dense<256>, ReLU, Dense<32>, Tanh, Dense<3>>;
using StreamModel = Model<StreamNet, SoftmaxCrossEntropy, optim::SGD, float>;

struct Report {
  std::size_t offset;
  std::vector<float> tail;  // the gradients [offset, P) at the moment they were reported final
};

std::vector<float> gradients_of(std::size_t cores, std::vector<Report>* reports, bool stream) {
  constexpr std::size_t n = 40;
  Generator g(5);
  Matrix<float> x(256, n);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = g.normal<float>();
  std::vector<std::int32_t> labels(n);
  std::vector<std::uint64_t> ids(n);
  for (std::size_t s = 0; s < n; ++s) {
    labels[s] = static_cast<std::int32_t>(g.below(3));
    ids[s] = s;
  }
  const data::Batch<float> batch{.inputs = ConstMatrixView<float>(x.data(), x.rows(), x.cols()),
                                 .targets = Targets<float>{labels},
                                 .ids = ids,
                                 .global_size = n};
  detail::Engine<StreamModel> engine(cores, 64, 11);
  engine.set_stream_gradients(stream);
  auto grads = engine.gradients();
  if (reports) {
    engine.compute_gradients(batch, 1.0f, false, [&](std::size_t offset) {
      reports->push_back({offset, std::vector<float>(grads.begin() + static_cast<std::ptrdiff_t>(offset), grads.end())});
    });
  } else {
    engine.compute_gradients(batch, 1.0f);
  }
  return {grads.begin(), grads.end()};
}

}  // namespace

TEST_CASE("streamed gradients: what backward reports final stays so, and the sum equals the unstreamed one") {
  static_assert(StreamsGradients<Dense<256>::layer<Shape<256>, float>>);
  using Net = StreamModel::network;
  const std::size_t first_layer_end = Net::parameter_offsets[0] + Net::parameter_counts[0];
  for (std::size_t cores : {1u, 3u}) {
    CAPTURE(cores);
    std::vector<Report> reports;
    const auto streamed = gradients_of(cores, &reports, true);
    const auto whole = gradients_of(cores, nullptr, false);
    REQUIRE(streamed.size() == whole.size());
    for (std::size_t i = 0; i < whole.size(); ++i) {
      CAPTURE(i);
      REQUIRE(std::abs(streamed[i] - whole[i]) <= 1e-6f * (1.0f + std::abs(whole[i])));
    }
    REQUIRE(!reports.empty());
    CHECK(reports.back().offset == 0);
    std::size_t inside_first_layer = 0;
    for (std::size_t r = 0; r < reports.size(); ++r) {
      CAPTURE(r);
      if (r > 0) CHECK(reports[r].offset < reports[r - 1].offset);  // only ever more of the buffer
      if (reports[r].offset > 0 && reports[r].offset < first_layer_end) ++inside_first_layer;
      // Bit for bit what the gradients were at the end: nothing reported final changed later.
      const std::vector<float> final_tail(streamed.begin() + static_cast<std::ptrdiff_t>(reports[r].offset), streamed.end());
      CHECK(reports[r].tail == final_tail);
    }
    // The bias and three of the four weight blocks of the first layer are reported before it ends.
    CHECK(inside_first_layer == 4);

    // Switched off (the default: TrainerOptions::stream_gradients), layers are reported whole, with
    // the same sum.
    std::vector<Report> whole_layers;
    const auto unstreamed = gradients_of(cores, &whole_layers, false);
    CHECK(unstreamed == whole);
    for (const auto& r : whole_layers) CHECK((r.offset == 0 || r.offset >= first_layer_end));
  }
}

TEST_CASE("ReadyRunner: each range's action runs once, in order, one at a time, on its thread or finish()'s") {
  // Ranges from the end of a 100-value buffer, as backward finishes them.
  const std::vector<detail::Range> ranges{{80, 100}, {50, 80}, {20, 50}, {0, 20}};
  std::vector<std::size_t> order;
  std::atomic<int> in_flight{0}, max_in_flight{0};
  std::atomic<bool> fail_at_two{false};
  detail::ReadyRunner runner(ranges, [&](std::size_t i, detail::Range r) {
    const int now = ++in_flight;
    max_in_flight = std::max(max_in_flight.load(), now);
    CHECK(r == ranges[i]);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    order.push_back(i);  // only one action at a time touches it (checked through max_in_flight)
    --in_flight;
    if (i == 2 && fail_at_two) throw std::runtime_error("bucket 2 failed");
  });
  Generator g(3);
  for (int pass = 0; pass < 200; ++pass) {
    CAPTURE(pass);
    order.clear();
    runner.start(100);
    // Backward reports ever longer tails, then finish() takes whatever the runner has not reached.
    const std::size_t reports = g.below(4);
    for (std::size_t k = 0; k < reports; ++k) runner.ready(100 - 30 * (k + 1));
    if (g.below(2)) std::this_thread::sleep_for(std::chrono::microseconds(100));
    runner.finish();
    CHECK(order == std::vector<std::size_t>{0, 1, 2, 3});
  }
  CHECK(max_in_flight == 1);

  // A failure is rethrown by finish(), and the ranges after it are not sent.
  fail_at_two = true;
  order.clear();
  runner.start(100);
  CHECK_THROWS_WITH(runner.finish(), "bucket 2 failed");
  CHECK(order == std::vector<std::size_t>{0, 1, 2});
  // The runner is usable again after a failure.
  fail_at_two = false;
  order.clear();
  runner.start(100);
  runner.ready(0);
  runner.finish();
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3});
}

TEST_CASE("ReadyRunner without a thread of its own: finish() runs every range, in order, on the calling thread") {
  const std::vector<detail::Range> ranges{{80, 100}, {50, 80}, {20, 50}, {0, 20}};
  std::vector<std::size_t> order;
  std::vector<std::thread::id> threads;
  bool fail_at_one = false;
  detail::ReadyRunner runner(
      ranges,
      [&](std::size_t i, detail::Range r) {
        CHECK(r == ranges[i]);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
        if (i == 1 && fail_at_one) throw std::runtime_error("bucket 1 failed");
      },
      false);
  CHECK_FALSE(runner.background());
  for (int pass = 0; pass < 3; ++pass) {
    order.clear();
    threads.clear();
    runner.start(100);
    if (pass == 1) runner.ready(50);  // reports change nothing: no range runs before finish()
    CHECK(order.empty());
    runner.finish();
    CHECK(order == std::vector<std::size_t>{0, 1, 2, 3});
    for (const auto& id : threads) CHECK(id == std::this_thread::get_id());
  }
  fail_at_one = true;
  order.clear();
  runner.start(100);
  CHECK_THROWS_WITH(runner.finish(), "bucket 1 failed");
  CHECK(order == std::vector<std::size_t>{0, 1});
}

TEST_CASE("TrainerOptions::overlap: automatic overlaps only where the ranks' compute threads leave a core free") {
  CHECK(detail::usable_cores() >= 1);
  CHECK(detail::overlap_pays(16, 2, 1));       // 16 cores, 2 single-thread ranks: 14 to spare
  CHECK(detail::overlap_pays(3, 2, 1));
  CHECK_FALSE(detail::overlap_pays(2, 2, 1));  // two single-thread ranks on 2 cores
  CHECK_FALSE(detail::overlap_pays(4, 2, 2));
  CHECK_FALSE(detail::overlap_pays(1, 1, 1));
  CHECK(detail::overlap_pays(2, 1, 1));
  CHECK(TrainerOptions<Model<Sequential<Input<2>, Dense<1>>, MSE, optim::SGD>>{}.overlap == Overlap::automatic);
  CHECK(parse_overlap("auto", "--overlap") == Overlap::automatic);
  CHECK(parse_overlap("always", "--overlap") == Overlap::always);
  CHECK(parse_overlap("never", "--overlap") == Overlap::never);
  CHECK_THROWS_WITH_AS(parse_overlap("sometimes", "--overlap"), "--overlap: 'sometimes' is not auto, always or never",
                       ConfigError);
}

}  // namespace unit_streaming
