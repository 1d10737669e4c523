// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A Conv2D kernel larger than its (unpadded) input image.
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 4, 4>, Conv2D<2, 5>>;
#else
using Net = Sequential<Input<1, 4, 4>, Conv2D<2, 3>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
