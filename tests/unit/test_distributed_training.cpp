// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Distributed training with the in-process transport: the equivalences that define the policies,
// bytes on the wire against the theory, and the staleness bound.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "../common/blobs.hpp"
#include "../common/quiet_fit.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/policy/accumulate.hpp"
#include "flotilla/policy/asynchronous.hpp"
#include "flotilla/policy/compressed.hpp"
#include "flotilla/policy/synchronous.hpp"
#include "flotilla/transport/in_process.hpp"

namespace unit_distributed {

using namespace flotilla;

namespace {

// Dropout is keyed by sample id, so even it must agree however batches are split.
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;

using flotilla_test::blobs;

/// A temporary file name no concurrent run of this test shares.
std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("flotilla_" + std::to_string(::getpid()) + "_" + name);
}

using flotilla_test::quiet;

template <class M>
TrainerOptions<M> setup(std::size_t batch, std::size_t workers, std::size_t servers = 1) {
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.05;
  o.batch_size = batch;
  o.workers = workers;
  o.servers = servers;
  o.seed = 17;
  return o;
}

template <class T>
double relative_difference(std::span<const T> a, std::span<const T> b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    norm = std::max(norm, std::abs(static_cast<double>(a[i])));
  }
  return diff / norm;
}

/// Parameters after `epochs` epochs of Trainer<M, P> with `workers` workers of `batch` each.
template <class M, class P = policy::Synchronous<>>
std::vector<typename M::scalar_type> train(const data::Dataset<typename M::scalar_type>& d, std::size_t batch,
                                           std::size_t workers, std::size_t servers = 1, std::size_t epochs = 1,
                                           Overlap overlap = Overlap::automatic) {
  auto o = setup<M>(batch, workers, servers);
  o.overlap = overlap;
  Trainer<M, P> t(o);
  t.fit(d, nullptr, quiet(epochs));
  const auto p = std::as_const(t).parameters();
  return {p.begin(), p.end()};
}

}  // namespace

TEST_CASE("synchronous ring training on N workers equals one worker with an N-times batch") {
  using MF = Model<Net, SoftmaxCrossEntropy, optim::Momentum, float>;
  using MD = Model<Net, SoftmaxCrossEntropy, optim::Momentum, double>;
  const auto df = blobs<float>(480, 1);
  const auto dd = blobs<double>(480, 1);
  for (std::size_t n : {1u, 2u, 4u}) {
    CAPTURE(n);
    // 480 samples: batches of 12 per worker -> global batch 12n, 40/n steps, no partial batch.
    const auto one_f = train<MF>(df, 12 * n, 1, 1, 2), many_f = train<MF>(df, 12, n, 1, 2);
    const auto one_d = train<MD>(dd, 12 * n, 1, 1, 2), many_d = train<MD>(dd, 12, n, 1, 2);
    CHECK(relative_difference<float>(one_f, many_f) < 1e-5);
    CHECK(relative_difference<double>(one_d, many_d) < 1e-12);
  }
  // A partial last global batch (490 = 40 x 12 + 10) is split unevenly and still agrees.
  const auto d490 = blobs<double>(490, 2);
  CHECK(relative_difference<double>(train<MD>(d490, 24, 1), train<MD>(d490, 12, 2)) < 1e-12);
  // Buckets sent during backward on a thread of each worker's own, and after it on the training
  // thread (TrainerOptions::overlap; `automatic` picks one by the cores): the same sums.
  for (const Overlap overlap : {Overlap::always, Overlap::never}) {
    CAPTURE(static_cast<int>(overlap));
    CHECK(relative_difference<float>(train<MF>(df, 24, 1, 1, 2), train<MF>(df, 12, 2, 1, 2, overlap)) < 1e-5);
    CHECK(relative_difference<double>(train<MD>(dd, 48, 1, 1, 2), train<MD>(dd, 12, 4, 1, 2, overlap)) < 1e-12);
  }
  // Layers reporting parts of their gradients during backward (stream_gradients), on two cores
  // per worker, in buckets smaller than a layer, sent while backward runs: still the same.
  for (std::size_t bucket_bytes : {std::size_t{64}, std::size_t{256} * 1024}) {
    CAPTURE(bucket_bytes);
    auto o = setup<MD>(12, 4);
    o.stream_gradients = true;
    o.overlap = Overlap::always;
    o.threads = 2;
    policy::Synchronous<> ring;
    ring.bucket_bytes = bucket_bytes;
    Trainer<MD> streamed(o, ring);
    streamed.fit(dd, nullptr, quiet(2));
    const auto p = std::as_const(streamed).parameters();
    CHECK(relative_difference<double>(train<MD>(dd, 48, 1, 1, 2), std::vector<double>(p.begin(), p.end())) < 1e-12);
  }
}

TEST_CASE("synchronous parameter-server training equals one worker with an N-times batch") {
  using MD = Model<Net, SoftmaxCrossEntropy, optim::Adam, double>;
  using PS = policy::Synchronous<topology::ParameterServer>;
  const auto d = blobs<double>(480, 3);
  for (std::size_t n : {1u, 2u, 4u}) {
    for (std::size_t servers : {1u, 3u}) {
      CAPTURE(n);
      CAPTURE(servers);
      const auto one = train<MD>(d, 12 * n, 1);
      // Shards pushed while backward runs, and after it.
      for (const Overlap overlap : {Overlap::always, Overlap::never}) {
        CAPTURE(static_cast<int>(overlap));
        const auto many = train<MD, PS>(d, 12, n, servers, 1, overlap);
        CHECK(relative_difference<double>(one, many) < 1e-12);
      }
    }
  }
}

TEST_CASE("gradient accumulation over K batches equals one batch K times larger") {
  using MD = Model<Net, SoftmaxCrossEntropy, optim::Momentum, double>;
  const auto d = blobs<double>(480, 4);
  const auto big = train<MD>(d, 48, 1);
  CHECK(relative_difference<double>(big, train<MD, policy::Accumulate<4>>(d, 12, 1)) < 1e-12);
  CHECK(relative_difference<double>(big, train<MD, policy::Accumulate<2>>(d, 12, 2)) < 1e-12);
  using AccPS = policy::Accumulate<2, policy::Synchronous<topology::ParameterServer>>;
  CHECK(relative_difference<double>(big, train<MD, AccPS>(d, 12, 2, 2)) < 1e-12);
  // 490 samples: the last update of the epoch has fewer micro-batches and is still a mean.
  const auto d490 = blobs<double>(490, 5);
  CHECK(relative_difference<double>(train<MD>(d490, 48, 1), train<MD, policy::Accumulate<4>>(d490, 12, 1)) < 1e-12);
}

TEST_CASE("bytes on the wire per step equal the theory") {
  // Every layer's parameter count is divisible by 2 and 4, so ring chunks are equal.
  using Small = Sequential<Input<16>, Dense<8>, ReLU, Dense<4>>;  // 136 + 36 = 172 parameters
  using M = Model<Small, MSE, optim::SGD, float>;
  constexpr std::size_t P = 172;
  data::Dataset<float> d;
  d.name = "regression";
  Generator g(9);
  d.inputs.resize(16, 64);
  d.targets.resize(4, 64);
  for (Eigen::Index i = 0; i < d.inputs.size(); ++i) d.inputs.data()[i] = g.normal<float>();
  for (Eigen::Index i = 0; i < d.targets.size(); ++i) d.targets.data()[i] = g.normal<float>();

  auto per_step = [](const auto& trainer) {
    const auto& c = trainer.step_counters();
    REQUIRE(c.size() == 4);  // 64 samples / (8 x workers... ) see callers
    for (const auto& s : c) CHECK(s.traffic.payload_bytes_sent == c.front().traffic.payload_bytes_sent);
    return c.front().traffic;
  };
  for (std::size_t n : {2u, 4u}) {
    CAPTURE(n);
    const std::size_t batch = 64 / (4 * n);  // 4 steps per epoch
    {
      policy::Synchronous<> ring;
      // Five buckets, the first layer cut in four (36, 36, 36, 36 and 28 values from the end):
      // every one divisible by 2 and 4 again.
      ring.bucket_bytes = 36 * sizeof(float);
      const auto buckets = detail::make_buckets(M::network::parameter_offsets, M::network::parameter_counts, 36);
      REQUIRE(buckets.size() == 5);
      for (const auto& b : buckets) REQUIRE(b.size() % 4 == 0);
      Trainer<M> t(setup<M>(batch, n), ring);
      t.fit(d, nullptr, quiet());
      const auto traffic = per_step(t);
      CHECK(traffic.payload_bytes_sent == 2 * (n - 1) * P * sizeof(float) / n);
      CHECK(traffic.payload_bytes_received == 2 * (n - 1) * P * sizeof(float) / n);
      CHECK(traffic.header_bytes_sent == 0);  // in-process: no framing
    }
    {
      Trainer<M, policy::Compressed<codec::Fp16>> t(setup<M>(batch, n));
      t.fit(d, nullptr, quiet());
      CHECK(per_step(t).payload_bytes_sent == 2 * (n - 1) * P * 2 / n);  // fp16 halves it
    }
    for (std::size_t servers : {1u, 2u}) {
      CAPTURE(servers);
      using PS = policy::Synchronous<topology::ParameterServer>;
      Trainer<M, PS> t(setup<M>(batch, n, servers));
      t.fit(d, nullptr, quiet());
      const std::size_t header = detail::PsHeader::size * servers;  // the protocol's own header per shard message
      CHECK(per_step(t).payload_bytes_sent == P * sizeof(float) + header);
      CHECK(per_step(t).payload_bytes_received == P * sizeof(float) + header);
      Trainer<M, policy::Compressed<codec::Fp16, PS>> h(setup<M>(batch, n, servers));
      h.fit(d, nullptr, quiet());
      CHECK(per_step(h).payload_bytes_sent == P * 2 + header);
      CHECK(per_step(h).payload_bytes_received == P * 2 + header);
    }
  }
}

TEST_CASE("bounded staleness never lets a worker run more than S steps ahead") {
  using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float>;
  const auto d = blobs<float>(960, 6);
  auto max_ahead = [&](auto policy_tag) {
    using P = decltype(policy_tag);
    auto o = setup<M>(8, 4);
    o.straggler = {3, 4.0};  // worker 3 is four times slower
    FitOptions f = quiet();
    f.step_log_file = scratch("staleness.jsonl");
    Trainer<M, P> t(o);
    const auto h = t.fit(d, nullptr, f);
    std::filesystem::remove(f.step_log_file);
    double ahead = 0;
    for (const auto& [k, v] : h.back().extra)
      if (k == "max_steps_ahead") ahead = v;
    return ahead;
  };
  CHECK(max_ahead(policy::BoundedStaleness<0>{}) == 0);
  CHECK(max_ahead(policy::BoundedStaleness<1>{}) <= 1);
  CHECK(max_ahead(policy::BoundedStaleness<3>{}) <= 3);
  // Without a bound the fast workers do run ahead: the check above can fail.
  CHECK(max_ahead(policy::Asynchronous<>{}) > 3);
}

TEST_CASE("the timeline and the step log record every worker") {
  using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float>;
  const auto d = blobs<float>(96, 7);
  FitOptions f = quiet();
  f.trace_file = scratch("trace.json");
  f.step_log_file = scratch("steps.jsonl");
  Trainer<M> t(setup<M>(8, 3));
  t.fit(d, nullptr, f);
  std::ifstream trace(f.trace_file);
  std::stringstream text;
  text << trace.rdbuf();
  const std::string json = text.str();
  CHECK(json.find("\"traceEvents\"") != std::string::npos);
  for (int r = 0; r < 3; ++r) CHECK(json.find("\"name\":\"rank " + std::to_string(r) + "\"") != std::string::npos);
  CHECK(json.find("allreduce bucket 0") != std::string::npos);
  CHECK(json.find("forward+backward") != std::string::npos);
  std::ifstream steps(f.step_log_file);
  std::size_t lines = 0;
  for (std::string line; std::getline(steps, line);) ++lines;
  CHECK(lines == 3 * 4);  // 3 workers x 4 steps (96 samples / 24 per step)
  std::filesystem::remove(f.trace_file);
  std::filesystem::remove(f.step_log_file);
}

TEST_CASE("the step log and the epoch metrics carry every traffic counter, and agree") {
  using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float>;
  const auto d = blobs<float>(96, 7);
  FitOptions f = quiet();
  f.step_log_file = scratch("counters.jsonl");
  Trainer<M> t(setup<M>(8, 3));  // 3 workers: the ring's pieces differ in size between ranks
  const auto h = t.fit(d, nullptr, f);
  std::vector<std::string> lines;
  {
    std::ifstream steps(f.step_log_file);
    for (std::string line; std::getline(steps, line);) lines.push_back(line);
  }
  std::filesystem::remove(f.step_log_file);
  REQUIRE(lines.size() == 3 * 4);
  for (const auto& field : traffic_counter_fields) {
    CAPTURE(field.name);
    // The step log: every line has the counter; their mean is what the epoch reports per step.
    const std::string key = "\"" + std::string(field.name) + "\":";
    double sum = 0;
    for (const auto& line : lines) {
      const auto at = line.find(key);
      REQUIRE(at != std::string::npos);
      sum += static_cast<double>(std::strtoull(line.c_str() + at + key.size(), nullptr, 10));
    }
    const std::string metric = std::string(field.name) + "_per_step";
    const auto it = std::find_if(h.back().extra.begin(), h.back().extra.end(),
                                 [&](const auto& kv) { return kv.first == metric; });
    REQUIRE(it != h.back().extra.end());
    CHECK(it->second == doctest::Approx(sum / static_cast<double>(lines.size())).epsilon(1e-12));
  }
  // And the counts are the ring's: messages go both ways on every step, framing-free in-process.
  for (const auto& c : t.step_counters()) {
    CHECK(c.traffic.messages_sent > 0);
    CHECK(c.traffic.messages_sent == c.traffic.messages_received);
    CHECK(c.traffic.header_bytes_sent == 0);
  }
}

TEST_CASE("the timeline's timestamps are the steady clock's, which the processes of a machine share") {
  Timeline timeline(true);
  const auto begin = Timeline::clock::now();
  const auto end = begin + std::chrono::microseconds(250);
  timeline.record("step", "compute", 3, 0, begin, end);
  const auto path = scratch("clock.json");
  timeline.write(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const std::size_t ts = json.find("\"ts\":"), dur = json.find("\"dur\":");
  REQUIRE(ts != std::string::npos);
  REQUIRE(dur != std::string::npos);
  const double written = std::stod(json.substr(ts + 5, 32));
  const double expected =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(begin.time_since_epoch()).count()) / 1e3;
  CHECK(std::abs(written - expected) < 0.002);  // microseconds, printed to 3 decimals
  CHECK(std::stod(json.substr(dur + 6, 32)) == doctest::Approx(250.0).epsilon(1e-6));
  // The host and the steady clock's offset from the system clock, which align hosts' files.
  CHECK(json.find("\"otherData\":{\"host\":\"" + Timeline::host_name() + "\",\"clock\":\"steady\"") != std::string::npos);
  const std::size_t offset = json.find("\"steady_to_unix_us\":");
  REQUIRE(offset != std::string::npos);
  const double unix_now = std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double steady_now = Timeline::microseconds(Timeline::clock::now());
  CHECK(std::abs(std::stod(json.substr(offset + 20, 32)) - (unix_now - steady_now)) < 1e5);  // within 0.1 s
  std::filesystem::remove(path);
}

namespace {
// A locale as some users' programs set: a decimal comma and thousands grouped with points.
struct CommaDecimals : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};
}  // namespace

TEST_CASE("the timeline is valid JSON whatever the names hold and whatever the locale") {
  Timeline timeline(true);
  const auto begin = Timeline::clock::now();
  timeline.record("push \"shard\" 1\\2\nnext\x01", "comm\tcat", 1234, 1, begin, begin + std::chrono::microseconds(1500));
  const auto path = scratch("escaped.json");
  const std::locale before = std::locale::global(std::locale(std::locale::classic(), new CommaDecimals));
  // The C library's locale too, where the machine has one with a decimal comma.
  const std::string c_before = std::setlocale(LC_NUMERIC, nullptr);
  const bool comma_c_locale = std::setlocale(LC_NUMERIC, "de_DE.UTF-8") != nullptr || std::setlocale(LC_NUMERIC, "fr_FR.UTF-8") != nullptr;
  timeline.write(path);
  std::setlocale(LC_NUMERIC, c_before.c_str());
  std::locale::global(before);
  MESSAGE("a C locale with a decimal comma was " << std::string(comma_c_locale ? "" : "not ") << "available");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  CHECK(json.find("{\"name\":\"push \\\"shard\\\" 1\\\\2\\nnext\\u0001\",\"cat\":\"comm\\tcat\",\"ph\":\"X\"") != std::string::npos);
  CHECK(json.find("\"dur\":1500.000,\"pid\":1234,\"tid\":1}") != std::string::npos);
  CHECK(json.find("\"args\":{\"name\":\"rank 1234\"}") != std::string::npos);
  CHECK(json.find("1.234") == std::string::npos);
  const std::size_t offset = json.find("\"steady_to_unix_us\":");
  REQUIRE(offset != std::string::npos);
  CHECK(json.find(',', offset) == std::string::npos);  // the last number: a point, never a comma
  std::filesystem::remove(path);
}

TEST_CASE("a failing worker stops the whole job with its error") {
  using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float>;
  auto d = blobs<float>(96, 8);
  Trainer<M> t(setup<M>(8, 3));
  auto bad = d;
  bad.labels[50] = 7;  // out of range: the worker that draws it fails
  CHECK_THROWS_WITH_AS(t.fit(bad, nullptr, quiet()), doctest::Contains("label 7"), Error);
}

}  // namespace unit_distributed
