// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Blocks, branches and residual connections (nn/block.hpp, nn/branches.hpp, nn/residual.hpp): their
// gradients against finite differences, their values against the layers they are made of, the
// tensor tables they declare, and training with them on every worker layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../common/check_gradients.hpp"
#include "../common/blobs.hpp"
#include "../common/quiet_fit.hpp"
#include "graph_common.hpp"
#include "flotilla/flotilla.hpp"
#include "flotilla/testing/gradient_check.hpp"

namespace graph_blocks {

template <class T>
double rel(const std::vector<T>& a, const std::vector<T>& b) {
  return graph_test::relative_difference<T>(a, b);
}

using namespace flotilla;
using flotilla::testing::check_layer;

namespace {

using Unit = Block<Conv2D<3, 3, 1, 1>, Tanh, Conv2D<3, 3, 1, 1>>;
using Down = Block<Conv2D<4, 3, 2, 1>, Tanh, Conv2D<4, 3, 1, 1>>;

template <class L>
std::vector<std::string_view> tensor_names() {
  std::vector<std::string_view> names;
  for (const auto& t : L::tensors) names.push_back(t.name);
  return names;
}

/// Forward of layer L (bound to In, double) on `x`, parameters drawn from seed 5.
template <class Spec, class In>
Matrix<double> run(const Matrix<double>& x, std::vector<double>& params) {
  using L = typename Spec::template layer<In, double>;
  L layer;
  params.resize(L::parameter_count);
  Generator g(5);
  if constexpr (L::parameter_count > 0) layer.initialize(std::span<double>(params), g);
  Matrix<double> y(static_cast<Eigen::Index>(L::output_shape::size), x.cols());
  const std::vector<std::uint64_t> ids(static_cast<std::size_t>(x.cols()), 0);
  layer.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), x.rows(), x.cols()), MatrixView<double>(y.data(), y.rows(), y.cols()),
                                    std::span<const double>(params), Mode::eval, ids, 0});
  return y;
}

Matrix<double> random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  Generator g(seed);
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = g.normal<double>();
  return m;
}

}  // namespace

TEST_CASE("block gradients equal finite differences: Block, Repeat, Residual, Concat, Add, nested") {
  CHECK_GRADIENTS((check_layer<Unit, Shape<3, 5, 4>>()));
  CHECK_GRADIENTS((check_layer<Block<Dense<5>, Tanh, Dropout<20>, Dense<3>>, Shape<4>>({.mode = Mode::train})));
  CHECK_GRADIENTS((check_layer<Repeat<3, Residual<Block<Dense<6>, Tanh>>>, Shape<6>>()));
  CHECK_GRADIENTS((check_layer<Residual<Unit>, Shape<3, 5, 4>>()));
  CHECK_GRADIENTS((check_layer<Residual<Down, Project>, Shape<2, 5, 6>>()));  // stride 2, more channels
  CHECK_GRADIENTS((check_layer<Residual<Block<Dense<4>, Sigmoid>, Project>, Shape<7>>()));
  CHECK_GRADIENTS((check_layer<Residual<Down, Block<Conv2D<4, 1, 2>, Tanh>>, Shape<2, 5, 6>>()));  // a shortcut of one's own
  CHECK_GRADIENTS((check_layer<Concat<Block<Conv2D<2, 3, 1, 1>, Tanh>, Identity, Conv2D<3, 1>>, Shape<2, 4, 3>>()));
  CHECK_GRADIENTS((check_layer<Concat<Dense<3>, Block<Dense<2>, Tanh>>, Shape<5>>()));
  CHECK_GRADIENTS((check_layer<Add<Dense<4>, Block<Dense<4>, Tanh>, Identity>, Shape<4>>()));
  CHECK_GRADIENTS((check_layer<Add<Identity, Unit>, Shape<3, 4, 4>>()));  // the identity first
  // A residual block inside a block inside a repeat, then a concatenation with the input.
  CHECK_GRADIENTS((check_layer<Concat<Repeat<2, Block<Residual<Unit>, Tanh>>, Identity>, Shape<3, 4, 3>>()));
}

TEST_CASE("a block computes what its layers compute one after another") {
  const Matrix<double> x = random_matrix(3 * 5 * 4, 2, 1);
  std::vector<double> pb, p1, p2, p3;
  const Matrix<double> whole = run<Unit, Shape<3, 5, 4>>(x, pb);
  // The same layers by hand, with the block's parameter slices.
  using C = Conv2D<3, 3, 1, 1>::layer<Shape<3, 5, 4>, double>;
  C first, last;
  Matrix<double> h(C::output_shape::size, 2), t(C::output_shape::size, 2), y(C::output_shape::size, 2);
  const std::vector<std::uint64_t> ids{0, 0};
  auto fwd = [&](C& c, const Matrix<double>& in, Matrix<double>& out, std::size_t offset) {
    c.forward(ForwardArgs<double>{ConstMatrixView<double>(in.data(), in.rows(), in.cols()), MatrixView<double>(out.data(), out.rows(), out.cols()),
                                  std::span<const double>(pb).subspan(offset, C::parameter_count), Mode::eval, ids, 0});
  };
  fwd(first, x, h, 0);
  t = h.array().tanh().matrix();
  fwd(last, t, y, C::parameter_count);
  CHECK((whole - y).norm() < 1e-12 * y.norm());

  // Residual<Unit> = Unit(x) + x: the block run alone on the residual's parameters (all the
  // body's: the identity has none) plus the input.
  std::vector<double> pr;
  const Matrix<double> res = run<Residual<Unit>, Shape<3, 5, 4>>(x, pr);
  CHECK(pr.size() == pb.size());
  using B = Unit::layer<Shape<3, 5, 4>, double>;
  B body;
  Matrix<double> by(B::output_shape::size, 2);
  body.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), x.rows(), x.cols()), MatrixView<double>(by.data(), by.rows(), by.cols()),
                                   std::span<const double>(pr), Mode::eval, ids, 0});
  CHECK((res - (by + x)).norm() < 1e-12 * res.norm());
}

TEST_CASE("a forward no backward follows keeps less, gives the same outputs, and refuses a backward") {
  using Net = Sequential<Input<3, 6, 5>, Repeat<2, Residual<Block<Conv2D<3, 3, 1, 1>, Tanh, Conv2D<3, 3, 1, 1>, Tanh>>>, Flatten,
                         Dense<4>>;
  Network<Net, double> keeping, passing;
  std::vector<double> p(Network<Net, double>::parameter_count);
  keeping.initialize(p, 3);
  const Matrix<double> x = random_matrix(90, 4, 9);
  const auto in = ConstMatrixView<double>(x.data(), 90, 4);
  const Matrix<double> a = keeping.forward(in, p, RunInfo{});
  RunInfo inference;
  inference.backward_follows = false;
  const Matrix<double> b = passing.forward(in, p, inference);
  CHECK(a == b);
  const Matrix<double> dy = Matrix<double>::Ones(4, 4);
  std::vector<double> g(p.size(), 0.0);
  CHECK_NOTHROW(keeping.backward(ConstMatrixView<double>(dy.data(), 4, 4), p, g));
  CHECK_THROWS_WITH_AS(passing.backward(ConstMatrixView<double>(dy.data(), 4, 4), p, g),
                       doctest::Contains("backward_follows = false"), Error);
}

TEST_CASE("Concat lays the branches' channels side by side at every pixel (images are channels-last)") {
  // Identity (2 channels) then a 1x1 convolution with 3 filters: every pixel's 5 values are the
  // input's 2 followed by the convolution's 3.
  using Spec = Concat<Identity, Conv2D<3, 1>>;
  using L = Spec::layer<Shape<2, 3, 2>, double>;
  static_assert(std::is_same_v<L::output_shape, Shape<5, 3, 2>>);
  const Matrix<double> x = random_matrix(12, 3, 2);
  std::vector<double> p, pc;
  const Matrix<double> y = run<Spec, Shape<2, 3, 2>>(x, p);
  // The convolution alone, with the Concat's second slice (all its parameters).
  using CL = Conv2D<3, 1>::layer<Shape<2, 3, 2>, double>;
  CL conv;
  Matrix<double> c(CL::output_shape::size, 3);
  const std::vector<std::uint64_t> ids(3, 0);
  conv.forward(ForwardArgs<double>{ConstMatrixView<double>(x.data(), 12, 3), MatrixView<double>(c.data(), c.rows(), 3),
                                   std::span<const double>(p), Mode::eval, ids, 0});
  for (Eigen::Index s = 0; s < 3; ++s)
    for (Eigen::Index pixel = 0; pixel < 6; ++pixel) {
      for (Eigen::Index k = 0; k < 2; ++k) CHECK(y(pixel * 5 + k, s) == x(pixel * 2 + k, s));
      for (Eigen::Index k = 0; k < 3; ++k) CHECK(y(pixel * 5 + 2 + k, s) == c(pixel * 3 + k, s));
    }
  // Vectors: one after the other.
  static_assert(std::is_same_v<Concat<Dense<3>, Identity, Dense<2>>::layer<Shape<4>, float>::output_shape, Shape<9>>);
}

TEST_CASE("blocks declare their parts' tensors, named by where they sit, and their shapes and sizes") {
  using R = Residual<Down, Project>::layer<Shape<2, 6, 6>, float>;
  static_assert(std::is_same_v<R::output_shape, Shape<4, 3, 3>>);
  CHECK(tensor_names<R>() == std::vector<std::string_view>{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
                                                            "shortcut.weight", "shortcut.bias"});
  CHECK(R::parameter_count == (4 * 9 * 2 + 4) + (4 * 9 * 4 + 4) + (4 * 2 + 4));
  CHECK(R::tensors[1].role == TensorRole::bias);
  using P = Repeat<12, Residual<Block<Dense<6>, Tanh>>>::layer<Shape<6>, float>;
  CHECK(P::tensors.size() == 24);
  CHECK(P::tensors[22].name == "11.body.0.weight");
  CHECK(P::parameter_count == 12 * 42);
  using N = Network<Sequential<Input<1, 6, 6>, Conv2D<2, 3, 1, 1>, Residual<Block<Conv2D<2, 3, 1, 1>, ReLU>>, Flatten, Dense<3>>>;
  CHECK(N::tensors[2].layer_name == "Residual");
  CHECK(N::tensors[2].name == "body.0.weight");
  CHECK(N::depth == 4);
  // A block's FLOPs are its layers'.
  using U = Unit::layer<Shape<3, 5, 4>, float>;
  CHECK(U::forward_flops == 2 * (2ull * 3 * 27 * 20) + 60);
}

TEST_CASE("summary: a block is one row with its parameters and FLOPs") {
  using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3, 1, 1>, Residual<Block<Conv2D<4, 3, 1, 1>, ReLU, Conv2D<4, 3, 1, 1>>>,
                         Residual<Block<Conv2D<8, 3, 2, 1>, ReLU, Conv2D<8, 3, 1, 1>>, Project>, Flatten, Dense<3>>;
  const ModelSummary s = summary<Net>();
  REQUIRE(s.layers.size() == 5);
  CHECK(s.layers[1].name == "Residual");
  CHECK(s.layers[1].parameters == 2 * (4 * 36 + 4));
  CHECK(s.layers[2].output_shape == std::vector<std::size_t>{8, 4, 4});
  CHECK(s.layers[2].parameters == (8 * 36 + 8) + (8 * 72 + 8) + (8 * 4 + 8));
  CHECK(s.parameters() == Network<Net>::parameter_count);
}

// ---- training -----------------------------------------------------------------------------------

namespace {

// A small residual network over the 6x6 blobs: a stem, an identity block, a projection block with
// stride 2, and a branch-and-concatenate head.
using ResNet = Sequential<Input<1, 6, 6>, Conv2D<3, 3, 1, 1>, ReLU,                              //
                          Residual<Block<Conv2D<3, 3, 1, 1>, ReLU, Conv2D<3, 3, 1, 1>>>, ReLU,   //
                          Residual<Block<Conv2D<4, 3, 2, 1>, ReLU, Conv2D<4, 3, 1, 1>>, Project>, ReLU,  //
                          Flatten, Concat<Dense<5>, Block<Dense<3>, Tanh>>, Dropout<10>, Dense<3>>;

template <class M, class P = policy::Synchronous<>>
std::vector<typename M::scalar_type> train(const data::Dataset<typename M::scalar_type>& d, std::size_t batch,
                                           std::size_t workers) {
  return graph_test::trained_parameters<M, P>(d, {.batch = batch, .workers = workers});
}

}  // namespace

TEST_CASE("a residual network: sync training on N workers equals one worker with an N-times batch") {
  using MD = Model<ResNet, SoftmaxCrossEntropy, optim::Momentum, double>;
  using MF = Model<ResNet, SoftmaxCrossEntropy, optim::Adam, float>;
  const auto dd = flotilla_test::blobs<double>(240, 4);
  const auto df = flotilla_test::blobs<float>(240, 4);
  for (std::size_t n : {2u, 4u}) {
    CAPTURE(n);
    const auto one = train<MD>(dd, 12 * n, 1);
    CHECK(rel(one, train<MD>(dd, 12, n)) < 1e-12);
    CHECK(rel(one, train<MD, policy::Synchronous<topology::ParameterServer>>(dd, 12, n)) < 1e-12);
    CHECK(rel(train<MF>(df, 12 * n, 1), train<MF>(df, 12, n)) < 1e-5);
  }
}

TEST_CASE("a residual network learns, and resumes from a checkpoint bit for bit") {
  using M = Model<ResNet, SoftmaxCrossEntropy, optim::Adam, float>;
  const auto train_set = flotilla_test::blobs<float>(600, 6), test_set = flotilla_test::blobs<float>(300, 7);
  TrainerOptions<M> o;
  o.optimizer.learning_rate = 0.01;
  o.batch_size = 20;
  o.workers = 2;
  o.seed = 3;
  Trainer<M> whole(o);
  whole.fit(train_set, nullptr, flotilla_test::quiet(4));
  CHECK(whole.evaluate(test_set).accuracy > 0.9);

  // Stopped after 37 updates, as if killed, and resumed from the newest set (step 30).
  graph_test::check_resume_bit_for_bit(whole, o, train_set, 4, 37, 10, "graph_blocks");
}

TEST_CASE("a residual network in a pipeline: cuts fall between blocks, and the steps are one worker's") {
  using M = Model<ResNet, SoftmaxCrossEntropy, optim::Adam, double>;
  const auto d = flotilla_test::blobs<double>(96, 8);
  // Cut after the identity block's ReLU and after the projection block: stages of whole blocks.
  graph_test::check_pipeline_equals_one_worker<M>(d, pipeline::Plan::from_cuts<ResNet, double>({4, 5}), 4);
  graph_test::check_pipeline_equals_one_worker<M>(d, pipeline::Plan::automatic<ResNet, double>(3), 4);
}

}  // namespace graph_blocks
