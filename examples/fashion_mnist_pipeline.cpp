// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The Fashion-MNIST CNN of fashion_mnist_cnn.cpp, split into pipeline stages that run on threads of
// this process (one rank each) and pass activations forward and gradients back in micro-batches:
//
//   fashion_mnist_pipeline --stages 2                     # automatic split, 1F1B, 4 micro-batches
//   fashion_mnist_pipeline --stages 3 --pipeline-schedule gpipe --micro-batches 8
//   fashion_mnist_pipeline --stages 2 --cuts 4            # stage 1 starts at layer 4 (ReLU)
//   fashion_mnist_pipeline --stages 2 --replicas 2        # 2 x 2 ranks: pipeline + data parallel
//   fashion_mnist_pipeline --stages 3 --timed --plan-only # split by measured layer times, print it
//   fashion_mnist_pipeline --stages 3 --trace t.json --max-steps 100
//                                                         # the schedule on a timeline (chrome://tracing,
//                                                         # ui.perfetto.dev); scripts/merge_traces.py
//                                                         # --summary prints each rank's shares
//   fashion_mnist_pipeline --stages 2 --checkpoint-dir sets --checkpoint-every 200 --resume
//                                                         # a set every 200 updates; a restarted
//                                                         # run goes on from the newest
//
// Same settings as the unsplit example: Adam, lr 1e-3 cosine-annealed to 0, batch 64, standardised
// inputs, seed 1. pipeline::Trainer runs the loop (every rank a thread) and reports like Trainer;
// a step computes what the unsplit network's does (tests/pipeline), so the curves differ from
// fashion_mnist_cnn's only by the order of float sums.
#include <flotilla/flotilla.hpp>

#include "checkpoint_flags.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace fm = flotilla::data::fashion_mnist;
namespace pl = flotilla::pipeline;

using Net = flotilla::Sequential<flotilla::Input<1, 28, 28>,                                 //
                                 flotilla::Conv2D<32, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Conv2D<64, 5>, flotilla::ReLU, flotilla::MaxPool2D<2>,  //
                                 flotilla::Flatten, flotilla::Dense<10>>;
using Model = flotilla::Model<Net, flotilla::SoftmaxCrossEntropy, flotilla::optim::Adam>;

static std::vector<std::size_t> parse_cuts(const std::string& text) {
  std::vector<std::size_t> cuts;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    cuts.push_back(flotilla::cli::detail::parse_value<std::size_t>("cuts", text.substr(at, comma - at)));
    at = comma + 1;
  }
  return cuts;
}

int main(int argc, char** argv) {
  try {
    flotilla::cli::Flags flags("fashion_mnist_pipeline",
                               "train the Fashion-MNIST CNN (Adam, cosine-annealed) split into pipeline stages");
    auto& data_dir = flags.add<std::filesystem::path>("data", fm::default_directory(), example::flag_help::data,
                                                      "FLOTILLA_FASHION_MNIST");
    auto& stages = flags.add<std::size_t>("stages", 2, "pipeline stages (P)");
    auto& replicas = flags.add<std::size_t>("replicas", 1,
                                            "pipeline replicas, data parallel (D): the workers of --batch; D x P ranks in all");
    auto& micro = flags.add<std::size_t>("micro-batches", 4, "micro-batches per step (M)");
    auto& schedule_name = flags.add<std::string>("pipeline-schedule", "1f1b", "1f1b or gpipe (fill-drain)");
    auto& cuts_text = flags.add<std::string>("cuts", "", "explicit cut points, e.g. 3,6 (default: automatic split)");
    auto& timed = flags.add<bool>("timed", false, "split by measured layer times instead of estimated FLOPs");
    auto& plan_only = flags.add<bool>("plan-only", false, "print the plan and exit");
    auto& epochs = flags.add<std::size_t>("epochs", 5, example::flag_help::epochs);
    auto& batch = flags.add<std::size_t>("batch", 64, example::flag_help::batch);
    auto& lr = flags.add<double>("lr", 1e-3, example::flag_help::lr);
    auto& seed = flags.add<std::uint64_t>("seed", 1, example::flag_help::seed);
    auto& metrics = flags.add<std::filesystem::path>("metrics", "", example::flag_help::metrics);
    auto& trace = flags.add<std::filesystem::path>("trace", "", example::flag_help::trace);
    auto& step_log = flags.add<std::filesystem::path>("step-log", "", example::flag_help::step_log);
    auto& max_steps = flags.add<std::size_t>("max-steps", 0, example::flag_help::max_steps);
    const example::CheckpointFlags checkpoint_flags = example::add_checkpoint_flags(flags);
    flags.at_least("stages", 1).at_least("replicas", 1).at_least("micro-batches", 1).at_least("epochs", 1);
    flags.at_least("batch", 1).above("lr", 0);
    if (!flags.parse(argc, argv, std::cout)) return 0;
    const flotilla::CheckpointPolicy checkpoints = checkpoint_flags.policy();
    if (schedule_name != "1f1b" && schedule_name != "gpipe")
      throw flotilla::ConfigError("--pipeline-schedule: expected 1f1b or gpipe, not '" + schedule_name + "'");
    const auto schedule = schedule_name == "gpipe" ? pl::Schedule::fill_drain : pl::Schedule::one_forward_one_backward;

    std::vector<std::uint64_t> costs;
    if (timed) costs = pl::measure_layer_costs<Net>(batch / micro > 0 ? batch / micro : 1);
    const pl::Plan plan = cuts_text.empty() ? pl::Plan::automatic<Net>(stages, costs, "measured ns per micro-batch")
                                            : pl::Plan::from_cuts<Net>(parse_cuts(cuts_text), costs);
    if (plan.stages() != stages)
      throw flotilla::ConfigError("--cuts gives " + std::to_string(plan.stages()) + " stages, --stages says " + std::to_string(stages));
    std::printf("%s", plan.describe().c_str());
    if (plan_only) return 0;

    std::printf("loading Fashion-MNIST from %s\n", data_dir.string().c_str());
    auto train = fm::load<float>(fm::Split::train, data_dir);
    auto test = fm::load<float>(fm::Split::test, data_dir);
    const float mean = train.inputs.mean();
    const float stddev = std::sqrt((train.inputs.array() - mean).square().mean());
    for (auto* d : {&train, &test}) d->inputs = (d->inputs.array() - mean) / stddev;
    std::printf("%zu stages x %zu replicas, %s, %zu micro-batches of a %zu-sample batch\n", stages, replicas,
                std::string(pl::name(schedule)).c_str(), micro, batch);

    pl::TrainerOptions<Model> options;
    options.optimizer.learning_rate = lr;
    const std::size_t steps_per_epoch = (train.size() + batch * replicas - 1) / (batch * replicas);
    options.schedule = flotilla::schedule::Cosine{.total = epochs * steps_per_epoch, .min_factor = 0.0, .warmup = 0};
    options.batch_size = batch;
    options.seed = seed;
    options.micro_batches = micro;
    options.pipeline_schedule = schedule;
    options.replicas = replicas;
    pl::Trainer<Model> trainer(plan, options);
    flotilla::FitOptions fit;
    fit.epochs = epochs;
    fit.metrics_file = metrics;
    fit.trace_file = trace;
    fit.step_log_file = step_log;
    fit.max_steps = max_steps;
    fit.checkpoints = checkpoints;
    example::UnsavedSets unsaved;
    example::fit_noting_unsaved(trainer, unsaved, train, &test, fit);

    std::printf("\nper rank, whole run: compute s, waiting for a neighbour s, peak activation MiB\n");
    const auto& stats = trainer.stage_stats();
    for (std::size_t r = 0; r < stats.size(); ++r)
      std::printf("  rank %zu (replica %zu, stage %zu): %.1f, %.1f, %.2f\n", r, r / stages, r % stages, stats[r].compute_seconds,
                  stats[r].wait_seconds, static_cast<double>(stats[r].peak_activation_bytes) / (1 << 20));
    std::fflush(stdout);  // the report before the error, when both go to one terminal
    return unsaved.exit_status(0);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return 1;
  }
}
