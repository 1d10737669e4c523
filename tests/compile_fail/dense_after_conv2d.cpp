// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Dense directly after Conv2D: Conv2D's output is an image, Dense wants a vector.
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 8, 8>, Conv2D<2, 3>, Dense<4>>;
#else
using Net = Sequential<Input<1, 8, 8>, Conv2D<2, 3>, Flatten, Dense<4>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
