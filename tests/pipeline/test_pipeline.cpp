// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Pipelined training (include/flotilla/pipeline/): a step split across stages, micro-batches and
// replicas computes the gradients one worker computes on the whole batch; the automatic split is
// the optimum; bad plans and options are refused with messages that name the problem.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"

namespace pipeline_pipeline {

using namespace flotilla;
namespace pl = flotilla::pipeline;

namespace {

// Every kind of layer, Dropout included (its masks must not depend on the split): 8 layers.
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, double>;
constexpr std::uint64_t seed = 23;

/// Samples [first, first + n) of `d` as a batch of a global batch of `global` samples.
struct BatchHolder {
  std::vector<std::uint64_t> ids;
  data::Batch<double> batch;
  BatchHolder(const data::Dataset<double>& d, std::size_t first, std::size_t n, std::size_t global, std::uint64_t epoch = 3)
      : ids(n),
        batch{ConstMatrixView<double>(d.inputs.data() + 36 * first, 36, static_cast<Eigen::Index>(n)),
              Targets<double>{std::span<const std::int32_t>(d.labels).subspan(first, n)}, {}, epoch, 0, global} {
    std::iota(ids.begin(), ids.end(), std::uint64_t{first});
    batch.ids = ids;
  }
};

struct Reference {
  std::vector<double> params, grads;
  double loss = 0;
};

/// One worker, the whole batch [0, n): Network forward and backward with loss scale 1/n.
Reference reference(const data::Dataset<double>& d, std::size_t n) {
  Network<Net, double> net;
  Reference r;
  r.params.resize(Network<Net, double>::parameter_count);
  r.grads.assign(r.params.size(), 0.0);
  net.initialize(r.params, seed);
  BatchHolder h(d, 0, n, n);
  const auto out = net.forward(h.batch.inputs, r.params, RunInfo{Mode::train, h.batch.ids, seed, h.batch.epoch});
  Matrix<double> dout(out.rows(), out.cols());
  MatrixView<double> g(dout.data(), dout.rows(), dout.cols());
  r.loss = SoftmaxCrossEntropy::value_and_gradient(out, Targets<double>{h.batch.targets.labels}, g, 1.0 / static_cast<double>(n)) /
           static_cast<double>(n);
  net.backward(ConstMatrixView<double>(dout.data(), dout.rows(), dout.cols()), r.params, r.grads);
  return r;
}

struct Pipelined {
  std::vector<double> params, grads;  // assembled from every stage of replica 0
  std::vector<std::vector<double>> replica_grads;  // [replica] assembled
  double loss = 0;                    // replica-weighted mean over the last stages
  std::vector<pl::StageStats> stats;  // per rank
};

/// D replicas of the plan's pipeline on D x P in-process ranks, one step on batch [0, n): replica d
/// takes its contiguous share (as Loader shards a global batch).
Pipelined pipelined(const data::Dataset<double>& d, std::size_t n, const pl::Plan& plan, pl::RunnerOptions o) {
  const std::size_t P = plan.stages(), D = o.replicas;
  Pipelined r;
  r.params.assign(Network<Net, double>::parameter_count, 0.0);
  r.replica_grads.assign(D, std::vector<double>(r.params.size(), 0.0));
  r.stats.resize(P * D);
  std::mutex mutex;
  transport::InProcess::run({std::chrono::seconds(30)}, P * D, [&](transport::InProcessEndpoint& e) {
    pl::Runner<M, transport::InProcessEndpoint> runner(e, plan, o);
    const auto [first, end] = flotilla::detail::split_range(n, D, runner.replica());
    BatchHolder h(d, first, end - first, n);
    const StepResult s = runner.compute_gradients(h.batch);
    const std::lock_guard lock(mutex);
    auto p = runner.parameters();
    auto g = runner.gradients();
    std::copy(g.begin(), g.end(), r.replica_grads[runner.replica()].begin() + static_cast<std::ptrdiff_t>(runner.parameter_offset()));
    if (runner.replica() == 0) std::copy(p.begin(), p.end(), r.params.begin() + static_cast<std::ptrdiff_t>(runner.parameter_offset()));
    if (runner.last_stage()) r.loss += s.loss * static_cast<double>(s.samples) / static_cast<double>(n);
    r.stats[e.rank()] = runner.stats();
  });
  r.grads = r.replica_grads[0];
  return r;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    norm = std::max(norm, std::abs(b[i]));
  }
  return diff / norm;
}

const data::Dataset<double>& blobs() {
  static const auto d = flotilla_test::blobs<double>(64, 11);
  return d;
}

}  // namespace

TEST_CASE("pipeline: a stage's initial parameters are the whole network's slice") {
  const Reference ref = reference(blobs(), 12);
  for (std::size_t P : {2, 3, 4}) {
    const auto plan = pl::Plan::automatic<Net, double>(P);
    const auto r = pipelined(blobs(), 12, plan, {.micro_batches = 2, .max_batch = 12, .seed = seed});
    CHECK(r.params == ref.params);
  }
}

TEST_CASE("pipeline: gradients equal one worker's on the whole batch, for both schedules, P in {2,3,4}, several M") {
  const std::size_t n = 12;
  const Reference ref = reference(blobs(), n);
  double worst = 0;
  for (auto schedule : {pl::Schedule::fill_drain, pl::Schedule::one_forward_one_backward})
    for (std::size_t P : {2, 3, 4})
      for (std::size_t M : {1, 2, 3, 5, 12, 20}) {  // 5 does not divide 12; 20 > 12 is lowered to 12
        CAPTURE(P);
        CAPTURE(M);
        CAPTURE(pl::name(schedule));
        const auto plan = pl::Plan::automatic<Net, double>(P);
        const auto r = pipelined(blobs(), n, plan, {.schedule = schedule, .micro_batches = M, .max_batch = n, .seed = seed});
        const double diff = max_relative_difference(r.grads, ref.grads);
        worst = std::max(worst, diff);
        CHECK(diff < 1e-12);
        CHECK(r.loss == doctest::Approx(ref.loss).epsilon(1e-12));
      }
  MESSAGE("largest relative gradient difference over 36 configurations: " << worst);
}

TEST_CASE("pipeline: every cut of the network gives the same gradients (explicit cut points)") {
  const Reference ref = reference(blobs(), 10);
  for (std::size_t c = 1; c < Net::depth; ++c) {
    CAPTURE(c);
    const auto plan = pl::Plan::from_cuts<Net, double>({c});
    const auto r = pipelined(blobs(), 10, plan, {.micro_batches = 3, .max_batch = 10, .seed = seed});
    CHECK(max_relative_difference(r.grads, ref.grads) < 1e-12);
  }
  const auto all = pl::Plan::from_cuts<Net, double>({1, 2, 3, 4, 5, 6, 7});  // one layer per stage
  const auto r = pipelined(blobs(), 10, all, {.micro_batches = 4, .max_batch = 10, .seed = seed});
  CHECK(max_relative_difference(r.grads, ref.grads) < 1e-12);
}

TEST_CASE("pipeline: D x P hybrid equals one worker, and every replica ends with the same gradients") {
  for (std::size_t n : {12, 13}) {  // 13: the replicas' shares differ (7 and 6, or 5, 4, 4)
    const Reference ref = reference(blobs(), n);
    for (std::size_t D : {2, 3})
      for (std::size_t P : {2, 3}) {
        CAPTURE(n);
        CAPTURE(D);
        CAPTURE(P);
        const auto plan = pl::Plan::automatic<Net, double>(P);
        const auto r = pipelined(blobs(), n, plan, {.micro_batches = 3, .max_batch = 7, .replicas = D, .seed = seed});
        CHECK(max_relative_difference(r.grads, ref.grads) < 1e-12);
        for (std::size_t d = 1; d < D; ++d) CHECK(r.replica_grads[d] == r.replica_grads[0]);
        CHECK(r.loss == doctest::Approx(ref.loss).epsilon(1e-12));
      }
  }
}

TEST_CASE("pipeline: training steps with updates follow one worker's (SGD, 3 steps)") {
  const std::size_t n = 16, steps = 3;
  using MM = Model<Net, SoftmaxCrossEntropy, optim::Momentum, double>;
  optim::Momentum opt;
  opt.learning_rate = 0.1;
  // One worker.
  Network<Net, double> net;
  std::vector<double> p(Network<Net, double>::parameter_count), g(p.size());
  net.initialize(p, seed);
  optim::Momentum::state<double> st(p.size());
  for (std::size_t k = 0; k < steps; ++k) {
    BatchHolder h(blobs(), k * n, n, n, k);
    std::fill(g.begin(), g.end(), 0.0);
    const auto out = net.forward(h.batch.inputs, p, RunInfo{Mode::train, h.batch.ids, seed, h.batch.epoch});
    Matrix<double> dout(out.rows(), out.cols());
    MatrixView<double> gv(dout.data(), dout.rows(), dout.cols());
    SoftmaxCrossEntropy::value_and_gradient(out, Targets<double>{h.batch.targets.labels}, gv, 1.0 / n);
    net.backward(ConstMatrixView<double>(dout.data(), dout.rows(), dout.cols()), p, g);
    opt.update(std::span<double>(p), std::span<const double>(g), st, Network<Net, double>::tensors, StepInfo{k + 1, 0.1});
  }
  // Three stages, 1F1B, four micro-batches.
  std::vector<double> q(p.size());
  std::mutex mutex;
  transport::InProcess::run({}, 3, [&](transport::InProcessEndpoint& e) {
    pl::Runner<MM, transport::InProcessEndpoint> r(e, pl::Plan::automatic<Net, double>(3), {.micro_batches = 4, .max_batch = n, .seed = seed});
    optim::Momentum::state<double> s(r.parameters().size());
    for (std::size_t k = 0; k < steps; ++k) {
      BatchHolder h(blobs(), k * n, n, n, k);
      r.compute_gradients(h.batch);
      r.update(opt, s, StepInfo{k + 1, 0.1});
    }
    const std::lock_guard lock(mutex);
    std::copy(r.parameters().begin(), r.parameters().end(), q.begin() + static_cast<std::ptrdiff_t>(r.parameter_offset()));
  });
  CHECK(max_relative_difference(q, p) < 1e-12);
}

TEST_CASE("pipeline: evaluation through the stages counts what one network counts") {
  const auto& d = blobs();
  Network<Net, double> net;
  std::vector<double> p(Network<Net, double>::parameter_count);
  net.initialize(p, seed);
  const auto out = net.forward(ConstMatrixView<double>(d.inputs.data(), 36, 50), p);
  std::size_t correct = 0;
  for (Eigen::Index s = 0; s < 50; ++s) {
    Eigen::Index i = 0;
    out.col(s).maxCoeff(&i);
    correct += static_cast<std::int32_t>(i) == d.labels[static_cast<std::size_t>(s)];
  }
  const double loss = SoftmaxCrossEntropy::value(out, Targets<double>{std::span<const std::int32_t>(d.labels).first(50)});
  pl::EvaluationCounts last;
  transport::InProcess::run({}, 3, [&](transport::InProcessEndpoint& e) {
    pl::Runner<M, transport::InProcessEndpoint> r(e, pl::Plan::automatic<Net, double>(3), {.micro_batches = 4, .max_batch = 16, .seed = seed});
    const auto c = r.evaluate(d, 0, 50);
    if (r.last_stage()) last = c;
    else CHECK(c.samples == 0);
  });
  CHECK(last.samples == 50);
  CHECK(last.correct == correct);
  CHECK(last.loss_sum == doctest::Approx(loss).epsilon(1e-12));
}

TEST_CASE("pipeline: activations held per stage: fill-drain holds M micro-batches, 1F1B at most P - s") {
  const std::size_t n = 16, P = 4, Mb = 8;  // micro-batches of 2 samples
  const auto plan = pl::Plan::from_cuts<Net, double>({2, 4, 6});
  for (auto schedule : {pl::Schedule::fill_drain, pl::Schedule::one_forward_one_backward}) {
    const auto r = pipelined(blobs(), n, plan, {.schedule = schedule, .micro_batches = Mb, .max_batch = n, .seed = seed});
    for (std::size_t s = 0; s < P; ++s) {
      CAPTURE(s);
      // One micro-batch's bytes at stage s: its layers' outputs, and its received input after stage 0.
      std::size_t values = s > 0 ? Network<Net, double>::input_sizes[plan.first_layer(s)] : 0;
      for (std::size_t i = plan.first_layer(s); i < plan.end_layer(s); ++i) values += Network<Net, double>::output_sizes[i];
      const std::size_t per_micro = values * (n / Mb) * sizeof(double);
      const std::size_t held = pl::max_in_flight(schedule, P, s, Mb);
      CHECK(held == (schedule == pl::Schedule::fill_drain ? Mb : P - s));
      CHECK(r.stats[s].peak_activation_bytes == held * per_micro);
      CHECK(r.stats[s].allocated_activation_bytes == held * per_micro);
    }
  }
}

TEST_CASE("pipeline: schedules run each micro-batch's forward before its backward, in order") {
  for (auto schedule : {pl::Schedule::fill_drain, pl::Schedule::one_forward_one_backward})
    for (std::size_t P = 1; P <= 5; ++P)
      for (std::size_t s = 0; s < P; ++s)
        for (std::size_t m = 1; m <= 9; ++m) {
          const auto ops = pl::schedule_ops(schedule, P, s, m);
          REQUIRE(ops.size() == 2 * m);
          std::size_t next_f = 0, next_b = 0, in_flight = 0, most = 0;
          for (const auto& op : ops) {
            if (op.kind == pl::Op::forward) {
              CHECK(op.micro_batch == next_f++);
              most = std::max(most, ++in_flight);
            } else {
              CHECK(op.micro_batch == next_b++);
              CHECK(next_b <= next_f);
              --in_flight;
            }
          }
          CHECK(most == pl::max_in_flight(schedule, P, s, m));
        }
  CHECK(pl::theoretical_bubble(4, 12) == doctest::Approx(3.0 / 15.0));
  CHECK_THROWS_WITH_AS(pl::schedule_ops(pl::Schedule::fill_drain, 2, 2, 4), doctest::Contains("stage 2 of a 2-stage"), ConfigError);
}

// ---- the automatic split ----------------------------------------------------------------------

namespace {
/// Every split of costs into P non-empty contiguous stages: the optimum, and the lexicographically
/// smallest bounds that reach it.
std::pair<std::uint64_t, std::vector<std::size_t>> brute_force(const std::vector<std::uint64_t>& costs, std::size_t P) {
  const std::size_t n = costs.size();
  std::uint64_t best = ~std::uint64_t{0};
  std::vector<std::size_t> best_bounds;
  // Cut sets are subsets of {1..n-1} of size P-1, enumerated by bitmask in lexicographic order of
  // the cut vectors when compared below.
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (n - 1)); ++mask) {
    if (static_cast<std::size_t>(__builtin_popcountll(mask)) != P - 1) continue;
    std::vector<std::size_t> b{0};
    for (std::size_t i = 1; i < n; ++i)
      if (mask >> (i - 1) & 1) b.push_back(i);
    b.push_back(n);
    const std::uint64_t c = pl::max_stage_cost(costs, b);
    if (c < best || (c == best && b < best_bounds)) {
      best = c;
      best_bounds = b;
    }
  }
  return {best, best_bounds};
}
}  // namespace

TEST_CASE("pipeline: the automatic split is the optimum (factor 1), the earliest of equal ones, by brute force") {
  Generator g(5);
  std::size_t cases = 0;
  for (std::size_t n = 1; n <= 10; ++n)
    for (std::size_t P = 1; P <= n; ++P)
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<std::uint64_t> costs(n);
        // Small ranges make ties common: the tie-break is tested too.
        for (auto& c : costs) c = trial % 2 ? g.below(4) : 1 + g.below(1000);
        const auto [best, bounds] = brute_force(costs, P);
        const pl::Split s = pl::balance(costs, P);
        CAPTURE(n);
        CAPTURE(P);
        CHECK(s.max_stage_cost == best);
        CHECK(pl::max_stage_cost(costs, s.bounds) == best);
        CHECK(s.bounds == bounds);
        CHECK(pl::balance(costs, P).bounds == s.bounds);  // deterministic
        ++cases;
      }
  MESSAGE(cases << " cost vectors checked against every split");
}

TEST_CASE("pipeline: the compile-time split equals the run-time one, and the plan prints it") {
  using CNN = Sequential<Input<1, 28, 28>, Conv2D<32, 5>, ReLU, MaxPool2D<2>, Conv2D<64, 5>, ReLU, MaxPool2D<2>, Flatten, Dense<10>>;
  constexpr auto b = pl::balanced_bounds<CNN, 3>();
  const auto plan = pl::Plan::automatic<CNN>(3);
  CHECK(std::vector<std::size_t>(b.begin(), b.end()) == plan.bounds());
  // The estimates are exact for these layers: 2 * 64 * (5 * 5 * 32) * (8 * 8) forward FLOPs.
  CHECK(pl::estimated_costs<CNN>[3].forward_flops == 2ull * 64 * 800 * 64);
  CHECK(pl::estimated_costs<CNN>[7].forward_flops == 2ull * 1024 * 10);
  const std::string text = plan.describe();
  CHECK(text.find("3 stage(s) over 8 layers") != std::string::npos);
  CHECK(text.find("Conv2D ReLU MaxPool2D") != std::string::npos);
  // Measured costs make a valid plan (their values depend on the machine; not checked).
  const auto measured = pl::measure_layer_costs<Net, double>(8, 1);
  CHECK(measured.size() == Net::depth);
  CHECK(pl::Plan::automatic<Net, double>(3, measured).stages() == 3);
}

TEST_CASE("pipeline: Stage markers in the type split there, and compute what the unsplit network does") {
  using Marked = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, pl::Stage, MaxPool2D<2>, Flatten, Dense<10>, Tanh, pl::Stage, Dense<3>>;
  using MM = Model<Marked, SoftmaxCrossEntropy, optim::SGD, double>;
  static_assert(pl::StageMarkers<Marked>::count == 2);
  const auto plan = pl::Plan::from_markers<Marked, double>();
  CHECK(plan.bounds() == std::vector<std::size_t>{0, 2, 7, 9});
  CHECK(pl::Plan::for_network<Marked, double>(3).bounds() == plan.bounds());
  CHECK_THROWS_WITH_AS((pl::Plan::for_network<Marked, double>(2)), doctest::Contains("2 pipeline::Stage markers make 3"), ConfigError);
  // Unsplit reference with the markers (identity layers) in place.
  const std::size_t n = 9;
  Network<Marked, double> net;
  std::vector<double> p(Network<Marked, double>::parameter_count), g(p.size(), 0.0);
  net.initialize(p, seed);
  BatchHolder h(blobs(), 0, n, n);
  const auto out = net.forward(h.batch.inputs, p, RunInfo{Mode::train, h.batch.ids, seed, h.batch.epoch});
  Matrix<double> dout(out.rows(), out.cols());
  MatrixView<double> gv(dout.data(), dout.rows(), dout.cols());
  SoftmaxCrossEntropy::value_and_gradient(out, Targets<double>{h.batch.targets.labels}, gv, 1.0 / n);
  net.backward(ConstMatrixView<double>(dout.data(), dout.rows(), dout.cols()), p, g);
  std::vector<double> q(p.size());
  std::mutex mutex;
  transport::InProcess::run({}, 3, [&](transport::InProcessEndpoint& e) {
    pl::Runner<MM, transport::InProcessEndpoint> r(e, plan, {.micro_batches = 2, .max_batch = n, .seed = seed});
    r.compute_gradients(h.batch);
    const std::lock_guard lock(mutex);
    std::copy(r.gradients().begin(), r.gradients().end(), q.begin() + static_cast<std::ptrdiff_t>(r.parameter_offset()));
  });
  CHECK(max_relative_difference(q, g) < 1e-12);
}

// ---- bad input ---------------------------------------------------------------------------------

TEST_CASE("pipeline: bad plans and options are refused with a message naming the problem") {
  CHECK_THROWS_WITH_AS(pl::Plan::automatic<Net>(0), doctest::Contains("at least one stage"), ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::automatic<Net>(9), doctest::Contains("9 stages were asked for, but the network has 8 layers"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::from_cuts<Net>({3, 9}), doctest::Contains("cut point 1 is 9, outside [1, 7]"), ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::from_cuts<Net>({0, 3}), doctest::Contains("cut point 0 is 0, outside [1, 7]"), ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::from_cuts<Net>({5, 3}), doctest::Contains("must increase strictly, but cut point 1 is 3 after 5"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::from_cuts<Net>({3, 3}), doctest::Contains("cut point 1 is 3 after 3"), ConfigError);
  CHECK_THROWS_WITH_AS(pl::Plan::from_cuts<Net>({1, 2, 3, 4, 5, 6, 7, 7}), doctest::Contains("9 stages"), ConfigError);
  const std::vector<std::uint64_t> three{1, 2, 3};
  CHECK_THROWS_WITH_AS(pl::Plan::automatic<Net>(2, three), doctest::Contains("3 layer costs given for a network of 8 layers"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(pl::StageNetwork<Net>(4, 4, 8), doctest::Contains("not a non-empty range"), ConfigError);

  // A job whose size is not stages x replicas.
  CHECK_THROWS_WITH_AS(transport::InProcess::run({}, 3,
                                                 [](transport::InProcessEndpoint& e) {
                                                   pl::Runner<M, transport::InProcessEndpoint> r(e, pl::Plan::automatic<Net, double>(2), {});
                                                 }),
                       doctest::Contains("the job has 3 ranks, but 2 stages x 1 replicas need 2"), ConfigError);
  // Ranks given different plans: the second stage names both.
  CHECK_THROWS_WITH_AS(transport::InProcess::run({std::chrono::seconds(10)}, 2,
                                                 [](transport::InProcessEndpoint& e) {
                                                   const std::size_t cut = e.rank() == 0 ? 3 : 4;
                                                   pl::Runner<M, transport::InProcessEndpoint> r(e, pl::Plan::from_cuts<Net, double>({cut}), {});
                                                 }),
                       doctest::Contains("every rank needs the same plan and options"), ConfigError);
  // A batch larger than the buffers were sized for.
  CHECK_THROWS_WITH_AS(transport::InProcess::run({std::chrono::seconds(10)}, 2,
                                                 [](transport::InProcessEndpoint& e) {
                                                   pl::Runner<M, transport::InProcessEndpoint> r(e, pl::Plan::automatic<Net, double>(2),
                                                                                                 {.max_batch = 4});
                                                   BatchHolder h(blobs(), 0, 5, 5);
                                                   r.compute_gradients(h.batch);
                                                 }),
                       doctest::Contains("a batch of 5 samples, but RunnerOptions.max_batch is 4"), ConfigError);
  CHECK_THROWS_WITH_AS(transport::InProcess::run({}, 1,
                                                 [](transport::InProcessEndpoint& e) {
                                                   pl::Runner<M, transport::InProcessEndpoint> r(e, pl::Plan::automatic<Net, double>(1),
                                                                                                 {.micro_batches = 0});
                                                 }),
                       doctest::Contains("micro_batches must be > 0"), ConfigError);
}

namespace {
/// A user layer that states its own cost.
struct Costly {
  template <class In, class T>
  struct layer {
    using scalar_type = T;
    using input_shape = In;
    using output_shape = In;
    static constexpr std::string_view name = "Costly";
    static constexpr std::size_t parameter_count = 0;
    static constexpr std::uint64_t forward_flops = 1000000;
    void forward(const ForwardArgs<T>& a) { a.output = a.input; }
    void backward(const BackwardArgs<T>& a) {
      if (a.wants_input_grad()) a.input_grad = a.output_grad;
    }
  };
};
}  // namespace

TEST_CASE("pipeline: a layer's own forward_flops replaces the estimate, and the split follows it") {
  using Custom = Sequential<Input<4>, Dense<4>, Costly, Dense<4>, Dense<4>>;
  CHECK(pl::estimated_costs<Custom>[1].forward_flops == 1000000);
  CHECK(pl::estimated_costs<Custom>[1].backward_flops == 1000000);
  CHECK(pl::estimated_costs<Custom>[0].forward_flops == 2 * 4 * 4);
  // Dense + Costly (2000096) against Dense + Dense (192) beats Dense (96) against the rest (2000192).
  CHECK(pl::Plan::automatic<Custom>(2).bounds() == std::vector<std::size_t>{0, 2, 4});
}

}  // namespace pipeline_pipeline
