// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The networks whose PyTorch form is checked: the examples' MLP, CNN and residual network, and one
// that has every other layer with a PyTorch counterpart (images of three channels, so that the
// channels-last layout shows; a LayerNorm over an image; a BatchNorm1D after a Flatten; branches
// joined along channels and added).
#pragma once

#include <flotilla/flotilla.hpp>

#include <cstdint>
#include <ratio>
#include <span>
#include <string>

#include "fashion_mnist_resnet.hpp"

namespace interop_nets {

namespace fl = flotilla;

using Mlp = fl::Sequential<fl::Input<784>, fl::Dense<256>, fl::ReLU, fl::Dense<128>, fl::ReLU, fl::Dense<10>>;
using Cnn = fl::Sequential<fl::Input<1, 28, 28>, fl::Conv2D<32, 5>, fl::ReLU, fl::MaxPool2D<2>, fl::Conv2D<64, 5>, fl::ReLU,
                           fl::MaxPool2D<2>, fl::Flatten, fl::Dense<10>>;
using ResNet = example::resnet::Net<fl::BatchNorm2D<>>;
using Zoo = fl::Sequential<
    fl::Input<3, 8, 8>, fl::Conv2D<4, 3, 1, fl::same>, fl::BatchNorm2D<>, fl::LeakyReLU<std::ratio<1, 5>>,
    fl::Concat<fl::Block<fl::Conv2D<2, 1>, fl::Tanh>, fl::AvgPool2D<3, 1, 1>>,       // 6 x 8 x 8
    fl::MaxPool2D<2>, fl::LayerNorm<>, fl::Flatten, fl::BatchNorm1D<>, fl::Dropout<10>,  // 96
    fl::Add<fl::Dense<12>, fl::Block<fl::Dense<12>, fl::Sigmoid>>, fl::GELU,
    fl::Residual<fl::Block<fl::Dense<12>, fl::ReLU>>, fl::Residual<fl::Block<fl::Dense<7>>, fl::Project>,
    fl::Concat<fl::Dense<3>, fl::Block<fl::Dense<2>, fl::ReLU>>, fl::Dense<5>>;

/// Parameters drawn as training would start them, and normalisation parameters and statistics
/// moved away from their initial 1s and 0s, so that a layout mistake in any of them shows.
template <class Net>
std::vector<float> parameters(std::uint64_t seed) {
  using N = fl::Network<Net, float>;
  std::vector<float> p(N::parameter_count);
  N().initialize(p, seed);
  fl::Generator g(seed + 1);
  auto uniform = [&](double lo, double hi) { return static_cast<float>(lo + (hi - lo) * static_cast<double>(g() >> 11) * 0x1.0p-53); };
  for (const auto& t : N::tensors) {
    if (t.role != fl::TensorRole::normalization && t.role != fl::TensorRole::state) continue;
    const std::string name(t.name);
    const bool scale = name.ends_with("weight") || name.ends_with("running_var");
    for (std::size_t i = 0; i < t.size; ++i) p[t.offset + i] = scale ? uniform(0.5, 1.5) : uniform(-0.5, 0.5);
  }
  return p;
}

}  // namespace interop_nets
