// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Reference runs: a seeded, in-process job of each kind of update trains a fixed number of steps,
// and the FNV-1a hash of its parameters' bytes must be exactly the one recorded here. A change
// that is meant to keep behaviour (a refactoring of the trainer, the gradient exchange, the
// policies) must keep these bits; a change that is meant to alter the numbers must say so by
// recording new values in the same commit.
//
// The values hold for any x86-64 machine: tests build without -march flags, so the GEMM runs
// Eigen's SSE2 path, whose blocking does not vary with the cache sizes for layers this small, and
// every sum over workers is taken in rank order whatever the timing. Asynchronous servers are
// deterministic with one worker only, so that is the run pinned; several asynchronous workers
// depend on which push arrives first.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "../common/blobs.hpp"
#include "../common/quiet_fit.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/pipeline.hpp"

namespace {

using namespace flotilla;

// Every layer kind, Dropout included (its masks are keyed by the seed and sample).
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using MomentumModel = Model<Net, SoftmaxCrossEntropy, optim::Momentum>;
using AdamModel = Model<Net, SoftmaxCrossEntropy, optim::Adam>;

const data::Dataset<float>& train_set() {
  static const auto d = flotilla_test::blobs<float>(96, 11);
  return d;
}

std::uint64_t fnv1a(std::span<const float> values) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size_bytes(); ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex(std::uint64_t h) {
  char s[19];
  std::snprintf(s, sizeof s, "0x%016llx", static_cast<unsigned long long>(h));
  return s;
}

template <class Options>
Options common() {
  Options o;
  o.optimizer.learning_rate = 0.05;
  // Warm-up and decay, so that every place that reads the learning rate of a step is exercised.
  o.schedule = schedule::Cosine{.total = 30, .min_factor = 0.1, .warmup = 3};
  o.batch_size = 8;
  o.seed = 23;
  return o;
}

/// Trains 2 epochs (12 updates of 8 samples per worker with 1 worker, 6 with 2) and returns the
/// parameters' hash; also checks that the job trained at all.
template <class M, class Policy>
std::uint64_t run(std::size_t workers, std::size_t servers = 1, Overlap overlap = Overlap::automatic) {
  auto o = common<TrainerOptions<M>>();
  o.workers = workers;
  o.servers = servers;
  o.overlap = overlap;
  Trainer<M, Policy> t(o);
  const auto initial = fnv1a(t.parameters());
  const History h = t.fit(train_set(), nullptr, flotilla_test::quiet(2));
  REQUIRE(h.size() == 2);
  CHECK(t.step() > 0);
  const auto trained = fnv1a(t.parameters());
  CHECK(trained != initial);
  return trained;
}

/// Local SGD (docs/concepts/update_policy.md): a peer-to-peer policy that combines gradients
/// itself, through the context's collectives.
template <std::size_t H>
struct LocalSGD {
  static constexpr std::string_view name = "local-sgd";
  using topology = flotilla::topology::Ring;
  static constexpr bool reduce_gradients_in_backward = false;
  template <class Context>
  void step(Context& ctx) {
    ctx.apply_optimizer();
    if (ctx.step() % H == 0) ctx.allreduce(ctx.parameters(), /*average=*/true);
  }
};

void check_hash(const std::string& what, std::uint64_t got, std::uint64_t want) {
  const std::string message = what + ": parameters hash to " + hex(got) + ", recorded " + hex(want);
  INFO(message);
  CHECK(got == want);
}

}  // namespace

// Runs that are the same computation end on the same bits, and share a constant: synchronous
// servers sum the workers' gradients in worker order as the ring does; accumulation is the same on
// either topology; one asynchronous worker is one worker; bounded staleness 0 is synchronous.
constexpr std::uint64_t two_synchronous_workers = 0x6ab6ab9d7c71f1e7ULL;
constexpr std::uint64_t one_worker = 0x90417915cc73c685ULL;
constexpr std::uint64_t two_workers_accumulating_2 = 0x89911533b3ce13dbULL;
constexpr std::uint64_t synchronous_adam_on_servers = 0xc400439e741c2bd5ULL;

TEST_CASE("reference runs: a synchronous ring, with and without overlap, ends on the recorded bits") {
  check_hash("ring, 2 workers, overlapped", run<MomentumModel, policy::Synchronous<>>(2, 1, Overlap::always),
             two_synchronous_workers);
  check_hash("ring, 2 workers, after backward", run<MomentumModel, policy::Synchronous<>>(2, 1, Overlap::never),
             two_synchronous_workers);
  check_hash("ring, 1 worker", run<MomentumModel, policy::Synchronous<>>(1), one_worker);
}

TEST_CASE("reference runs: codecs, error feedback and accumulation on the ring end on the recorded bits") {
  check_hash("ring, fp16 with error feedback, Adam",
             run<AdamModel, policy::Compressed<codec::Fp16, policy::Synchronous<>, true>>(2), 0x803202bfae1c9748ULL);
  check_hash("ring, bf16 without error feedback", run<MomentumModel, policy::Compressed<codec::Bf16>>(2),
             0xf5e677172c588a33ULL);
  check_hash("ring, accumulate 2", run<MomentumModel, policy::Accumulate<2>>(2), two_workers_accumulating_2);
  check_hash("ring, local SGD", run<MomentumModel, LocalSGD<2>>(2), 0xe008b16382bbd119ULL);
}

TEST_CASE("reference runs: parameter servers end on the recorded bits") {
  using SyncPs = policy::Synchronous<topology::ParameterServer>;
  check_hash("servers, synchronous, 2 workers x 2 servers", run<MomentumModel, SyncPs>(2, 2), two_synchronous_workers);
  check_hash("servers, synchronous, Adam, 2 x 1", run<AdamModel, SyncPs>(2, 1), synchronous_adam_on_servers);
  // Staleness 0 is synchronous training: one update per round, not one per push (Adam and the
  // schedule would tell them apart).
  check_hash("servers, bounded staleness 0, Adam, 2 x 1", run<AdamModel, policy::BoundedStaleness<0>>(2, 1),
             synchronous_adam_on_servers);
  check_hash("servers, synchronous, bf16 with error feedback, 2 x 2",
             run<MomentumModel, policy::Compressed<codec::Bf16, SyncPs, true>>(2, 2), 0x9106de5e5b29c278ULL);
  check_hash("servers, asynchronous, 1 worker x 2 servers",
             run<MomentumModel, policy::Asynchronous<topology::ParameterServer>>(1, 2), one_worker);
  check_hash("servers, accumulate 2, 2 x 2", run<MomentumModel, policy::Accumulate<2, SyncPs>>(2, 2),
             two_workers_accumulating_2);
}

TEST_CASE("reference runs: pipelines end on the recorded bits") {
  namespace pl = flotilla::pipeline;
  for (const std::size_t replicas : {1, 2}) {
    auto o = common<pl::TrainerOptions<AdamModel>>();
    o.micro_batches = 2;
    o.pipeline_schedule = pl::Schedule::one_forward_one_backward;
    o.replicas = replicas;
    pl::Trainer<AdamModel> t(pl::Plan::automatic<Net, float>(2), o);
    const History h = t.fit(train_set(), nullptr, flotilla_test::quiet(2));
    REQUIRE(h.size() == 2);
    CAPTURE(replicas);
    check_hash("pipeline, 2 stages", fnv1a(t.parameters()), replicas == 1 ? 0xace42fa15a700e87ULL : 0x66c2a13183116727ULL);
  }
}

namespace {

/// A job stopped after 5 updates with a checkpoint set, resumed by a new trainer from that set and
/// trained to the end of 2 epochs, against the same job run without a stop: the parameters must
/// agree bit for bit. With error feedback that holds only if each worker's residuals were saved
/// and taken back.
template <class M, class Policy>
void check_resume_is_seamless(std::size_t workers, std::size_t servers, const std::string& name) {
  auto o = common<TrainerOptions<M>>();
  o.workers = workers;
  o.servers = servers;
  Trainer<M, Policy> whole(o);
  whole.fit(train_set(), nullptr, flotilla_test::quiet(2));

  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_regression_resume_" + name);
  std::filesystem::remove_all(dir);
  FitOptions f = flotilla_test::quiet(2);
  f.checkpoints.directory = dir;
  f.checkpoints.every_steps = 2;
  f.max_steps = 5;  // stops inside the first epoch; the set at exit holds step 5
  Trainer<M, Policy> first(o);
  first.fit(train_set(), nullptr, f);
  REQUIRE(first.step() == 5);
  f.max_steps = 0;
  f.checkpoints.resume = true;
  Trainer<M, Policy> resumed(o);
  resumed.fit(train_set(), nullptr, f);
  std::filesystem::remove_all(dir);
  CHECK(resumed.step() == whole.step());
  const std::string message = name + ": resumed " + hex(fnv1a(resumed.parameters())) + ", never stopped " +
                              hex(fnv1a(whole.parameters()));
  INFO(message);
  CHECK(fnv1a(resumed.parameters()) == fnv1a(whole.parameters()));
}

}  // namespace

TEST_CASE("reference runs: with error feedback, a run resumed from a checkpoint set ends on the bits of one never stopped") {
  // The ring: every worker's residuals go into the set.
  check_resume_is_seamless<AdamModel, policy::Compressed<codec::Fp16, policy::Synchronous<>, true>>(2, 1, "ring_fp16");
  check_resume_is_seamless<MomentumModel, policy::Compressed<codec::Bf16Truncate, policy::Synchronous<>, true>>(
      3, 1, "ring_bf16_3");
  // Servers: the set holds worker 0's residuals, which is all of them with one worker.
  check_resume_is_seamless<MomentumModel,
                           policy::Compressed<codec::Bf16, policy::Synchronous<topology::ParameterServer>, true>>(
      1, 2, "servers_bf16");
  // A lossy codec without feedback: the resumed worker holds the parameters as its last pull gave
  // them, not the servers' full-precision values.
  check_resume_is_seamless<MomentumModel, policy::Compressed<codec::Bf16, policy::Synchronous<topology::ParameterServer>>>(
      1, 2, "servers_bf16_without_feedback");
  check_resume_is_seamless<MomentumModel, policy::Synchronous<topology::ParameterServer>>(2, 2, "servers_fp32");
}
