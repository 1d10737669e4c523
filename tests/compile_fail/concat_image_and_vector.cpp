// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Concatenating an image branch with a vector branch.
#include "flotilla/nn/block.hpp"
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<3, 8, 8>, Concat<Conv2D<4, 1>, Block<Flatten, Dense<8>>>, Flatten, Dense<1>>;
#else
using Net = Sequential<Input<3, 8, 8>, Concat<Block<Conv2D<4, 1>, Flatten>, Block<Flatten, Dense<8>>>, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
