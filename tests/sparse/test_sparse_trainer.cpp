// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// sparse::Trainer: synchronous training on N workers equals one worker with an N-times batch (rows
// and tower), for every server count; asynchronous training learns; the traffic is the rows'.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/sparse/trainer.hpp"

namespace {

namespace fl = flotilla;

using SmallTower = fl::Sequential<fl::Input<3 * 4 + 2>, fl::Dense<8>, fl::ReLU, fl::Dense<1>>;
using SmallModel = fl::sparse::CtrModel<fl::sparse::Inputs<3, 2>, fl::Embedding<4>, SmallTower, fl::optim::RowAdagrad,
                                        fl::optim::Adam>;
using WideModel = fl::sparse::CtrModel<fl::sparse::Inputs<3, 2>, fl::Embedding<4, fl::Pooling::mean>, SmallTower,
                                       fl::optim::RowAdagrad, fl::optim::SGD, fl::sparse::Wide<fl::optim::RowAdagrad>>;

// Examples whose label follows a planted rule over the IDs (field 0's ID parity and field 1's ID),
// so that training has something to learn; field 2 is sometimes missing or holds two IDs.
std::vector<fl::data::CtrExample> planted_examples(std::size_t n, std::uint64_t seed) {
  fl::Generator g(seed);
  std::vector<fl::data::CtrExample> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& x = out[i];
    const std::uint64_t a = g.below(20), b = g.below(50), c = g.below(8);
    x.offsets = {0, 1, 2, 2};
    x.ids = {a, b};
    if (c < 6) {
      x.ids.push_back(c);
      ++x.offsets[3];
    }
    if (c == 0) {
      x.ids.push_back(c + 100);
      ++x.offsets[3];
    }
    x.dense = {static_cast<float>(g.uniform()), static_cast<float>(g.uniform())};
    const double logit = (a % 2 ? 1.5 : -1.5) + (b < 10 ? 1.0 : 0.0) + x.dense[0] - 0.5;
    x.label = g.uniform() < 1 / (1 + std::exp(-logit)) ? 1.0f : 0.0f;
    x.line = i + 1;
  }
  return out;
}

template <class Model, class Policy>
struct Run {
  fl::History history;
  std::vector<float> tower;
  std::map<std::uint64_t, std::vector<float>> rows, wide;
  fl::sparse::SparseTraffic traffic;
};

template <class Model>
Model configured() {
  Model m;
  m.row_optimizer.learning_rate = 0.1;
  m.tower_optimizer.learning_rate = 0.01;
  if constexpr (Model::has_wide) m.wide_optimizer.learning_rate = 0.1;
  return m;
}

fl::sparse::TrainerOptions options(std::size_t workers, std::size_t servers, std::size_t batch) {
  fl::sparse::TrainerOptions o;
  o.workers = workers;
  o.servers = servers;
  o.batch_size = batch;
  o.seed = 7;
  return o;
}

template <class Model, class Policy, class T>
Run<Model, Policy> result(const T& t, fl::History h) {
  Run<Model, Policy> r;
  r.history = std::move(h);
  r.tower.assign(t.tower_parameters().begin(), t.tower_parameters().end());
  r.rows = t.rows(0);
  if constexpr (Model::has_wide) r.wide = t.rows(1);
  r.traffic = t.traffic();
  return r;
}

template <class Model, class Policy>
Run<Model, Policy> train(std::size_t workers, std::size_t servers, std::size_t batch, std::size_t epochs,
                         const std::vector<fl::data::CtrExample>& data, const std::vector<fl::data::CtrExample>& test,
                         fl::sparse::TowerUpdates tower = fl::sparse::TowerUpdates::ring) {
  auto o = options(workers, servers, batch);
  o.tower = tower;
  o.tower_row = 37;  // several rows of the tower's table, the last one partly used
  fl::sparse::Trainer<Model, Policy> t(configured<Model>(), o);
  auto h = t.fit(data, test, epochs);
  return result<Model, Policy>(t, std::move(h));
}

// Equal within `tolerance` (relative), or bit for bit when it is 0.
inline bool close(float a, float b, double tolerance) {
  if (tolerance == 0) return a == b;
  return std::abs(static_cast<double>(a) - b) <= tolerance * (1 + std::abs(static_cast<double>(b)));
}

template <class A, class B>
void check_same(const A& a, const B& b, double tolerance) {
  REQUIRE(a.tower.size() == b.tower.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.tower.size(); ++i) differ += close(a.tower[i], b.tower[i], tolerance) ? 0 : 1;
  CHECK_MESSAGE(differ == 0, differ << " of " << a.tower.size() << " tower parameters differ");
  auto rows = [&](const auto& x, const auto& y, const char* what) {
    REQUIRE(x.size() == y.size());
    std::size_t bad = 0, values = 0;
    for (const auto& [key, row] : x) {
      const auto it = y.find(key);
      REQUIRE(it != y.end());
      REQUIRE(it->second.size() == row.size());
      for (std::size_t k = 0; k < row.size(); ++k, ++values) bad += close(row[k], it->second[k], tolerance) ? 0 : 1;
    }
    CHECK_MESSAGE(bad == 0, bad << " of " << values << " values of the " << std::string(what) << " differ");
  };
  rows(a.rows, b.rows, "embedding rows");
  rows(a.wide, b.wide, "wide weights");
}

using Sync = fl::policy::Synchronous<fl::topology::ParameterServer>;

// A directory of this test process's own.
std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
}

}  // namespace

TEST_CASE("synchronous sparse training on N workers equals one worker with an N-times batch, for 1, 2 and 3 servers") {
  const auto data = planted_examples(480, 1);
  const auto one = train<SmallModel, Sync>(1, 1, 48, 2, data, {});
  CHECK(!one.rows.empty());
  for (std::size_t workers : {2, 4})
    for (std::size_t servers : {1, 2, 3}) {
      CAPTURE(workers);
      CAPTURE(servers);
      const auto many = train<SmallModel, Sync>(workers, servers, 48 / workers, 2, data, {});
      check_same(many, one, 2e-5);
    }
}

TEST_CASE("with a wide part and mean pooling, N synchronous workers still equal one") {
  const auto data = planted_examples(240, 2);
  const auto one = train<WideModel, Sync>(1, 1, 24, 2, data, {});
  CHECK(!one.wide.empty());
  const auto four = train<WideModel, Sync>(4, 2, 6, 2, data, {});
  check_same(four, one, 2e-5);
}

TEST_CASE("sparse training learns the planted rule: held-out AUC, synchronous and asynchronous alike") {
  const auto data = planted_examples(8000, 3), test = planted_examples(2000, 4);
  const auto sync = train<SmallModel, Sync>(2, 2, 32, 3, data, test);
  const auto async = train<SmallModel, fl::policy::Asynchronous<fl::topology::ParameterServer>>(4, 2, 16, 3, data, test);
  auto auc = [](const fl::History& h) {
    for (const auto& [k, v] : h.back().extra)
      if (k == "auc") return v;
    return 0.0;
  };
  CHECK(auc(sync.history) > 0.75);
  CHECK(auc(async.history) > 0.75);
  CHECK(std::abs(auc(sync.history) - auc(async.history)) < 0.02);
}

TEST_CASE("the tower updated on the servers equals the tower updated on the workers, synchronously, on 1 and 3 workers") {
  const auto data = planted_examples(360, 5);
  const auto ring = train<SmallModel, Sync>(1, 1, 36, 2, data, {});
  for (std::size_t workers : {1, 3}) {
    CAPTURE(workers);
    const auto servers = train<SmallModel, Sync>(workers, 2, 36 / workers, 2, data, {}, fl::sparse::TowerUpdates::servers);
    check_same(servers, ring, 2e-5);
  }
}

TEST_CASE("two fit calls of one epoch each equal one fit of two epochs") {
  const auto data = planted_examples(240, 6);
  const auto once = train<WideModel, Sync>(2, 2, 12, 2, data, {});
  fl::sparse::Trainer<WideModel, Sync> t(configured<WideModel>(), options(2, 2, 12));
  t.fit(data, {}, 1);
  CHECK(t.epoch() == 1);
  auto h = t.fit(data, {}, 1);
  CHECK(t.epoch() == 2);
  CHECK(t.steps() == 20);
  check_same(result<WideModel, Sync>(t, std::move(h)), once, 0);
}

TEST_CASE("a run resumed from a checkpoint set ends exactly where an uninterrupted run ends") {
  const auto data = planted_examples(240, 8);
  const auto dir = scratch("flotilla-sparse-resume");
  std::filesystem::remove_all(dir);
  auto o = options(2, 2, 12);
  o.checkpoints.directory = dir;
  o.checkpoints.every_steps = 7;
  o.checkpoints.keep = 0;
  fl::sparse::Trainer<WideModel, Sync> whole(configured<WideModel>(), o);
  auto h = whole.fit(data, {}, 3);
  const auto uninterrupted = result<WideModel, Sync>(whole, std::move(h));
  // Sets at steps 7, 14, ..., 28 and at the end (30). Drop those after step 14, and the worker
  // file of step 14 (a save cut short): the resumed run must start from step 7, mid-epoch.
  for (const auto step : {21, 28, 30}) std::filesystem::remove_all(fl::sparse::detail::set_directory(dir, step));
  std::filesystem::remove(fl::sparse::detail::worker_file(fl::sparse::detail::set_directory(dir, 14)));
  o.checkpoints.resume = true;
  fl::sparse::Trainer<WideModel, Sync> resumed(configured<WideModel>(), o);
  auto h2 = resumed.fit(data, {}, 3);
  CHECK(resumed.steps() == 30);
  REQUIRE(h2.size() == 3);  // epoch 1 (from step 7 of it), 2 and 3
  check_same(result<WideModel, Sync>(resumed, std::move(h2)), uninterrupted, 0);
  // Only the newest set is kept with keep = 1.
  o.checkpoints.keep = 1;
  o.checkpoints.resume = false;
  std::filesystem::remove_all(dir);
  fl::sparse::Trainer<SmallModel, Sync> rotating(configured<SmallModel>(), o);
  rotating.fit(data, {}, 1);
  CHECK(fl::sparse::detail::list_sets(dir).size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a checkpoint set of another model or server count is refused by name") {
  const auto data = planted_examples(120, 9);
  const auto dir = scratch("flotilla-sparse-mismatch");
  std::filesystem::remove_all(dir);
  auto o = options(1, 2, 12);
  o.checkpoints.directory = dir;
  fl::sparse::Trainer<SmallModel, Sync> first(configured<SmallModel>(), o);
  first.fit(data, {}, 1);
  o.checkpoints.resume = true;
  o.servers = 3;
  fl::sparse::Trainer<SmallModel, Sync> other_servers(configured<SmallModel>(), o);
  CHECK_THROWS_WITH_AS(other_servers.fit(data, {}, 2), doctest::Contains("with 2 servers, this one has 3"), fl::CheckpointError);
  o.servers = 2;
  fl::sparse::Trainer<WideModel, Sync> other_model(configured<WideModel>(), o);
  CHECK_THROWS_WITH_AS(other_model.fit(data, {}, 2), doctest::Contains("saved by a different model"), fl::CheckpointError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("training from a file: N synchronous workers reading their shards equal one worker with an N-times batch") {
  const auto dir = scratch("flotilla-sparse-file");
  std::filesystem::create_directories(dir);
  const auto path = (dir / "train.tsv").string();
  {
    // A Criteo-format file of 3 x 4 = 12 batches of 3 fields' worth... written from planted
    // examples, with 26 categorical fields and 13 numeric ones as the format has.
    std::ofstream out(path);
    fl::Generator g(3);
    for (int i = 0; i < 600; ++i) {
      out << (g.below(4) == 0 ? 1 : 0);
      for (int j = 0; j < 13; ++j) out << '\t' << (g.below(3) == 0 ? std::string() : std::to_string(g.below(50)));
      for (int f = 0; f < 26; ++f) {
        char hex[9];
        std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(g.below(f < 3 ? 40 : 5)));
        out << '\t' << (g.below(10) == 0 ? "" : hex);
      }
      out << '\n';
    }
  }
  using Tower = fl::Sequential<fl::Input<26 * 2 + 13>, fl::Dense<4>, fl::ReLU, fl::Dense<1>>;
  using Criteo = fl::sparse::CtrModel<fl::sparse::CriteoInputs, fl::Embedding<2>, Tower, fl::optim::RowAdagrad, fl::optim::Adam>;
  auto run_file = [&](std::size_t workers) {
    fl::sparse::Trainer<Criteo, Sync> t(configured<Criteo>(), options(workers, 2, 60 / workers));
    auto h = t.fit_file(path, {}, {}, 2);
    CHECK(t.steps() == 20);
    return result<Criteo, Sync>(t, std::move(h));
  };
  const auto one = run_file(1);
  CHECK(one.rows.size() > 100);
  check_same(run_file(3), one, 2e-5);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the metrics file and the plot carry the held-out AUC, log loss, average precision and calibration") {
  const auto data = planted_examples(960, 10), test = planted_examples(400, 11);
  const auto dir = scratch("flotilla-sparse-metrics");
  std::filesystem::create_directories(dir);
  auto o = options(2, 1, 32);
  o.metrics_file = dir / "metrics.jsonl";
  o.plot_file = dir / "curves.svg";
  fl::sparse::Trainer<SmallModel, Sync> t(configured<SmallModel>(), o);
  const auto h = t.fit(data, test, 2);
  REQUIRE(h.size() == 2);
  std::ifstream metrics(o.metrics_file);
  std::string line;
  std::size_t lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    for (const char* key : {"\"auc\":", "\"log_loss\":", "\"average_precision\":", "\"mean_predicted\":", "\"observed_rate\":",
                            "\"rows_per_step\":", "\"bytes_per_step\":"})
      CHECK_MESSAGE(line.find(key) != std::string::npos, key);
  }
  CHECK(lines == 2);
  // The held-out log loss is the record's validation loss, and the probabilities kept agree.
  double log_loss = 0;
  const auto& p = t.last_test_probabilities();
  REQUIRE(p.size() == test.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(static_cast<double>(p[i]), 1e-7, 1 - 1e-7);
    log_loss -= test[i].label > 0.5f ? std::log(q) : std::log(1 - q);
  }
  CHECK(*h.back().val_loss == doctest::Approx(log_loss / static_cast<double>(p.size())).epsilon(1e-6));
  std::ifstream svg(o.plot_file);
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(text.find(">AUC<") != std::string::npos);
  CHECK(text.find("Accuracy") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the bytes a training step moves are the theory's: the distinct rows' values and keys, and the headers") {
  // Per step, a worker with K distinct keys of dim D, a codec of c bytes per value and S servers
  // sends a pull request (S headers + 8K bytes of keys) and a push (S headers + 8K + K D c), and
  // receives the rows (S headers + K D c). One worker: the tower needs no allreduce.
  const auto data = planted_examples(600, 12);
  constexpr double H = fl::sparse::detail::RowHeader::size, D = 4, S = 2;
  auto bytes = [&](auto policy, double c) {
    using P = decltype(policy);
    fl::sparse::Trainer<SmallModel, P> t(configured<SmallModel>(), options(1, 2, 40));
    t.fit(data, data, 2);  // the evaluations' pulls are not a step's
    const auto& traffic = t.traffic();
    CHECK(traffic.distinct_keys_per_step > 40);
    CHECK(traffic.bytes_per_step == doctest::Approx(3 * S * H + (16 + 2 * D * c) * traffic.distinct_keys_per_step).epsilon(1e-12));
    return traffic.bytes_per_step;
  };
  const double fp32 = bytes(Sync{}, 4);
  const double fp16 = bytes(fl::policy::Compressed<fl::codec::Fp16, Sync>{}, 2);
  CHECK(fp16 < fp32);
}

TEST_CASE("malformed lines of a training file stop the run by name, or are skipped and counted when asked") {
  const auto dir = scratch("flotilla-sparse-malformed");
  std::filesystem::create_directories(dir);
  const auto path = (dir / "train.tsv").string();
  {
    std::ofstream out(path);
    fl::Generator g(4);
    for (int i = 1; i <= 200; ++i) {
      if (i == 50 || i == 51 || i == 130) {
        out << (i == 130 ? "2" : "1\tnot-a-number") << "\n";  // a bad label; a bad integer feature
        continue;
      }
      out << (g.below(4) == 0 ? 1 : 0);
      for (int j = 0; j < 13; ++j) out << '\t' << g.below(9);
      for (int f = 0; f < 26; ++f) out << '\t' << std::hex << (0x100 + g.below(7)) << std::dec;
      out << '\n';
    }
  }
  using Tower = fl::Sequential<fl::Input<26 * 2 + 13>, fl::Dense<1>>;
  using Criteo = fl::sparse::CtrModel<fl::sparse::CriteoInputs, fl::Embedding<2>, Tower, fl::optim::RowAdagrad, fl::optim::Adam>;
  {
    fl::sparse::Trainer<Criteo, Sync> t(configured<Criteo>(), options(2, 1, 10));
    // Worker 1 reads line 50 and worker 0 line 51 (both a bad first integer feature): whichever
    // comes first names its line.
    std::string message;
    try {
      t.fit_file(path, {}, {}, 1);
    } catch (const fl::DataError& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("train.tsv (byte ") != std::string::npos);
    CHECK((message.find("line 50, column 2: ") != std::string::npos || message.find("line 51, column 2: ") != std::string::npos));
  }
  fl::data::ReaderOptions skip;
  skip.on_malformed = fl::data::OnMalformed::skip;
  skip.max_skipped = 5;
  fl::sparse::Trainer<Criteo, Sync> t(configured<Criteo>(), options(2, 1, 10));
  const auto h = t.fit_file(path, skip, {}, 2);
  REQUIRE(h.size() == 2);
  for (const auto& r : h) {
    double skipped = -1;
    for (const auto& [k, v] : r.extra)
      if (k == "malformed_lines_skipped") skipped = v;
    CHECK(skipped == 3);
  }
  CHECK(t.steps() == 2 * 9);  // 197 good lines: worker 0 reads 99, worker 1 98; 9 full batches of 10 each
  std::filesystem::remove_all(dir);
}

TEST_CASE("evaluating held-out examples reads rows they have not seen as those rows start, and creates none") {
  const auto data = planted_examples(240, 13);
  auto unseen = planted_examples(100, 14);
  for (auto& x : unseen)
    for (auto& id : x.ids) id += 1000;  // IDs no training example has
  std::set<std::uint64_t> keys;
  for (const auto& x : data)
    for (std::size_t f = 0; f < x.fields(); ++f)
      for (const auto id : x.field_ids(f)) keys.insert(fl::embedding_key(f, id, 0));
  fl::sparse::Trainer<SmallModel, Sync> t(configured<SmallModel>(), options(2, 2, 12));
  const auto h = t.fit(data, unseen, 1);
  CHECK(t.rows_held() == keys.size());
  CHECK(t.rows(0).size() == keys.size());
  CHECK(h.back().val_loss.has_value());
}

TEST_CASE("synchronous training is bit for bit the same run after run, on any number of servers") {
  const auto data = planted_examples(480, 15);
  const auto first = train<WideModel, Sync>(4, 1, 12, 2, data, {});
  check_same(train<WideModel, Sync>(4, 1, 12, 2, data, {}), first, 0);
  check_same(train<WideModel, Sync>(4, 3, 12, 2, data, {}), first, 0);
  check_same(train<WideModel, Sync>(4, 2, 12, 2, data, {}, fl::sparse::TowerUpdates::servers),
             train<WideModel, Sync>(4, 1, 12, 2, data, {}, fl::sparse::TowerUpdates::servers), 0);
}
