// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// AvgPool2D pools windows of an image; a vector input has none.
#include "flotilla/nn/avg_pool2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<64>, AvgPool2D<2>, Dense<10>>;
#else
using Net = Sequential<Input<1, 8, 8>, AvgPool2D<2>, Flatten, Dense<10>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
