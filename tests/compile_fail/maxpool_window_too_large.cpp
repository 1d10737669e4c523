// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A MaxPool2D window larger than its input image (here after a Conv2D shrank it to 2x2).
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/maxpool2d.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 4, 4>, Conv2D<2, 3>, MaxPool2D<3>>;
#else
using Net = Sequential<Input<1, 4, 4>, Conv2D<2, 3>, MaxPool2D<2>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
