// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A residual block that changes the shape (stride 2, more channels) with the identity shortcut:
// the block's output cannot be added to its input without a projection.
#include "flotilla/nn/block.hpp"
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/residual.hpp"

using namespace flotilla;

using Down = Block<Conv2D<8, 3, 2, 1>, Conv2D<8, 3, 1, 1>>;
#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<4, 8, 8>, Residual<Down>, Flatten, Dense<1>>;
#else
using Net = Sequential<Input<4, 8, 8>, Residual<Down, Project>, Flatten, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
