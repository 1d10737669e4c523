// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Dropout<100, 100> would drop everything.
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/dropout.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<8>, Dropout<100, 100>, Dense<1>>;
#else
using Net = Sequential<Input<8>, Dropout<50, 100>, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
