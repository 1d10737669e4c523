// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// pipeline::Trainer: fit() over P stages (and D replicas) takes the steps the data-parallel Trainer
// takes on one worker (D workers) with the same batch and seed, reports the same History, hands
// back the unsplit model's parameters, keeps its optimizer state across fit() calls, writes and
// reads checkpoints the ordinary Trainer reads and writes, and refuses what it does not do.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "../common/quiet_fit.hpp"
#include "../common/blobs.hpp"
#include "flotilla/flotilla.hpp"

namespace pipeline_trainer {

using namespace flotilla;
namespace pl = flotilla::pipeline;

namespace {

// Every kind of layer, Dropout included (its masks must not depend on the split): 8 layers. Adam,
// so that the optimizer's state must stay with the stages, and a cosine schedule.
using Net = Sequential<Input<1, 6, 6>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<10>, Tanh, Dropout<10>, Dense<3>>;
using M = Model<Net, SoftmaxCrossEntropy, optim::Adam, double>;

const data::Dataset<double>& train_set() {
  static const auto d = flotilla_test::blobs<double>(120, 5);
  return d;
}
const data::Dataset<double>& validation_set() {
  static const auto d = flotilla_test::blobs<double>(50, 6);
  return d;
}

// 120 samples in batches of 16: 7 full steps and one of 8 per epoch (with D = 2: 4 steps of 32).
constexpr std::size_t batch = 16;
constexpr std::uint64_t seed = 7;

template <class Options>
Options common_options(std::size_t batch_size) {
  Options o;
  o.optimizer.learning_rate = 0.01;
  o.schedule = schedule::Cosine{.total = 20, .min_factor = 0.1, .warmup = 2};
  o.batch_size = batch_size;
  o.seed = seed;
  return o;
}

using flotilla_test::quiet;

struct Reference {
  std::vector<double> params;
  History history;
};

/// The data-parallel Trainer: `workers` workers of `batch_size` samples each.
Reference reference(std::size_t workers, std::size_t batch_size, std::size_t epochs) {
  auto o = common_options<TrainerOptions<M>>(batch_size);
  o.workers = workers;
  Trainer<M> t(o);
  Reference r;
  r.history = t.fit(train_set(), &validation_set(), quiet(epochs));
  r.params.assign(t.parameters().begin(), t.parameters().end());
  return r;
}

pl::TrainerOptions<M> pipeline_options(std::size_t micro, pl::Schedule s, std::size_t replicas, std::size_t batch_size) {
  auto o = common_options<pl::TrainerOptions<M>>(batch_size);
  o.micro_batches = micro;
  o.pipeline_schedule = s;
  o.replicas = replicas;
  return o;
}

double max_difference(std::span<const double> a, std::span<const double> b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

void check_same_history(const History& got, const History& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].epoch == want[i].epoch);
    CHECK(got[i].step == want[i].step);
    CHECK(got[i].train_loss == doctest::Approx(want[i].train_loss).epsilon(1e-10));
    CHECK(got[i].train_accuracy == want[i].train_accuracy);
    REQUIRE(got[i].val_loss.has_value());
    REQUIRE(want[i].val_loss.has_value());
    CHECK(*got[i].val_loss == doctest::Approx(*want[i].val_loss).epsilon(1e-10));
    CHECK(*got[i].val_accuracy == *want[i].val_accuracy);
    CHECK(got[i].learning_rate == want[i].learning_rate);
    CHECK(got[i].samples_per_second > 0);
  }
}

}  // namespace

TEST_CASE("pipeline::Trainer: a loss that is not a finite number stops every stage with an error naming the update") {
  // A schedule whose second update's rate is NaN: the parameters are NaN after it, and the loss of
  // the third batch is too.
  auto o = pipeline_options(2, pl::Schedule::one_forward_one_backward, 1, batch);
  o.schedule = [](std::uint64_t k) { return k == 0 ? 1.0 : std::nan(""); };
  pl::Trainer<M> t(pl::Plan::automatic<Net, double>(2), o);
  try {
    t.fit(train_set(), nullptr, quiet(1));
    FAIL("training went on with a non-finite loss");
  } catch (const DivergenceError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.step() == 3);
    CHECK(what.find("stage 1 of replica 0: the loss is NaN at update 3 (epoch 1, batch 3 of 8)") != std::string::npos);
  }
}

TEST_CASE("pipeline::Trainer: fit over P = 2 and 3, both schedules, takes one worker's steps and reports its History") {
  const Reference want = reference(1, batch, 2);
  // The reference moved: a test that compares with the initial parameters could not pass.
  REQUIRE(want.history.size() == 2);
  REQUIRE(want.history[1].step == 16);
  for (std::size_t stages : {2, 3}) {
    for (pl::Schedule s : {pl::Schedule::fill_drain, pl::Schedule::one_forward_one_backward}) {
      CAPTURE(stages);
      CAPTURE(pl::name(s));
      pl::Trainer<M> t(pl::Plan::automatic<Net, double>(stages), pipeline_options(3, s, 1, batch));
      const History h = t.fit(train_set(), &validation_set(), quiet(2));
      CHECK(max_difference(t.parameters(), want.params) < 1e-10);
      check_same_history(h, want.history);
      CHECK(t.history().size() == 2);
      CHECK(t.step() == 16);
      CHECK(t.epoch() == 2);
      CHECK(h[0].extra.front().first == "stages");
      CHECK(h[0].extra.front().second == static_cast<double>(stages));
    }
  }
}

TEST_CASE("pipeline::Trainer: 2 replicas of 2 stages take the steps of the Trainer's 2 workers") {
  const Reference want = reference(2, batch, 2);
  pl::Trainer<M> t(pl::Plan::automatic<Net, double>(2), pipeline_options(4, pl::Schedule::one_forward_one_backward, 2, batch));
  const History h = t.fit(train_set(), &validation_set(), quiet(2));
  CHECK(max_difference(t.parameters(), want.params) < 1e-10);
  check_same_history(h, want.history);
  REQUIRE(t.stage_stats().size() == 4);
  for (const pl::StageStats& s : t.stage_stats()) CHECK(s.steps == 8);
}

TEST_CASE("pipeline::Trainer: the gathered parameters evaluate in an ordinary Trainer as through the pipeline") {
  pl::Trainer<M> t(pl::Plan::from_cuts<Net, double>({4}), pipeline_options(2, pl::Schedule::fill_drain, 1, batch));
  const std::vector<double> initial(t.parameters().begin(), t.parameters().end());
  FitOptions f = quiet(1);
  f.max_steps = 3;
  const History h = t.fit(train_set(), nullptr, f);
  REQUIRE(h.size() == 1);
  CHECK(h[0].step == 3);
  CHECK(!h[0].val_loss);
  CHECK(max_difference(t.parameters(), initial) > 1e-4);  // it trained

  const Evaluation piped = t.evaluate(validation_set());
  Trainer<M> plain(common_options<TrainerOptions<M>>(batch));
  std::copy(t.parameters().begin(), t.parameters().end(), plain.parameters().begin());
  const Evaluation direct = plain.evaluate(validation_set());
  CHECK(piped.samples == 50);
  CHECK(piped.loss == doctest::Approx(direct.loss).epsilon(1e-12));
  CHECK(piped.accuracy == direct.accuracy);
  REQUIRE(piped.confusion.has_value());
  REQUIRE(direct.confusion.has_value());
  for (std::int32_t a = 0; a < 3; ++a)
    for (std::int32_t p = 0; p < 3; ++p) CHECK(piped.confusion->count(a, p) == direct.confusion->count(a, p));
  // A stopped epoch resumes where it stopped: the rest of it is 5 steps.
  const History rest = t.fit(train_set(), nullptr, quiet(1));
  CHECK(rest[0].step == 8);
  CHECK(t.epoch() == 1);
}

TEST_CASE("pipeline::Trainer: two fit() calls of one epoch equal one of two (the optimizer state stays with the stages)") {
  const auto o = pipeline_options(3, pl::Schedule::one_forward_one_backward, 1, batch);
  pl::Trainer<M> once(pl::Plan::automatic<Net, double>(3), o), twice(pl::Plan::automatic<Net, double>(3), o);
  const History a = once.fit(train_set(), &validation_set(), quiet(2));
  twice.fit(train_set(), &validation_set(), quiet(1));
  const History b = twice.fit(train_set(), &validation_set(), quiet(1));
  CHECK(max_difference(once.parameters(), twice.parameters()) == 0.0);
  REQUIRE(b.size() == 1);
  CHECK(b[0].epoch == 2);
  CHECK(b[0].train_loss == a[1].train_loss);
  CHECK(twice.history().size() == 2);
}

TEST_CASE("pipeline::Trainer: checkpoints go both ways between the pipeline and the ordinary Trainer, optimizer state included") {
  const Reference want = reference(1, batch, 2);
  const auto dir = std::filesystem::temp_directory_path() / "flotilla_pipeline_checkpoints";
  std::filesystem::create_directories(dir);
  const auto o = pipeline_options(3, pl::Schedule::one_forward_one_backward, 1, batch);
  SUBCASE("pipeline epoch 1 (checkpoint written by fit), Trainer epoch 2") {
    pl::Trainer<M> piped(pl::Plan::automatic<Net, double>(3), o);
    FitOptions f = quiet(1);
    f.checkpoint_file = dir / "piped.ckpt";
    piped.fit(train_set(), &validation_set(), f);
    Trainer<M> plain(common_options<TrainerOptions<M>>(batch));
    plain.load(f.checkpoint_file);
    CHECK(plain.step() == 8);
    CHECK(plain.epoch() == 1);
    plain.fit(train_set(), &validation_set(), quiet(1));
    CHECK(max_difference(plain.parameters(), want.params) < 1e-10);
  }
  SUBCASE("Trainer epoch 1, pipeline epoch 2 (and the pipeline's save and load)") {
    Trainer<M> plain(common_options<TrainerOptions<M>>(batch));
    plain.fit(train_set(), &validation_set(), quiet(1));
    plain.save(dir / "plain.ckpt");
    pl::Trainer<M> piped(pl::Plan::automatic<Net, double>(2), o);
    piped.load(dir / "plain.ckpt");
    const History h = piped.fit(train_set(), &validation_set(), quiet(1));
    CHECK(h[0].epoch == 2);
    CHECK(h[0].step == 16);
    CHECK(max_difference(piped.parameters(), want.params) < 1e-10);
    piped.save(dir / "piped.ckpt");
    pl::Trainer<M> again(pl::Plan::automatic<Net, double>(3), o);
    again.load(dir / "piped.ckpt");
    CHECK(max_difference(again.parameters(), piped.parameters()) == 0.0);
    CHECK(again.step() == 16);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("pipeline::Trainer: progress and the metrics file come from the last stage of replica 0") {
  const auto dir = std::filesystem::temp_directory_path() / "flotilla_pipeline_trainer";
  std::filesystem::create_directories(dir);
  std::ostringstream log;
  FitOptions f;
  f.epochs = 2;
  f.log = &log;
  f.progress = ProgressBar::Style::lines;
  f.metrics_file = dir / "metrics.jsonl";
  pl::Trainer<M> t(pl::Plan::automatic<Net, double>(2), pipeline_options(2, pl::Schedule::one_forward_one_backward, 2, batch));
  const History h = t.fit(train_set(), &validation_set(), f);
  // One summary per epoch, written once (by one rank of the four), with the validation figures.
  const std::string text = log.str();
  std::size_t summaries = 0;
  for (std::size_t at = text.find("validation loss"); at != std::string::npos; at = text.find("validation loss", at + 1)) ++summaries;
  CHECK(summaries == 2);
  CHECK(text.find("epoch 2") != std::string::npos);
  std::ifstream in(f.metrics_file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].find("\"epoch\":2") != std::string::npos);
  CHECK(lines[1].find("\"replicas\":2") != std::string::npos);
  std::filesystem::remove_all(dir);
}

namespace {

/// The value of `"key":` in a JSON line as text (a string's without its quotes).
std::string json_field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const auto at = line.find(k);
  REQUIRE_MESSAGE(at != std::string::npos, key, " is not in ", line);
  auto b = at + k.size();
  if (line[b] == '"') return line.substr(b + 1, line.find('"', b + 1) - b - 1);
  return line.substr(b, line.find_first_of(",}", b) - b);
}

struct TraceEvent {
  std::size_t rank = 0;
  std::string name, category;
  double ts = 0, dur = 0;
};

/// The complete events of a trace file (Timeline writes one a line), by rank, each rank's in order.
std::vector<std::vector<TraceEvent>> read_trace(const std::filesystem::path& path, std::size_t ranks) {
  std::vector<std::vector<TraceEvent>> by_rank(ranks);
  std::ifstream in(path);
  REQUIRE(in);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    const std::size_t rank = std::stoul(json_field(line, "pid"));
    REQUIRE(rank < ranks);
    CHECK(json_field(line, "tid") == "0");  // a stage does everything on its one thread
    by_rank[rank].push_back({rank, json_field(line, "name"), json_field(line, "cat"), std::stod(json_field(line, "ts")),
                             std::stod(json_field(line, "dur"))});
  }
  for (auto& events : by_rank)
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) { return a.ts < b.ts; });
  return by_rank;
}

std::size_t count_starting(const std::vector<TraceEvent>& events, const std::string& prefix) {
  return static_cast<std::size_t>(std::count_if(events.begin(), events.end(),
                                                [&](const TraceEvent& e) { return e.name.rfind(prefix, 0) == 0; }));
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("pipeline::Trainer: the timeline shows each stage's schedule, and the step log its traffic") {
  constexpr std::size_t P = 3, micro = 4, steps = 3;
  const auto plan = pl::Plan::automatic<Net, double>(P);
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_pipeline_trace_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const auto schedule : {pl::Schedule::one_forward_one_backward, pl::Schedule::fill_drain}) {
    CAPTURE(pl::name(schedule));
    FitOptions f = quiet(1);
    f.max_steps = steps;
    f.trace_file = dir / "trace.json";
    f.step_log_file = dir / "steps.jsonl";
    pl::Trainer<M> t(plan, pipeline_options(micro, schedule, 1, batch));
    t.fit(train_set(), nullptr, f);

    const auto trace = read_trace(f.trace_file, P);
    for (std::size_t stage = 0; stage < P; ++stage) {
      CAPTURE(stage);
      const auto& events = trace[stage];  // one replica: rank = stage
      // Its forwards and backwards, in the schedule's order, step after step.
      std::vector<std::string> want, got;
      for (std::size_t k = 0; k < steps; ++k)
        for (const pl::Op& op : pl::schedule_ops(schedule, P, stage, micro))
          want.push_back((op.kind == pl::Op::forward ? "forward " : "backward ") + std::to_string(op.micro_batch));
      for (const auto& e : events)
        if (e.category == "compute") got.push_back(e.name);
      CHECK(got == want);
      // One thread: nothing starts before what came before it has ended (to the printed nanosecond).
      for (std::size_t i = 1; i < events.size(); ++i) CHECK(events[i - 1].ts + events[i - 1].dur <= events[i].ts + 0.002);
      // Each micro-batch waits for its activations from the stage before and its gradients from the
      // stage after, and sends them on; one update a step.
      CHECK(count_starting(events, "receive activations ") == (stage > 0 ? steps * micro : 0));
      CHECK(count_starting(events, "send activations ") == (stage + 1 < P ? steps * micro : 0));
      CHECK(count_starting(events, "receive gradients ") == (stage + 1 < P ? steps * micro : 0));
      CHECK(count_starting(events, "send gradients ") == (stage > 0 ? steps * micro : 0));
      CHECK(count_starting(events, "update") == steps);
      CHECK(count_starting(events, "allreduce") == 0);
    }

    // The step log: a line per rank and step, whose bytes are the activations and gradients that
    // cross the stage's cuts (in-process: no framing).
    const auto lines = lines_of(f.step_log_file);
    REQUIRE(lines.size() == P * steps);
    std::vector<std::size_t> seen(P, 0);
    for (const auto& line : lines) {
      CAPTURE(line);
      const std::size_t stage = std::stoul(json_field(line, "stage"));
      REQUIRE(stage < P);
      CHECK(json_field(line, "rank") == std::to_string(stage));
      CHECK(json_field(line, "replica") == "0");
      CHECK(json_field(line, "step") == std::to_string(++seen[stage]));
      pl::StageNetwork<M::architecture, double> net(plan.first_layer(stage), plan.end_layer(stage), 1);
      const std::size_t to_next = stage + 1 < P ? net.output_size() : 0, to_previous = stage > 0 ? net.input_size() : 0;
      const std::string bytes = std::to_string(batch * (to_next + to_previous) * sizeof(double));
      CHECK(json_field(line, "payload_bytes_sent") == bytes);
      CHECK(json_field(line, "payload_bytes_received") == bytes);
      const std::size_t neighbours = (to_next ? 1 : 0) + (to_previous ? 1 : 0);
      CHECK(json_field(line, "messages_sent") == std::to_string(micro * neighbours));
      CHECK(json_field(line, "messages_received") == std::to_string(micro * neighbours));
      CHECK(json_field(line, "header_bytes_sent") == "0");
      CHECK(std::stod(json_field(line, "compute_ms")) > 0);
      CHECK(std::stod(json_field(line, "allreduce_ms")) == 0);
    }
  }

  {  // replicas: each rank's allreduce shows, and its line names its replica
    FitOptions f = quiet(1);
    f.max_steps = steps;
    f.trace_file = dir / "replicas.json";
    f.step_log_file = dir / "replicas.jsonl";
    pl::Trainer<M> t(pl::Plan::automatic<Net, double>(2), pipeline_options(2, pl::Schedule::fill_drain, 2, batch));
    t.fit(train_set(), nullptr, f);
    const auto trace = read_trace(f.trace_file, 4);
    for (std::size_t rank = 0; rank < 4; ++rank) CHECK(count_starting(trace[rank], "allreduce over replicas") == steps);
    const auto lines = lines_of(f.step_log_file);
    REQUIRE(lines.size() == 4 * steps);
    for (const auto& line : lines) {
      const std::size_t rank = std::stoul(json_field(line, "rank"));
      CHECK(json_field(line, "stage") == std::to_string(rank % 2));
      CHECK(json_field(line, "replica") == std::to_string(rank / 2));
    }
  }
  std::filesystem::remove_all(dir);
}

/// A fresh, empty directory of this process's, for checkpoint sets.
std::filesystem::path fresh_sets_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("flotilla_pipeline_sets_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST_CASE("pipeline::Trainer: a job stopped and resumed from its checkpoint sets ends bit for bit as one never stopped") {
  const auto plan = pl::Plan::automatic<Net, double>(2);
  const auto o = pipeline_options(2, pl::Schedule::one_forward_one_backward, 2, batch);  // 2 x 2 ranks
  pl::Trainer<M> whole(plan, o);
  whole.fit(train_set(), nullptr, quiet(3));  // 4 steps an epoch (120 samples, 32 a step)

  const auto dir = fresh_sets_dir("resume");
  {
    pl::Trainer<M> first(plan, o);
    FitOptions f = quiet(3);
    f.max_steps = 7;  // stopped mid-epoch, after the set of step 6
    f.checkpoints.directory = dir;
    f.checkpoints.every_steps = 3;
    f.checkpoints.keep = 1;
    f.checkpoints.at_exit = false;
    first.fit(train_set(), nullptr, f);
    CHECK(first.step() == 7);
    CHECK(first.checkpoint_failures().empty());
    // The newest set (keep = 1), of step 6, with a file per stage; replica 1 wrote none. The stages
    // save at once, so the one that finished first kept its file of step 3, then the newest
    // complete set; the other one's is gone.
    const auto sets = checkpoint::list_sets(dir);
    REQUIRE(!sets.empty());
    CHECK(sets.size() <= 2);
    CHECK(sets.begin()->second.size() == (sets.size() == 1 ? 2U : 1U));
    CHECK(sets.rbegin()->first == 6);
    std::vector<std::string> parts;
    for (const auto& [part, path] : sets.rbegin()->second) parts.push_back(part);
    CHECK(parts == std::vector<std::string>{"stage-0-of-2", "stage-1-of-2"});
  }
  // A new program, built with another seed (the set's wins), resumes and trains what is left of the 3 epochs.
  auto other = o;
  other.seed = seed + 1;
  pl::Trainer<M> resumed(plan, other);
  FitOptions f = quiet(3);
  std::ostringstream log;
  f.log = &log;
  f.progress = ProgressBar::Style::lines;
  f.checkpoints.directory = dir;
  f.checkpoints.resume = true;
  f.checkpoints.every_steps = 3;
  const History h = resumed.fit(train_set(), nullptr, f);
  CHECK(log.str().find("checkpoint: resuming from step 6 (epoch 2, batch 2)") != std::string::npos);
  CHECK(h.size() == 2);  // the rest of epoch 2, and epoch 3
  CHECK(resumed.step() == whole.step());
  CHECK(resumed.epoch() == 3);
  CHECK(max_difference(resumed.parameters(), whole.parameters()) == 0.0);
  // The sets of steps 9 and 12 (at the end), after the one resumed from.
  CHECK(checkpoint::list_sets(dir).rbegin()->first == 12);
  std::filesystem::remove_all(dir);
}

TEST_CASE("pipeline::Trainer: resume passes over an incomplete set, and sets of another split, saying why") {
  const auto plan = pl::Plan::automatic<Net, double>(2);
  const auto o = pipeline_options(2, pl::Schedule::fill_drain, 1, batch);
  const auto dir = fresh_sets_dir("skip");
  FitOptions f = quiet(1);
  f.max_steps = 6;
  f.checkpoints.directory = dir;
  f.checkpoints.every_steps = 2;
  pl::Trainer<M> t(plan, o);
  t.fit(train_set(), nullptr, f);
  REQUIRE(checkpoint::list_sets(dir).size() == 3);  // steps 2, 4, 6
  std::filesystem::remove(checkpoint::set_file(dir, 6, "stage-1-of-2"));

  SUBCASE("the newest complete set") {
    pl::Trainer<M> r(plan, o);
    const auto report = r.resume_from(dir);
    REQUIRE(report.step == std::optional<std::uint64_t>(4));
    CHECK(r.step() == 4);
    REQUIRE(report.skipped.size() == 1);
    CHECK(report.skipped[0].reason.find("has no file for part stage-1-of-2") != std::string::npos);
    CHECK(report.files.size() == 2);
  }
  SUBCASE("another split: no set fits, nothing changes") {
    const std::size_t automatic = plan.first_layer(1), cut = automatic > 1 ? automatic - 1 : automatic + 1;
    pl::Trainer<M> r(pl::Plan::from_cuts<Net, double>(std::vector<std::size_t>{cut}), o);
    const std::vector<double> before(r.parameters().begin(), r.parameters().end());
    const auto report = r.resume_from(dir);
    CHECK_FALSE(report.step.has_value());
    CHECK(r.step() == 0);
    CHECK(max_difference(r.parameters(), before) == 0.0);
    const std::string why = "this plan's stage 0 of 2 has layers 0.." + std::to_string(cut);
    CHECK(std::any_of(report.skipped.begin(), report.skipped.end(),
                      [&](const checkpoint::Skipped& k) { return k.reason.find(why) != std::string::npos; }));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("pipeline::Trainer: sets by time are saved by every stage at the same steps") {
  const auto dir = fresh_sets_dir("time");
  FitOptions f = quiet(1);
  f.max_steps = 5;
  f.checkpoints.directory = dir;
  f.checkpoints.every_seconds = 1e-9;  // due after every update
  f.checkpoints.keep = 0;              // keep every set
  pl::Trainer<M> t(pl::Plan::automatic<Net, double>(3), pipeline_options(2, pl::Schedule::one_forward_one_backward, 1, batch));
  t.fit(train_set(), nullptr, f);
  const auto sets = checkpoint::list_sets(dir);
  CHECK(sets.size() == 5);
  for (const auto& [step, files] : sets) {
    CAPTURE(step);
    CHECK(files.size() == 3);  // complete: every stage saved at this step
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("pipeline::Trainer: bad options and data are refused with a message naming the problem") {
  const auto plan = pl::Plan::automatic<Net, double>(2);
  auto o = pipeline_options(2, pl::Schedule::fill_drain, 1, batch);
  SUBCASE("checkpoint sets with unusable settings") {
    pl::Trainer<M> t(plan, o);
    FitOptions f = quiet(1);
    f.checkpoints.every_steps = 2;  // but no directory
    CHECK_THROWS_WITH_AS(t.fit(train_set(), nullptr, f), doctest::Contains("need a directory"), ConfigError);
    f.checkpoints.directory = "/proc/flotilla-cannot-create-this";
    CHECK_THROWS_WITH_AS(t.fit(train_set(), nullptr, f), doctest::Contains("cannot create"), ConfigError);
    CHECK(t.step() == 0);
  }
  SUBCASE("a checkpoint of another model") {
    using Other = Model<Sequential<Input<1, 6, 6>, Flatten, Dense<3>>, SoftmaxCrossEntropy, optim::Adam, double>;
    const auto path = std::filesystem::temp_directory_path() / "flotilla_pipeline_other.ckpt";
    Trainer<Other>(common_options<TrainerOptions<Other>>(batch)).save(path);
    pl::Trainer<M> t(plan, o);
    const std::vector<double> before(t.parameters().begin(), t.parameters().end());
    CHECK_THROWS_WITH_AS(t.load(path), doctest::Contains("the checkpoint is of another model"), CheckpointError);
    CHECK(max_difference(t.parameters(), before) == 0.0);
    std::filesystem::remove(path);
  }
  SUBCASE("a data set of the wrong shape") {
    pl::Trainer<M> t(plan, o);
    auto wrong = train_set();
    wrong.inputs.conservativeResize(35, wrong.inputs.cols());
    CHECK_THROWS_WITH_AS(t.fit(wrong, nullptr, quiet(1)), doctest::Contains("pipeline::Trainer::fit: training set 'blobs' has 35 features"),
                         ShapeError);
  }
  SUBCASE("zero micro-batches") {
    o.micro_batches = 0;
    CHECK_THROWS_WITH_AS(pl::Trainer<M>(plan, o), doctest::Contains("micro_batches"), ConfigError);
  }
  SUBCASE("a plan of another network") {
    using Other = Sequential<Input<36>, Dense<4>, Tanh, Dense<3>>;
    CHECK_THROWS_WITH_AS(pl::Trainer<M>(pl::Plan::automatic<Other, double>(2), o), doctest::Contains("the plan covers 3 layers"),
                         ConfigError);
  }
}

TEST_CASE("pipeline::Trainer: a regression model (MSE, no accuracy) takes one worker's steps") {
  using R = Model<Sequential<Input<4>, Dense<8>, Tanh, Dense<6>, Tanh, Dense<2>>, MSE, optim::Momentum, double>;
  data::Dataset<double> d;
  d.name = "sines";
  Generator g(3);
  d.inputs.resize(4, 40);
  d.targets.resize(2, 40);
  for (Eigen::Index s = 0; s < 40; ++s) {
    for (Eigen::Index i = 0; i < 4; ++i) d.inputs(i, s) = g.normal<double>();
    d.targets(0, s) = std::sin(d.inputs(0, s) + d.inputs(1, s));
    d.targets(1, s) = d.inputs(2, s) * d.inputs(3, s);
  }
  auto ro = common_options<TrainerOptions<R>>(6);
  Trainer<R> plain(ro);
  const History want = plain.fit(d, &d, quiet(2));
  auto po = common_options<pl::TrainerOptions<R>>(6);
  po.micro_batches = 4;
  pl::Trainer<R> piped(pl::Plan::automatic<R::architecture, double>(3), po);
  const History got = piped.fit(d, &d, quiet(2));
  CHECK(max_difference(piped.parameters(), plain.parameters()) < 1e-12);
  REQUIRE(got.size() == 2);
  CHECK(std::isnan(got[1].train_accuracy));
  CHECK(!got[1].val_accuracy);
  CHECK(got[1].train_loss == doctest::Approx(want[1].train_loss).epsilon(1e-12));
  CHECK(*got[1].val_loss == doctest::Approx(*want[1].val_loss).epsilon(1e-12));
  const Evaluation e = piped.evaluate(d);
  CHECK(std::isnan(e.accuracy));
  CHECK(!e.confusion);
  CHECK(e.loss == doctest::Approx(plain.evaluate(d).loss).epsilon(1e-12));
}

}  // namespace pipeline_trainer
