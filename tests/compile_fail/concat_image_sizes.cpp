// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Concatenating images of different sizes: a branch with stride 2 beside one without.
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<3, 8, 8>, Concat<Conv2D<4, 3, 2, 1>, Conv2D<4, 1>>, Flatten, Dense<1>>;
#else
using Net = Sequential<Input<3, 8, 8>, Concat<Conv2D<4, 3, 1, 1>, Conv2D<4, 1>>, Flatten, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
