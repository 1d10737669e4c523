// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// flotilla::summary: a model's layers, output shapes, parameters and forward FLOPs, against the
// arithmetic done by hand for the Fashion-MNIST CNN of the examples.
#include <doctest/doctest.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "flotilla/flotilla.hpp"
#include "flotilla/nn/summary.hpp"

namespace summary_test {

namespace fl = flotilla;
using Cnn = fl::Sequential<fl::Input<1, 28, 28>,                                    //
                           fl::Conv2D<32, 5>, fl::ReLU, fl::MaxPool2D<2>,  //
                           fl::Conv2D<64, 5>, fl::ReLU, fl::MaxPool2D<2>,  //
                           fl::Flatten, fl::Dense<10>>;

using Dims = std::vector<std::size_t>;

TEST_CASE("summary: shapes, parameters and FLOPs of each layer, and the totals") {
  const fl::ModelSummary s = fl::summary<Cnn>();
  CHECK(s.input_shape == Dims{1, 28, 28});
  REQUIRE(s.layers.size() == 8);
  struct Expected {
    const char* name;
    Dims shape;
    std::size_t parameters;
    std::uint64_t flops;
  };
  // A convolution's FLOPs: two per multiply-add of its weights, at every output pixel; a Dense
  // layer's the same at its one position; other layers one per input value.
  const Expected want[] = {
      {"Conv2D", {32, 24, 24}, 32 * 25 + 32, 2ull * 32 * 25 * 24 * 24},
      {"ReLU", {32, 24, 24}, 0, 32 * 24 * 24},
      {"MaxPool2D", {32, 12, 12}, 0, 32 * 24 * 24},
      {"Conv2D", {64, 8, 8}, 64 * 25 * 32 + 64, 2ull * 64 * 25 * 32 * 8 * 8},
      {"ReLU", {64, 8, 8}, 0, 64 * 8 * 8},
      {"MaxPool2D", {64, 4, 4}, 0, 64 * 8 * 8},
      {"Flatten", {1024}, 0, 1024},
      {"Dense", {10}, 1024 * 10 + 10, 2ull * 1024 * 10},
  };
  std::size_t parameters = 0;
  std::uint64_t flops = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(s.layers[i].name == want[i].name);
    CHECK(s.layers[i].output_shape == want[i].shape);
    CHECK(s.layers[i].parameters == want[i].parameters);
    CHECK(s.layers[i].forward_flops == want[i].flops);
    parameters += want[i].parameters;
    flops += want[i].flops;
  }
  CHECK(s.parameters() == parameters);
  CHECK(s.parameters() == fl::Network<Cnn, float>::parameter_count);
  CHECK(s.forward_flops() == flops);
  CHECK(s.parameter_bytes() == parameters * sizeof(float));
  CHECK(fl::summary<Cnn, double>().parameter_bytes() == parameters * sizeof(double));
}

TEST_CASE("summary: the printed table, one line per layer between the input and the totals") {
  std::ostringstream os;
  os << fl::summary<fl::Sequential<fl::Input<784>, fl::Dense<256>, fl::ReLU, fl::Dense<10>>>();
  const std::string expected =
      "#  layer  output shape  parameters  forward FLOPs\n"
      "   input  784\n"
      "1  Dense  256              200,960        401,408\n"
      "2  ReLU   256                    0            256\n"
      "3  Dense  10                 2,570          5,120\n"
      "   total                   203,530        406,784\n"
      "parameters: 203,530 (795.0 KiB); forward FLOPs per sample: 406,784\n";
  CHECK(os.str() == expected);
}

}  // namespace summary_test
