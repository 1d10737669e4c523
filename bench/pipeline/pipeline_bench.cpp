// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla_pipeline_bench: pipelined training's bubble, throughput and activation memory, against
// the theory and against the unsplit model in the same run. Stages are threads of this process
// (in-process transport), one rank each; the data are random (these figures do not depend on it).
//
//   flotilla_pipeline_bench [--model uniform|cnn] [--stage-counts 2,4] [--micro-batch-counts 1,2,4,8,16]
//                           [--batch 256] [--steps 20] [--warmup 3] [--repeat 3]
//
// For each stage count P, micro-batch count M and schedule (GPipe fill-drain, 1F1B), one row:
//  - theory: the bubble of equal stages with free communication, (P - 1) / (M + P - 1);
//  - bubble (replay): idle time by per-stage accounting. Every forward and backward is timed with
//    the thread's CPU clock, which counts only the time the stage computed, not the time it waited
//    for a core it shares with other stages (a 2-core machine runs 4 stages on 2 cores). The step
//    is then replayed with those durations and its real dependencies (a forward needs the previous
//    stage's forward of the micro-batch, a backward the next stage's backward), each stage on a
//    core of its own and communication free: bubble = 1 - sum(busy) / (P x makespan). It includes
//    what the theory leaves out: unequal stages and micro-batches that run slower for being small;
//  - wall idle: the mean over stages of (time blocked receiving) / (step time), by the wall clock:
//    the same quantity as the replay where every stage has a core, inflated where they share;
//  - samples/s of the pipeline, and its ratio to the unsplit model (one rank, one batch, same code)
//    measured in turns with it (--repeat turns; medians);
//  - replayed speed-up: the unsplit step's compute time over the replayed step's makespan, what P
//    cores of their own would give if communication were free;
//  - peak activation KiB per stage: the bytes of activations held for backward at once
//    (Runner::stats().peak_activation_bytes): M micro-batches under fill-drain, at most P - s
//    under 1F1B.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "../common/bench_common.hpp"

namespace pl = flotilla::pipeline;

namespace {

using Uniform = flotilla::Sequential<flotilla::Input<512>, flotilla::Dense<512>, flotilla::ReLU, flotilla::Dense<512>, flotilla::ReLU,
                                     flotilla::Dense<512>, flotilla::ReLU, flotilla::Dense<512>, flotilla::ReLU, flotilla::Dense<512>,
                                     flotilla::ReLU, flotilla::Dense<512>, flotilla::ReLU, flotilla::Dense<512>, flotilla::ReLU,
                                     flotilla::Dense<512>, flotilla::ReLU>;
using UniformModel = flotilla::Model<Uniform, flotilla::MSE, flotilla::optim::SGD>;
using CnnModel = flotilla::Model<bench::CnnNet, flotilla::SoftmaxCrossEntropy, flotilla::optim::SGD>;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The replayed bubble and makespan of one step from each stage's ops (in the order run) and their
/// durations.
std::pair<double, double> replay(const std::vector<std::vector<pl::OpRecord>>& ops) {
  const std::size_t P = ops.size(), M = ops[0].size() / 2;
  // end time of F and B of (stage, micro-batch); -1 = not yet
  std::vector<std::vector<double>> f(P, std::vector<double>(M, -1)), b(P, std::vector<double>(M, -1));
  std::vector<std::size_t> next(P, 0);
  std::vector<double> free_at(P, 0);
  double busy = 0, makespan = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t s = 0; s < P; ++s) {
      while (next[s] < ops[s].size()) {
        const auto& r = ops[s][next[s]];
        const std::size_t m = r.op.micro_batch;
        double ready = 0;
        if (r.op.kind == pl::Op::forward) {
          if (s > 0 && f[s - 1][m] < 0) break;
          ready = s > 0 ? f[s - 1][m] : 0;
        } else {
          if (s + 1 < P && b[s + 1][m] < 0) break;
          ready = s + 1 < P ? b[s + 1][m] : f[s][m];
        }
        const double d = r.end - r.start, start = std::max(ready, free_at[s]);
        free_at[s] = start + d;
        (r.op.kind == pl::Op::forward ? f : b)[s][m] = free_at[s];
        busy += d;
        makespan = std::max(makespan, free_at[s]);
        ++next[s];
        progress = true;
      }
    }
  }
  return {1.0 - busy / (static_cast<double>(P) * makespan), makespan};
}

struct Row {
  double replay_bubble = 0, replay_makespan = 0, wall_idle = 0, samples_per_second = 0;
  std::vector<std::size_t> peak_bytes;
};

template <class M>
Row run(std::size_t P, std::size_t micro, pl::Schedule schedule, std::size_t batch, std::size_t steps, std::size_t warmup) {
  using T = float;
  constexpr std::size_t in = M::input_shape::size, out = M::output_shape::size;
  flotilla::Generator g(7);
  flotilla::Matrix<T> x(static_cast<Eigen::Index>(in), static_cast<Eigen::Index>(batch));
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = g.normal<T>();
  flotilla::Matrix<T> y(static_cast<Eigen::Index>(out), static_cast<Eigen::Index>(batch));
  for (Eigen::Index i = 0; i < y.size(); ++i) y.data()[i] = g.normal<T>();
  std::vector<std::int32_t> labels(batch);
  for (auto& l : labels) l = static_cast<std::int32_t>(g.below(out));
  std::vector<std::uint64_t> ids(batch);
  std::iota(ids.begin(), ids.end(), std::uint64_t{0});
  const auto targets = [&] {
    if constexpr (M::loss::target == flotilla::TargetKind::labels)
      return flotilla::Targets<T>{labels};
    else
      return flotilla::Targets<T>{{}, flotilla::ConstMatrixView<T>(y.data(), y.rows(), y.cols())};
  }();
  const flotilla::data::Batch<T> b{flotilla::ConstMatrixView<T>(x.data(), x.rows(), x.cols()), targets, ids, 0, 0, batch};

  Row row;
  row.peak_bytes.resize(P);
  std::vector<std::vector<pl::OpRecord>> logs(P);
  std::vector<double> idle(P);
  double seconds = 0;
  const auto plan = pl::Plan::automatic<typename M::architecture>(P);
  flotilla::transport::InProcess::run({}, P, [&](flotilla::transport::InProcessEndpoint& e) {
    pl::Runner<M, flotilla::transport::InProcessEndpoint> r(
        e, plan, {.schedule = schedule, .micro_batches = micro, .max_batch = batch, .seed = 1, .record_ops = true, .clock = &thread_cpu_seconds});
    for (std::size_t k = 0; k < warmup; ++k) r.compute_gradients(b);
    e.barrier();
    r.reset_stats();
    const double t0 = bench::now_seconds();
    for (std::size_t k = 0; k < steps; ++k) r.compute_gradients(b);
    e.barrier();
    if (e.rank() == 0) seconds = bench::now_seconds() - t0;
    logs[e.rank()] = r.op_log();
    idle[e.rank()] = r.stats().wait_seconds / r.stats().step_seconds;
    row.peak_bytes[e.rank()] = r.stats().peak_activation_bytes;
  });
  const std::size_t per_step = 2 * std::min(micro, batch);
  double bubble = 0, makespan = 0;
  for (std::size_t k = 0; k < steps; ++k) {
    std::vector<std::vector<pl::OpRecord>> step(P);
    for (std::size_t s = 0; s < P; ++s)
      step[s].assign(logs[s].begin() + static_cast<std::ptrdiff_t>(k * per_step), logs[s].begin() + static_cast<std::ptrdiff_t>((k + 1) * per_step));
    const auto [b_k, m_k] = replay(step);
    bubble += b_k;
    makespan += m_k;
  }
  row.replay_bubble = bubble / static_cast<double>(steps);
  row.replay_makespan = makespan / static_cast<double>(steps);
  row.wall_idle = std::accumulate(idle.begin(), idle.end(), 0.0) / static_cast<double>(P);
  row.samples_per_second = static_cast<double>(steps * batch) / seconds;
  return row;
}

std::vector<std::size_t> parse_list(const std::string& text) {
  std::vector<std::size_t> r;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    r.push_back(std::stoul(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class M>
void table(const std::vector<std::size_t>& stages, const std::vector<std::size_t>& micros, std::size_t batch, std::size_t steps,
           std::size_t warmup, std::size_t repeat) {
  for (std::size_t P : stages) std::printf("%s", pl::Plan::automatic<typename M::architecture>(P).describe().c_str());
  std::printf("| P | M | schedule | theory | bubble (replay) | wall idle | samples/s | unsplit samples/s | vs unsplit | replayed speed-up | peak activation KiB per stage |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t P : stages)
    for (std::size_t micro : micros)
      for (auto schedule : {pl::Schedule::fill_drain, pl::Schedule::one_forward_one_backward}) {
        // The unsplit model and the pipeline take turns, so that both see the same load; the
        // medians of `repeat` turns are reported, the ratio being the median of the turns' ratios.
        std::vector<double> rate, base, ratio, replayed, bubble, idle;
        Row r;
        for (std::size_t k = 0; k < repeat; ++k) {
          const Row u = run<M>(1, 1, pl::Schedule::fill_drain, batch, steps, warmup);
          r = run<M>(P, micro, schedule, batch, steps, warmup);
          rate.push_back(r.samples_per_second);
          base.push_back(u.samples_per_second);
          ratio.push_back(r.samples_per_second / u.samples_per_second);
          replayed.push_back(u.replay_makespan / r.replay_makespan);
          bubble.push_back(r.replay_bubble);
          idle.push_back(r.wall_idle);
        }
        std::string peaks;
        for (std::size_t s = 0; s < P; ++s) peaks += (s ? " / " : "") + std::to_string(r.peak_bytes[s] / 1024);
        std::printf("| %zu | %zu | %s | %.3f | %.3f | %.3f | %.0f | %.0f | %.2fx | %.2fx | %s |\n", P, micro,
                    std::string(pl::name(schedule)).c_str(), pl::theoretical_bubble(P, micro), median(bubble), median(idle),
                    median(rate), median(base), median(ratio), median(replayed), peaks.c_str());
        std::fflush(stdout);
      }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("flotilla_pipeline_bench",
                               "pipeline bubble, throughput and activation memory (medians of --repeat runs)");
    auto& model = flags.add<std::string>("model", "uniform", "uniform (8 x Dense<512> + ReLU, equal stages) or cnn");
    auto& stages = flags.add<std::string>("stage-counts", "2,4", "stage counts P, comma-separated");
    auto& micro = flags.add<std::string>("micro-batch-counts", "1,2,4,8,16", "micro-batch counts M, comma-separated");
    auto& batch = flags.add<std::size_t>("batch", 256, example::flag_help::batch);
    auto& steps = flags.add<std::size_t>("steps", 20, example::flag_help::steps);
    auto& warmup = flags.add<std::size_t>("warmup", 3, example::flag_help::warmup);
    auto& repeat = flags.add<std::size_t>("repeat", 3, example::flag_help::repeat);
    flags.at_least("batch", 1);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    if (model == "uniform")
      table<UniformModel>(parse_list(stages), parse_list(micro), batch, steps, warmup, repeat);
    else if (model == "cnn")
      table<CnnModel>(parse_list(stages), parse_list(micro), batch, steps, warmup, repeat);
    else
      throw flotilla::ConfigError("--model: expected uniform or cnn, not '" + model + "'");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
