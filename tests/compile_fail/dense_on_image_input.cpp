// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Dense straight after an image input (Input<C, H, W>) without Flatten.
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/flatten.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 28, 28>, Dense<10>>;
#else
using Net = Sequential<Input<1, 28, 28>, Flatten, Dense<10>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
