// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// GlobalAvgPool averages each channel over the pixels: after Flatten there are none.
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/global_avg_pool.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, Flatten, GlobalAvgPool, Dense<10>>;
#else
using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, GlobalAvgPool, Dense<10>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
