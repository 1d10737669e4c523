// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Adding branches of different shapes.
#include "flotilla/nn/branches.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/network.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<6>, Add<Dense<4>, Dense<5>>, Dense<1>>;
#else
using Net = Sequential<Input<6>, Add<Dense<4>, Dense<4>>, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
