// sparse::Trainer: synchronous training on N workers equals one worker with an N-times batch (rows
// and tower), for every server count; asynchronous training learns; the traffic is the rows'.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
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

template <class Model, class Policy>
Run<Model, Policy> train(std::size_t workers, std::size_t servers, std::size_t batch, std::size_t epochs,
                         const std::vector<fl::data::CtrExample>& data, const std::vector<fl::data::CtrExample>& test) {
  fl::sparse::TrainerOptions o;
  o.workers = workers;
  o.servers = servers;
  o.batch_size = batch;
  o.seed = 7;
  Model m;
  m.row_optimizer.learning_rate = 0.1;
  m.tower_optimizer.learning_rate = 0.01;
  fl::sparse::Trainer<Model, Policy> t(m, o);
  Run<Model, Policy> r;
  r.history = t.fit(data, test, epochs);
  r.tower.assign(t.tower_parameters().begin(), t.tower_parameters().end());
  r.rows = t.rows(0);
  if constexpr (Model::has_wide) r.wide = t.rows(1);
  r.traffic = t.traffic();
  return r;
}

template <class A, class B>
void check_same(const A& a, const B& b, double tolerance) {
  REQUIRE(a.tower.size() == b.tower.size());
  for (std::size_t i = 0; i < a.tower.size(); ++i) CHECK(a.tower[i] == doctest::Approx(b.tower[i]).epsilon(tolerance).scale(1));
  REQUIRE(a.rows.size() == b.rows.size());
  for (const auto& [key, row] : a.rows) {
    const auto it = b.rows.find(key);
    REQUIRE(it != b.rows.end());
    for (std::size_t k = 0; k < row.size(); ++k) CHECK(row[k] == doctest::Approx(it->second[k]).epsilon(tolerance).scale(1));
  }
  REQUIRE(a.wide.size() == b.wide.size());
  for (const auto& [key, row] : a.wide)
    for (std::size_t k = 0; k < row.size(); ++k)
      CHECK(row[k] == doctest::Approx(b.wide.at(key)[k]).epsilon(tolerance).scale(1));
}

using Sync = fl::policy::Synchronous<fl::topology::ParameterServer>;

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
