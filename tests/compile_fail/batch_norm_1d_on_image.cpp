// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// BatchNorm1D (per feature of a vector) on an image: per channel is BatchNorm2D's axis.
#include "flotilla/nn/batch_norm.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, BatchNorm1D<>, Flatten, Dense<1>>;
#else
using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, BatchNorm2D<>, Flatten, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
