// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Trainer: determinism, thread-count independence, checkpoints, and errors for mismatched input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../common/quiet_fit.hpp"
#include "flotilla/flotilla.hpp"

namespace unit_trainer {

using namespace flotilla;

namespace {

using SmallNet = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<16>, Tanh, Dropout<20>,
                            Dense<3>>;
using SmallModel = Model<SmallNet, SoftmaxCrossEntropy, optim::Momentum>;

/// A learnable 3-class problem on 8x8 images: the class is which third of the image is bright.
data::Dataset<float> stripes(std::size_t n, std::uint64_t seed) {
  Generator g(seed);
  data::Dataset<float> d;
  d.name = "stripes";
  d.classes = 3;
  d.inputs.resize(64, static_cast<Eigen::Index>(n));
  d.labels.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    const auto label = static_cast<std::int32_t>(g.below(3));
    d.labels[s] = label;
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x)
        d.inputs(y * 8 + x, static_cast<Eigen::Index>(s)) =
            0.3f * g.normal<float>() + (x * 3 / 8 == label ? 1.0f : 0.0f);
  }
  return d;
}

template <class M>
TrainerOptions<M> options(std::size_t threads, std::uint64_t seed = 3) {
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.05;
  o.batch_size = 20;
  o.threads = threads;
  o.seed = seed;
  return o;
}

using flotilla_test::quiet;

template <class T>
bool bitwise_equal(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("flotilla_test_trainer_" + name);
}

}  // namespace

TEST_CASE("the same seed gives the same parameters, bit for bit") {
  const auto data = stripes(200, 1);
  for (std::size_t threads : {1u, 2u}) {
    CAPTURE(threads);
    Trainer<SmallModel> a(options<SmallModel>(threads)), b(options<SmallModel>(threads));
    CHECK(bitwise_equal(std::as_const(a).parameters(), std::as_const(b).parameters()));
    a.fit(data, nullptr, quiet(2));
    b.fit(data, nullptr, quiet(2));
    CHECK(a.step() == 20);
    CHECK(bitwise_equal(std::as_const(a).parameters(), std::as_const(b).parameters()));
  }
  // A different seed gives different initial parameters.
  Trainer<SmallModel> c(options<SmallModel>(1, 4)), d(options<SmallModel>(1, 3));
  CHECK_FALSE(bitwise_equal(std::as_const(c).parameters(), std::as_const(d).parameters()));
}

TEST_CASE("splitting batches across threads changes nothing but float rounding") {
  // Dropout masks are keyed by sample id, so even the stochastic layer agrees across splits.
  const auto data = stripes(200, 2);
  Trainer<SmallModel> one(options<SmallModel>(1)), three(options<SmallModel>(3));
  one.fit(data, nullptr, quiet(1));
  three.fit(data, nullptr, quiet(1));
  const auto p1 = std::as_const(one).parameters(), p3 = std::as_const(three).parameters();
  double max_diff = 0, max_abs = 0;
  for (std::size_t i = 0; i < p1.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(p1[i]) - p3[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(p1[i])));
  }
  CHECK(max_diff < 1e-4 * max_abs);
  CHECK(max_diff > 0.0);  // different summation order: not bitwise identical, as documented
}

TEST_CASE("the trainer learns a simple problem") {
  const auto train = stripes(600, 5), test = stripes(300, 6);
  Trainer<SmallModel> t(options<SmallModel>(2));
  const double before = t.evaluate(test).accuracy;
  const auto history = t.fit(train, &test, quiet(3));
  REQUIRE(history.size() == 3);
  CHECK(history.back().val_accuracy.has_value());
  CHECK(*history.back().val_accuracy > 0.95);
  CHECK(before < 0.6);
  CHECK(history.back().train_loss < history.front().train_loss);
  const auto ev = t.evaluate(test);
  CHECK(ev.samples == 300);
  REQUIRE(ev.confusion.has_value());
  CHECK(ev.confusion->total() == 300);
  CHECK(ev.accuracy == doctest::Approx(*history.back().val_accuracy));
}

TEST_CASE("a checkpoint restores the run exactly") {
  const auto data = stripes(200, 7);
  const auto path = temp_path("resume.ckpt");
  Trainer<SmallModel> a(options<SmallModel>(1));
  a.fit(data, nullptr, quiet(1));
  a.save(path);
  a.fit(data, nullptr, quiet(1));

  Trainer<SmallModel> b(options<SmallModel>(1, /*seed=*/99));  // other seed: load must overwrite everything
  b.load(path);
  CHECK(b.step() == 10);
  CHECK(b.epoch() == 1);
  b.fit(data, nullptr, quiet(1));
  CHECK(b.step() == a.step());
  CHECK(bitwise_equal(std::as_const(a).parameters(), std::as_const(b).parameters()));
  std::filesystem::remove(path);
}

TEST_CASE("a damaged checkpoint is refused and changes nothing") {
  const auto data = stripes(100, 8);
  const auto path = temp_path("damaged.ckpt");
  Trainer<SmallModel> a(options<SmallModel>(1));
  a.fit(data, nullptr, quiet(1));
  a.save(path);
  std::vector<char> bytes(std::filesystem::file_size(path));
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  Trainer<SmallModel> b(options<SmallModel>(1, 11));
  const std::vector<float> before(std::as_const(b).parameters().begin(), std::as_const(b).parameters().end());
  auto expect_refused = [&](const std::vector<char>& content, const char* what) {
    CAPTURE(what);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(content.data(), static_cast<std::streamsize>(content.size()));
    CHECK_THROWS_AS(b.load(path), CheckpointError);
    CHECK(b.step() == 0);
    CHECK(bitwise_equal(std::as_const(b).parameters(), std::span<const float>(before)));
  };
  auto flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  expect_refused(flipped, "a flipped byte in the parameters");
  expect_refused(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() - 9)), "truncated");
  expect_refused({}, "empty file");
  std::filesystem::remove(path);
  CHECK_THROWS_AS(b.load(path), CheckpointError);  // missing file
}

TEST_CASE("a checkpoint of another model is refused with both signatures") {
  const auto path = temp_path("other_model.ckpt");
  using Other = Model<Sequential<Input<1, 8, 8>, Flatten, Dense<3>>, SoftmaxCrossEntropy, optim::Momentum>;
  Trainer<Other>(options<Other>(1)).save(path);
  Trainer<SmallModel> t(options<SmallModel>(1));
  try {
    t.load(path);
    FAIL("expected CheckpointError");
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("another model") != std::string::npos);
    CHECK(msg.find(Trainer<Other>::signature()) != std::string::npos);
    CHECK(msg.find(Trainer<SmallModel>::signature()) != std::string::npos);
  }
  using OtherOptimizer = Model<SmallNet, SoftmaxCrossEntropy, optim::Adam>;
  Trainer<OtherOptimizer>().save(path);
  CHECK_THROWS_WITH_AS(t.load(path), doctest::Contains("optimizer is Adam"), CheckpointError);
  std::filesystem::remove(path);
}

TEST_CASE("data that does not fit the model is refused with a clear message") {
  Trainer<SmallModel> t(options<SmallModel>(1));
  auto wrong_features = stripes(10, 9);
  wrong_features.inputs.conservativeResize(63, Eigen::NoChange);
  CHECK_THROWS_WITH_AS(t.fit(wrong_features, nullptr, quiet(1)), doctest::Contains("63 features per sample"), ShapeError);
  auto no_labels = stripes(10, 9);
  no_labels.labels.clear();
  CHECK_THROWS_WITH_AS(t.evaluate(no_labels), doctest::Contains("needs one label per sample"), ShapeError);
  auto bad_label = stripes(10, 9);
  bad_label.labels[4] = 3;
  CHECK_THROWS_WITH_AS(t.fit(bad_label, nullptr, quiet(1)), doctest::Contains("label 3"), Error);
  TrainerOptions<SmallModel> zero;
  zero.batch_size = 0;
  CHECK_THROWS_AS(Trainer<SmallModel>{zero}, ConfigError);
}

TEST_CASE("a learning rate that is negative or not a number is refused before training") {
  for (double lr : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(lr);
    auto o = options<SmallModel>(1);
    o.optimizer.learning_rate = lr;
    CHECK_THROWS_WITH_AS(Trainer<SmallModel>{o}, doctest::Contains("TrainerOptions::optimizer.learning_rate is"), ConfigError);
  }
}

TEST_CASE("a loss that is not a finite number stops training with an error naming the update") {
  // A rate so large that the first update sends the parameters to infinity: the loss of the
  // second batch is not finite, on one worker and on two (where every worker sees it).
  for (std::size_t workers : {1u, 2u}) {
    CAPTURE(workers);
    auto o = options<SmallModel>(1);
    o.optimizer.learning_rate = 1e30;
    o.workers = workers;
    Trainer<SmallModel> t(o);
    const auto data = stripes(200, 4);
    try {
      t.fit(data, nullptr, quiet(2));
      FAIL("training went on with a non-finite loss");
    } catch (const DivergenceError& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(e.step() >= 2);
      CHECK(e.step() <= 3);
      CHECK(what.find("at update " + std::to_string(e.step()) + " (epoch 1, batch " + std::to_string(e.step()) + " of ") !=
            std::string::npos);
      CHECK(what.find("training has diverged") != std::string::npos);
      CHECK(what.find("learning rate of that update was 1e+30") != std::string::npos);
    }
  }
}

TEST_CASE("with on_non_finite_loss = skip_update, an update whose gradient is not finite is skipped and counted") {
  // One sample's features are NaN: each epoch, the update whose batch holds it has a NaN loss on
  // the worker that has it, and a NaN gradient on every worker once the gradients are summed.
  auto data = stripes(200, 4);
  data.inputs(5, 17) = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t workers : {1u, 2u}) {
    CAPTURE(workers);
    auto o = options<SmallModel>(1);
    o.workers = workers;
    {
      Trainer<SmallModel> stops(o);  // the default stops at that update
      CHECK_THROWS_AS(stops.fit(data, nullptr, quiet(3)), DivergenceError);
    }
    o.on_non_finite_loss = NonFiniteLoss::skip_update;
    Trainer<SmallModel> t(o);
    std::ostringstream log;
    FitOptions f = quiet(3);
    f.log = &log;
    f.progress = ProgressBar::Style::none;
    const History h = t.fit(data, nullptr, f);
    CAPTURE(log.str());
    REQUIRE(h.size() == 3);
    CHECK(t.skipped_updates() == 3);  // one per epoch
    const std::size_t per_epoch = 200 / (20 * workers);
    CHECK(t.step() == 3 * per_epoch);  // a skipped update spends its number
    for (const auto& r : h) {
      CHECK(std::isfinite(r.train_loss));
      const auto skipped = std::find_if(r.extra.begin(), r.extra.end(),
                                        [](const auto& kv) { return kv.first == "skipped_updates"; });
      REQUIRE(skipped != r.extra.end());
      CHECK(skipped->second == 1.0);
    }
    CHECK(h.back().train_loss < h.front().train_loss);
    CHECK(h.back().train_accuracy > 0.8);
    for (const float p : t.parameters()) REQUIRE(std::isfinite(p));
    CHECK(log.str().find("flotilla: worker 0: skipped update ") != std::string::npos);
    CHECK(log.str().find("its gradient is not finite") != std::string::npos);
  }
}

TEST_CASE("with on_non_finite_loss = skip_update, too many skipped updates in a row stop training") {
  auto o = options<SmallModel>(1);
  o.optimizer.learning_rate = 1e30;  // diverges for good after the first update
  o.on_non_finite_loss = NonFiniteLoss::skip_update;
  o.max_consecutive_skips = 3;
  Trainer<SmallModel> t(o);
  try {
    t.fit(stripes(200, 4), nullptr, quiet(2));
    FAIL("training went on although every update was skipped");
  } catch (const DivergenceError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(t.skipped_updates() == 3);
    CHECK(what.find("3 updates in a row") != std::string::npos);
    CHECK(what.find("were skipped because their gradient was not finite") != std::string::npos);
    CHECK(what.find("training has diverged") != std::string::npos);
  }
  // Settings that cannot work are refused before training.
  auto zero = options<SmallModel>(1);
  zero.on_non_finite_loss = NonFiniteLoss::skip_update;
  zero.max_consecutive_skips = 0;
  CHECK_THROWS_WITH_AS(Trainer<SmallModel>{zero}, doctest::Contains("max_consecutive_skips is 0"), ConfigError);
  auto servers = options<SmallModel>(1);
  servers.on_non_finite_loss = NonFiniteLoss::skip_update;
  CHECK_THROWS_WITH_AS((Trainer<SmallModel, policy::Synchronous<topology::ParameterServer>>{servers}),
                       doctest::Contains("needs the workers to share one gradient"), ConfigError);
}

TEST_CASE("an output file that cannot be written is refused before the first step") {
  const auto missing = std::filesystem::temp_directory_path() / "flotilla-no-such-directory" / "out";
  const auto kept = temp_path("kept_metrics.jsonl");
  {
    std::ofstream(kept) << "{\"epoch\":1}\n";
  }
  for (const char* field : {"plot_file", "trace_file", "metrics_file", "checkpoint_file"}) {
    CAPTURE(field);
    for (std::size_t workers : {1u, 2u}) {
      auto o = options<SmallModel>(1);
      o.workers = workers;
      Trainer<SmallModel> t(o);
      FitOptions f = quiet(1);
      if (std::string(field) != "metrics_file") f.metrics_file = kept;
      (std::string(field) == "plot_file"         ? f.plot_file
       : std::string(field) == "trace_file"      ? f.trace_file
       : std::string(field) == "metrics_file"    ? f.metrics_file
                                                 : f.checkpoint_file) = missing;
      const std::string expected =
          "FitOptions::" + std::string(field) + ": cannot write '" + missing.string() + "': No such file or directory";
      CHECK_THROWS_WITH_AS(t.fit(stripes(100, 4), nullptr, f), doctest::Contains(expected.c_str()), ConfigError);
      CHECK(t.step() == 0);  // nothing trained
    }
  }
  // The existing metrics file was neither truncated nor appended to.
  std::ifstream in(kept);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all == "{\"epoch\":1}\n");
  std::filesystem::remove(kept);
}

TEST_CASE("going on without a lost worker is refused where it cannot work") {
  TrainerOptions<SmallModel> o;
  o.on_worker_loss = WorkerLoss::continue_with_survivors;
  // Threads of one process cannot be lost on their own: the ring re-forms over TCP processes only.
  CHECK_THROWS_WITH_AS(Trainer<SmallModel>{o}, doctest::Contains("transport::Tcp"), ConfigError);
  // Parameter servers go on without a worker over TCP only, too.
  using PS = policy::Asynchronous<topology::ParameterServer>;
  CHECK_THROWS_WITH_AS((Trainer<SmallModel, PS>{o}), doctest::Contains("transport::Tcp"), ConfigError);
  o.on_worker_loss = WorkerLoss::stop;
  CHECK_NOTHROW(Trainer<SmallModel>{o});
}

TEST_CASE("optimizers and schedules drive a regression to its answer") {
  using Net = Sequential<Input<2>, Dense<1>>;
  data::Dataset<double> d;
  d.name = "plane";
  Generator g(1);
  d.inputs.resize(2, 400);
  d.targets.resize(1, 400);
  for (Eigen::Index s = 0; s < 400; ++s) {
    d.inputs(0, s) = g.uniform(-1.0, 1.0);
    d.inputs(1, s) = g.uniform(-1.0, 1.0);
    d.targets(0, s) = 0.5 * d.inputs(0, s) - 1.5 * d.inputs(1, s) + 0.25;
  }
  auto check_fit = [&](auto trainer, const char* name) {
    CAPTURE(name);
    trainer.fit(d, nullptr, quiet(60));
    const auto p = std::as_const(trainer).parameters();
    CHECK(p[0] == doctest::Approx(0.5).epsilon(0.01));
    CHECK(p[1] == doctest::Approx(-1.5).epsilon(0.01));
    CHECK(p[2] == doctest::Approx(0.25).epsilon(0.01));
  };
  {
    TrainerOptions<Model<Net, MSE, optim::SGD, double>> o;
    o.optimizer.learning_rate = 0.2;
    o.batch_size = 16;
    o.schedule = schedule::Step{500, 0.5};
    check_fit(Trainer<Model<Net, MSE, optim::SGD, double>>(o), "SGD + step schedule");
  }
  {
    TrainerOptions<Model<Net, MSE, optim::Momentum, double>> o;
    o.optimizer.learning_rate = 0.05;
    o.optimizer.nesterov = true;
    o.batch_size = 16;
    check_fit(Trainer<Model<Net, MSE, optim::Momentum, double>>(o), "Nesterov momentum");
  }
  {
    TrainerOptions<Model<Net, MSE, optim::Adam, double>> o;
    o.optimizer.learning_rate = 0.05;
    o.batch_size = 16;
    o.schedule = schedule::Cosine{1500, 0.01, 20};
    check_fit(Trainer<Model<Net, MSE, optim::Adam, double>>(o), "Adam + cosine");
  }
  {
    TrainerOptions<Model<Net, MSE, optim::AdamW, double>> o;
    o.optimizer.learning_rate = 0.05;
    o.optimizer.weight_decay = 0;  // decay would bias the answer; test_optimizers.cpp checks it
    o.batch_size = 16;
    check_fit(Trainer<Model<Net, MSE, optim::AdamW, double>>(o), "AdamW");
  }
}

TEST_CASE("an element-wise optimizer's update split across cores equals the whole update") {
  // 256 * 300 + 300 + 300 * 7 + 7 = 79507 parameters: enough for the engine to split the update,
  // and a count that no core count divides into multiples of 16.
  using Wide = Sequential<Input<256>, Dense<300>, ReLU, Dense<7>>;
  auto check = [](auto optimizer) {
    using O = decltype(optimizer);
    static_assert(elementwise_optimizer<O>);
    using M = Model<Wide, SoftmaxCrossEntropy, O>;
    detail::Engine<M> one(1, 64, 5), three(3, 64, 5);
    typename O::template state<float> s1(M::parameter_count), s3(M::parameter_count);
    Generator g(11);
    for (std::uint64_t step = 1; step <= 3; ++step) {
      for (std::size_t i = 0; i < M::parameter_count; ++i) one.gradients()[i] = three.gradients()[i] = g.normal<float>();
      const StepInfo info{step, 0.01};
      one.apply_optimizer(optimizer, s1, std::span<const TensorInfo>(M::network::tensors), info);
      three.apply_optimizer(optimizer, s3, std::span<const TensorInfo>(M::network::tensors), info);
    }
    const auto p1 = std::as_const(one).parameters(), p3 = std::as_const(three).parameters();
    double max_diff = 0, moved = 0;
    for (std::size_t i = 0; i < p1.size(); ++i) max_diff = std::max(max_diff, std::abs(double(p1[i]) - double(p3[i])));
    detail::Engine<M> fresh(1, 64, 5);
    for (std::size_t i = 0; i < p1.size(); ++i) moved = std::max(moved, std::abs(double(p1[i]) - double(fresh.parameters()[i])));
    CHECK(moved > 1e-3);  // the updates did something
    // Element-wise arithmetic does not depend on where the slices are cut: at most a last-bit
    // difference where a slice boundary moves an element between the vector and the scalar path.
    CHECK(max_diff <= 1e-6 * moved);
  };
  check(optim::Momentum{});
  check(optim::Adam{});
  check(optim::AdamW{});
}

}  // namespace unit_trainer
