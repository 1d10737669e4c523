// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// On click logs generated from a planted logistic model, sparse training reaches the planted
// model's own AUC on the same held-out lines, synchronously and asynchronously alike.
//
// The planted model is the best any learner can do. Its per-ID weights are only learnable for IDs
// seen often enough: with the generator's default vocabularies (up to a million IDs a field) most
// rare IDs are seen a handful of times in a few hundred thousand lines, and their weights cannot
// be estimated from that. Capped at 100 IDs a field, every weight is learnable from 200,000 lines,
// and the bar is the issue's: within 0.01 of the planted AUC after two epochs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "flotilla/data/ctr_generator.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/optim/row_adagrad.hpp"
#include "flotilla/sparse/trainer.hpp"

namespace {

namespace fl = flotilla;
using Tower = fl::Sequential<fl::Input<26 * 8 + 13>, fl::Dense<32>, fl::ReLU, fl::Dense<1>>;
using Model = fl::sparse::CtrModel<fl::sparse::CriteoInputs, fl::Embedding<8>, Tower, fl::optim::RowAdagrad, fl::optim::Adam>;

struct Data {
  std::vector<fl::data::CtrExample> train, test;
  double planted_auc = 0;
};

Data generated() {
  fl::data::CtrGeneratorOptions g;
  g.seed = 3;
  g.lines = 200'000;
  for (auto& v : g.vocabulary) v = std::min<std::uint64_t>(v, 100);
  Data d;
  d.train.resize(g.lines);
  d.test.resize(50'000);
  const fl::data::CtrGenerator train(g), test(g.held_out(d.test.size()));
  for (std::size_t i = 0; i < d.train.size(); ++i) train.example(i, d.train[i]);
  for (std::size_t i = 0; i < d.test.size(); ++i) test.example(i, d.test[i]);
  std::vector<float> p, y;
  for (const auto& x : d.test) {
    p.push_back(static_cast<float>(train.model().probability(x)));
    y.push_back(x.label);
  }
  d.planted_auc = fl::binary_metrics(std::span<const float>(p), std::span<const float>(y)).auc;
  return d;
}

template <class Policy>
double auc_after(const Data& d, std::size_t workers, std::size_t servers, std::size_t batch, std::size_t epochs) {
  Model m;
  m.row_optimizer.learning_rate = 0.05;
  m.tower_optimizer.learning_rate = 1e-3;
  fl::sparse::TrainerOptions o;
  o.workers = workers;
  o.servers = servers;
  o.batch_size = batch;
  fl::sparse::Trainer<Model, Policy> t(m, o);
  const auto h = t.fit(d.train, d.test, epochs);
  for (const auto& [k, v] : h.back().extra)
    if (k == "auc") return v;
  return 0;
}

}  // namespace

TEST_CASE("sparse training reaches the planted model's AUC within 0.01; asynchronous within 0.005 of synchronous") {
  const Data d = generated();
  const double sync = auc_after<fl::policy::Synchronous<fl::topology::ParameterServer>>(d, 2, 2, 512, 2);
  const double async = auc_after<fl::policy::Asynchronous<fl::topology::ParameterServer>>(d, 4, 2, 256, 2);
  MESSAGE("planted model " << d.planted_auc << ", synchronous (2 workers x 512) " << sync
                           << ", asynchronous (4 workers x 256, 2 servers) " << async);
  CHECK(d.planted_auc > 0.75);
  CHECK(sync > d.planted_auc - 0.01);
  CHECK(std::abs(async - sync) < 0.005);
}
