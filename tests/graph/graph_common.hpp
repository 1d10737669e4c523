// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
// What the graph tests share: comparing parameter vectors, and the bit-for-bit resume check.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "../common/quiet_fit.hpp"
#include "flotilla/flotilla.hpp"

namespace graph_test {

/// max |a - b| / max |a|.
template <class T>
double relative_difference(std::span<const T> a, std::span<const T> b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    norm = std::max(norm, std::abs(static_cast<double>(a[i])));
  }
  return diff / norm;
}

/// What the equivalence runs of the graph tests vary.
struct TrainRun {
  std::size_t batch = 12, workers = 1, threads = 1, epochs = 1, max_steps = 0;
  double weight_decay = 0;
};

/// The parameters after Trainer<M, P> trains on `data` as `run` says (learning rate 0.05, 2
/// servers where P has servers, seed 17).
template <class M, class P = flotilla::policy::Synchronous<>>
std::vector<typename M::scalar_type> trained_parameters(const flotilla::data::Dataset<typename M::scalar_type>& data,
                                                        const TrainRun& run) {
  flotilla::TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.05;
  o.optimizer.weight_decay = run.weight_decay;
  o.batch_size = run.batch;
  o.workers = run.workers;
  o.servers = 2;
  o.threads = run.threads;
  o.seed = 17;
  flotilla::Trainer<M, P> t(o);
  flotilla::FitOptions f = flotilla_test::quiet(run.epochs);
  f.max_steps = run.max_steps;
  t.fit(data, nullptr, f);
  const auto p = std::as_const(t).parameters();
  return {p.begin(), p.end()};
}

/// A run stopped after `stop_after` updates, as if killed (checkpoint sets every `every` updates,
/// none at exit), and resumed by a trainer of another seed from the newest set, ends as `whole`
/// (the same options, `epochs` epochs without a break) ends: the same step, the same bits.
template <class M>
void check_resume_bit_for_bit(const flotilla::Trainer<M>& whole, const flotilla::TrainerOptions<M>& o,
                              const flotilla::data::Dataset<typename M::scalar_type>& data, std::size_t epochs,
                              std::size_t stop_after, std::size_t every, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    flotilla::Trainer<M> first(o);
    flotilla::FitOptions f = flotilla_test::quiet(epochs);
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = every;
    f.checkpoints.at_exit = false;
    f.max_steps = stop_after;
    first.fit(data, nullptr, f);
    REQUIRE(first.step() == stop_after);
  }
  auto other = o;
  other.seed = o.seed + 1000;
  flotilla::Trainer<M> resumed(other);
  flotilla::FitOptions f = flotilla_test::quiet(epochs);
  f.checkpoints.directory = dir;
  f.checkpoints.resume = true;
  f.checkpoints.at_exit = false;
  resumed.fit(data, nullptr, f);
  std::filesystem::remove_all(dir);
  CHECK(resumed.step() == whole.step());
  const auto a = std::as_const(whole).parameters(), b = std::as_const(resumed).parameters();
  CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
}

/// pipeline::Trainer<M> with `plan` and `micro_batches` for one epoch of `data` ends with the
/// parameters of one worker's Trainer<M> on the same batches (double: within 1e-10).
template <class M>
void check_pipeline_equals_one_worker(const flotilla::data::Dataset<double>& data, const flotilla::pipeline::Plan& plan,
                                      std::size_t micro_batches) {
  flotilla::TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.batch_size = 16;
  o.seed = 5;
  flotilla::Trainer<M> one(o);
  one.fit(data, nullptr, flotilla_test::quiet(1));
  flotilla::pipeline::TrainerOptions<M> po;
  po.optimizer.learning_rate = o.optimizer.learning_rate;
  po.batch_size = o.batch_size;
  po.seed = o.seed;
  po.micro_batches = micro_batches;
  flotilla::pipeline::Trainer<M> staged(plan, po);
  staged.fit(data, nullptr, flotilla_test::quiet(1));
  const auto a = std::as_const(one).parameters();
  const auto b = std::as_const(staged).parameters();
  CHECK(relative_difference<double>(std::span<const double>(b.data(), b.size()), std::span<const double>(a.data(), a.size())) <
        1e-10);
}

}  // namespace graph_test
