// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// LeakyReLU<0> cannot tell the input's sign from its output in backward (and is ReLU anyway).
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<8>, Dense<4>, LeakyReLU<std::ratio<0>>, Dense<1>>;
#else
using Net = Sequential<Input<8>, Dense<4>, LeakyReLU<std::ratio<1, 10>>, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
