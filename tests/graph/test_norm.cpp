// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Normalisation layers (nn/batch_norm.hpp, nn/layer_norm.hpp): gradients against finite
// differences, the statistics and running estimates against PyTorch's definitions, evaluation with
// the running estimates, the state tensors that optimizers never touch, statistics over a worker's
// threads and over the global batch, and checkpoints.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../common/check_gradients.hpp"
#include "../common/blobs.hpp"
#include "../common/quiet_fit.hpp"
#include "graph_common.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/codec/fp16.hpp"
#include "flotilla/policy/accumulate.hpp"
#include "flotilla/policy/asynchronous.hpp"
#include "flotilla/policy/compressed.hpp"
#include "flotilla/testing/gradient_check.hpp"

namespace graph_norm {

using namespace flotilla;
using flotilla::testing::check_layer;

namespace {

Matrix<double> random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double shift = 0) {
  Generator g(seed);
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = shift + 2 * g.normal<double>();
  return m;
}

}  // namespace

TEST_CASE("normalisation gradients equal finite differences, in training (through the batch statistics) and evaluation") {
  for (const Mode mode : {Mode::train, Mode::eval}) {
    CAPTURE(static_cast<int>(mode));
    CHECK_GRADIENTS((check_layer<BatchNorm2D<>, Shape<3, 4, 5>>({.mode = mode})));
    CHECK_GRADIENTS((check_layer<SyncBatchNorm2D, Shape<2, 3, 3>>({.mode = mode})));
    CHECK_GRADIENTS((check_layer<BatchNorm1D<>, Shape<6>>({.batch = 5, .mode = mode})));
    CHECK_GRADIENTS((check_layer<LayerNorm<>, Shape<2, 3, 3>>({.mode = mode})));
    CHECK_GRADIENTS((check_layer<LayerNorm<>, Shape<7>>({.mode = mode})));
    // Inside a residual block (a bias right before a normalisation has no effect, so none is).
    CHECK_GRADIENTS((check_layer<Residual<Block<Conv2D<3, 3, 1, 1>, Tanh, BatchNorm2D<>, ReLU, Conv2D<3, 3, 1, 1>, Tanh,
                                                BatchNorm2D<>>>,
                                 Shape<3, 4, 4>>({.mode = mode})));
  }
}

TEST_CASE("BatchNorm2D in training normalises each channel over the batch and the pixels; in evaluation with the running estimates") {
  using L = BatchNorm2D<>::layer<Shape<3, 4, 2>, double>;  // 3 channels, 8 pixels, channels-last
  L layer;
  std::vector<double> p(L::parameter_count);
  Generator g(1);
  layer.initialize(std::span<double>(p), g);
  const double gamma[3] = {1.5, -0.5, 2.0}, beta[3] = {0.25, 1.0, -3.0};
  for (std::size_t c = 0; c < 3; ++c) p[c] = gamma[c], p[3 + c] = beta[c];
  const Matrix<double> x = random_matrix(24, 5, 2, 3.0);
  Matrix<double> y(24, 5);
  const std::vector<std::uint64_t> ids(5, 0);
  layer.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), 24, 5), MatrixView<double>(y.data(), 24, 5),
                                    std::span<const double>(p), Mode::train, ids, 0});
  for (std::size_t c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (Eigen::Index s = 0; s < 5; ++s)
      for (Eigen::Index px = 0; px < 8; ++px) mean += y(px * 3 + static_cast<Eigen::Index>(c), s) / 40;
    for (Eigen::Index s = 0; s < 5; ++s)
      for (Eigen::Index px = 0; px < 8; ++px) var += std::pow(y(px * 3 + static_cast<Eigen::Index>(c), s) - mean, 2) / 40;
    CHECK(mean == doctest::Approx(beta[c]).epsilon(1e-12));
    // (x - mean) / sqrt(var + eps) has variance var / (var + eps): the biased variance, eps added.
    double xm = 0, xv = 0;
    for (Eigen::Index s = 0; s < 5; ++s)
      for (Eigen::Index px = 0; px < 8; ++px) xm += x(px * 3 + static_cast<Eigen::Index>(c), s) / 40;
    for (Eigen::Index s = 0; s < 5; ++s)
      for (Eigen::Index px = 0; px < 8; ++px) xv += std::pow(x(px * 3 + static_cast<Eigen::Index>(c), s) - xm, 2) / 40;
    CHECK(var == doctest::Approx(gamma[c] * gamma[c] * xv / (xv + 1e-5)).epsilon(1e-10));
  }
  // Evaluation: the running estimates, here set by hand.
  const double rm[3] = {0.5, -1.0, 2.0}, rv[3] = {4.0, 0.25, 1.0};
  for (std::size_t c = 0; c < 3; ++c) p[6 + c] = rm[c], p[9 + c] = rv[c];
  layer.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), 24, 5), MatrixView<double>(y.data(), 24, 5),
                                    std::span<const double>(p), Mode::eval, ids, 0});
  for (Eigen::Index i = 0; i < 24; ++i) {
    const auto c = static_cast<std::size_t>(i % 3);
    CHECK(y(i, 4) == doctest::Approx(gamma[c] * (x(i, 4) - rm[c]) / std::sqrt(rv[c] + 1e-5) + beta[c]).epsilon(1e-12));
  }
  CHECK(L::tensors[0].role == TensorRole::normalization);
  CHECK(L::tensors[2].name == "running_mean");
  CHECK(L::tensors[3].role == TensorRole::state);
}

namespace {

// Normalisation first, so that its statistics are the data's.
using FirstNorm = Sequential<Input<1, 6, 6>, BatchNorm2D<>, Conv2D<3, 3>, ReLU, Flatten, Dense<3>>;
using FirstSyncNorm = Sequential<Input<1, 6, 6>, SyncBatchNorm2D, Conv2D<3, 3>, ReLU, Flatten, Dense<3>>;

/// Weight decay on: it would move the running estimates, if an optimizer saw them.
template <class M, class P = policy::Synchronous<>>
std::vector<typename M::scalar_type> train(const data::Dataset<typename M::scalar_type>& d, std::size_t batch,
                                           std::size_t workers, std::size_t threads = 1, std::size_t epochs = 1,
                                           std::size_t max_steps = 0) {
  return graph_test::trained_parameters<M, P>(d, {batch, workers, threads, epochs, max_steps, 0.01});
}

}  // namespace

TEST_CASE("one step moves the running estimates by momentum 0.1 to the batch mean and unbiased variance; no optimizer touches them") {
  using M = Model<FirstNorm, SoftmaxCrossEntropy, optim::SGD, double>;
  const auto d = flotilla_test::blobs<double>(48, 3);
  double mean = 0, squares = 0;
  for (Eigen::Index i = 0; i < d.inputs.size(); ++i) mean += d.inputs.data()[i];
  mean /= static_cast<double>(d.inputs.size());
  for (Eigen::Index i = 0; i < d.inputs.size(); ++i) squares += std::pow(d.inputs.data()[i] - mean, 2);
  const double unbiased = squares / static_cast<double>(d.inputs.size() - 1);
  // The whole set as one batch: 1 worker on 1 and on 3 threads, 2 and 4 workers with statistics
  // over the global batch, on a ring and on servers.
  const std::vector<std::vector<double>> runs{
      train<M>(d, 48, 1, 1, 1, 1), train<M>(d, 48, 1, 3, 1, 1),
      train<Model<FirstSyncNorm, SoftmaxCrossEntropy, optim::SGD, double>>(d, 24, 2, 1, 1, 1),
      train<Model<FirstSyncNorm, SoftmaxCrossEntropy, optim::SGD, double>>(d, 12, 4, 2, 1, 1),
      train<Model<FirstSyncNorm, SoftmaxCrossEntropy, optim::SGD, double>, policy::Synchronous<topology::ParameterServer>>(
          d, 12, 4, 1, 1, 1)};
  for (const auto& p : runs) {
    CHECK(p[0] == doctest::Approx(1.0).epsilon(0.05));  // gamma, trained: moved a little
    CHECK(p[2] == doctest::Approx(0.1 * mean).epsilon(1e-12));
    CHECK(p[3] == doctest::Approx(0.9 + 0.1 * unbiased).epsilon(1e-12));
  }
  // Each worker's own statistics (BatchNorm2D on 2 workers, 24 samples each): the increments are
  // weighted by the workers' equal shares, so the running mean moves to the mean of their means,
  // the data's mean; the variance to the mean of their variances, which is not the data's.
  const auto two = train<M>(d, 24, 2, 1, 1, 1);
  CHECK(two[2] == doctest::Approx(0.1 * mean).epsilon(1e-12));
  CHECK(std::abs(two[3] - (0.9 + 0.1 * unbiased)) > 1e-6);
}

TEST_CASE("statistics over a worker's batch do not depend on its threads; over the global batch, not on its workers") {
  using MD = Model<FirstNorm, SoftmaxCrossEntropy, optim::Momentum, double>;
  using MS = Model<Sequential<Input<1, 6, 6>, Conv2D<4, 3, 1, 1>, SyncBatchNorm2D, ReLU,
                              Residual<Block<Conv2D<4, 3, 1, 1>, SyncBatchNorm2D, ReLU, Conv2D<4, 3, 1, 1>, SyncBatchNorm2D>>, ReLU,
                              Flatten, Dense<8>, SyncBatchNorm1D, ReLU, Dense<3>>,
                   SoftmaxCrossEntropy, optim::Momentum, double>;
  const auto d = flotilla_test::blobs<double>(240, 4);
  const auto one_thread = train<MD>(d, 24, 1, 1);
  for (std::size_t threads : {2u, 3u, 5u}) {
    CAPTURE(threads);
    CHECK(graph_test::relative_difference<double>(one_thread, train<MD>(d, 24, 1, threads)) < 1e-12);
  }
  for (std::size_t n : {1u, 2u, 4u}) {
    CAPTURE(n);
    const auto one = train<MS>(d, 12 * n, 1);
    CHECK(graph_test::relative_difference<double>(one, train<MS>(d, 12, n)) < 1e-12);
    CHECK(graph_test::relative_difference<double>(one, train<MS>(d, 12, n, 2)) < 1e-12);
    CHECK(graph_test::relative_difference<double>(one, train<MS, policy::Synchronous<topology::ParameterServer>>(d, 12, n)) < 1e-12);
  }
  // Each worker's own statistics are not the global batch's: the same run on 2 workers differs.
  CHECK(graph_test::relative_difference<double>(train<MD>(d, 24, 1), train<MD>(d, 12, 2)) > 1e-6);
}

TEST_CASE("a network with BatchNorm learns, evaluates with its running estimates, and resumes bit for bit") {
  using Net = Sequential<Input<1, 6, 6>, Conv2D<4, 3, 1, 1>, BatchNorm2D<>, ReLU,
                         Residual<Block<Conv2D<4, 3, 1, 1>, BatchNorm2D<>, ReLU, Conv2D<4, 3, 1, 1>, BatchNorm2D<>>>, ReLU,
                         Flatten, Dense<3>>;
  using M = Model<Net, SoftmaxCrossEntropy, optim::Adam, float>;
  const auto train_set = flotilla_test::blobs<float>(600, 6), test_set = flotilla_test::blobs<float>(300, 7);
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.batch_size = 20;
  o.workers = 2;
  o.threads = 2;
  o.seed = 3;
  Trainer<M> whole(o);
  whole.fit(train_set, nullptr, flotilla_test::quiet(3));
  const Evaluation e = whole.evaluate(test_set);
  CHECK(e.accuracy > 0.9);
  // Evaluation is the network in evaluation mode on the trained parameters, running estimates included.
  Network<Net, float> net;
  const auto p = std::as_const(whole).parameters();
  const auto out = net.forward(ConstMatrixView<float>(test_set.inputs.data(), 36, 10), p, RunInfo{});
  const Matrix<float> predicted = whole.predict(ConstMatrixView<float>(test_set.inputs.data(), 36, 10));
  CHECK((out - predicted).norm() <= 1e-6f * predicted.norm());
  // The running variance moved away from its start.
  const auto& t = Network<Net, float>::tensors;
  CHECK(t[5].name == "running_var");
  CHECK(p[t[5].offset] != 1.0f);

  graph_test::check_resume_bit_for_bit(whole, o, train_set, 3, 27, 10, "graph_norm");
}

namespace {

using NormNet = Sequential<Input<1, 6, 6>, Conv2D<4, 3, 1, 1>, BatchNorm2D<>, ReLU, Flatten, Dense<8>, BatchNorm1D<>, ReLU, Dense<3>>;

/// Trains NormNet under policy P on 2 workers (2 servers where P has servers): the test accuracy,
/// and whether every running estimate moved from its start and is finite.
template <class P>
std::pair<double, bool> train_under() {
  using M = Model<NormNet, SoftmaxCrossEntropy, optim::Adam, float>;
  const auto train_set = flotilla_test::blobs<float>(480, 8), test_set = flotilla_test::blobs<float>(240, 9);
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.batch_size = 16;
  o.workers = 2;
  o.servers = 2;
  o.seed = 4;
  Trainer<M, P> t(o);
  t.fit(train_set, nullptr, flotilla_test::quiet(3));
  bool moved = true;
  const auto p = std::as_const(t).parameters();
  for (const auto& tensor : Network<NormNet, float>::tensors) {
    if (tensor.role != TensorRole::state) continue;
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.size; ++i)
      moved = moved && std::isfinite(p[i]) && p[i] != (tensor.name == "running_var" ? 1.0f : 0.0f);
  }
  return {t.evaluate(test_set).accuracy, moved};
}

}  // namespace

TEST_CASE("BatchNorm trains under every policy: the running estimates move, and evaluation with them is accurate") {
  using PS = topology::ParameterServer;
  const std::pair<double, bool> runs[] = {
      train_under<policy::Synchronous<>>(),
      train_under<policy::Synchronous<PS>>(),
      train_under<policy::Asynchronous<PS>>(),
      train_under<policy::BoundedStaleness<2, PS>>(),
      train_under<policy::Accumulate<2>>(),
      train_under<policy::Compressed<codec::Fp16>>(),
      train_under<policy::Compressed<codec::Fp16, policy::Synchronous<PS>>>(),
  };
  for (std::size_t i = 0; i < std::size(runs); ++i) {
    CAPTURE(i);
    CHECK(runs[i].first > 0.9);
    CHECK(runs[i].second);
  }
}

TEST_CASE("a network with BatchNorm in a pipeline of whole-batch micro-batches takes one worker's steps") {
  // A micro-batch normalises over itself: with one micro-batch, the whole batch.
  using M = Model<NormNet, SoftmaxCrossEntropy, optim::Adam, double>;
  graph_test::check_pipeline_equals_one_worker<M>(flotilla_test::blobs<double>(96, 8),
                                                  pipeline::Plan::from_cuts<NormNet, double>({3, 6}), 1);
}

TEST_CASE("statistics over the global batch need workers in step: an asynchronous policy is refused, naming both") {
  using M = Model<Sequential<Input<1, 6, 6>, SyncBatchNorm2D, Flatten, Dense<3>>, SoftmaxCrossEntropy, optim::SGD, float>;
  const auto d = flotilla_test::blobs<float>(48, 3);
  TrainerOptions<M> o;
  o.batch_size = 8;
  o.workers = 2;
  Trainer<M, policy::Asynchronous<topology::ParameterServer>> t(o);
  std::string what;
  try {
    t.fit(d, nullptr, flotilla_test::quiet(1));
  } catch (const std::exception& e) {
    what = e.what();
  }
  CAPTURE(what);
  CHECK(what.find("SyncBatchNorm2D") != std::string::npos);
  CHECK(what.find("policy::Synchronous<>") != std::string::npos);
  // One worker has no one to meet: the global batch is its own.
  o.workers = 1;
  Trainer<M, policy::Asynchronous<topology::ParameterServer>> alone(o);
  CHECK_NOTHROW(alone.fit(d, nullptr, flotilla_test::quiet(1)));
}

TEST_CASE("weight decay can leave normalisation parameters and biases alone") {
  const std::array<TensorInfo, 3> tensors{{{0, "Conv2D", "weight", 0, 2, TensorRole::weight},
                                           {0, "Conv2D", "bias", 2, 2, TensorRole::bias},
                                           {1, "BatchNorm2D", "weight", 4, 2, TensorRole::normalization}}};
  const std::vector<float> zero(6, 0.0f);
  for (const bool decay_norm : {true, false}) {
    optim::SGD sgd;
    sgd.learning_rate = 0.5;
    sgd.weight_decay = 0.1;
    sgd.decay_biases = false;
    sgd.decay_normalization = decay_norm;
    std::vector<float> p(6, 1.0f);
    optim::SGD::state<float> s(6);
    sgd.update(std::span<float>(p), std::span<const float>(zero), s, std::span<const TensorInfo>(tensors), StepInfo{1, 0.5});
    CHECK(p[0] == doctest::Approx(0.95f));  // weights decay
    CHECK(p[2] == 1.0f);                    // biases do not
    CHECK(p[4] == (decay_norm ? doctest::Approx(0.95f) : doctest::Approx(1.0f)));
  }
}

TEST_CASE("summary: BatchNorm's running estimates are counted apart from the trained parameters") {
  using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3, 1, 1>, BatchNorm2D<>, ReLU,
                         Residual<Block<Conv2D<4, 3, 1, 1>, BatchNorm2D<>>>, Flatten, Dense<8>, LayerNorm<>, Dense<3>>;
  const ModelSummary s = summary<Net>();
  CHECK(s.layers[1].parameters == 16);
  CHECK(s.layers[1].state == 8);
  CHECK(s.layers[3].state == 8);  // inside the residual block
  CHECK(s.state() == 16);
  CHECK(s.trainable() == s.parameters() - 16);
  CHECK(s.parameters() == Network<Net>::parameter_count);
  CHECK(s.to_string().find("), of which trained ") != std::string::npos);
  CHECK(s.to_string().find(", running statistics 16; forward FLOPs") != std::string::npos);
}

}  // namespace graph_norm
