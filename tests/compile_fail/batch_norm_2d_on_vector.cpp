// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// BatchNorm2D (per channel of an image) on a vector: the normalisation's axis does not exist.
#include "flotilla/nn/batch_norm.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/nn/network.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<16>, Dense<8>, BatchNorm2D<>, Dense<1>>;
#else
using Net = Sequential<Input<16>, Dense<8>, BatchNorm1D<>, Dense<1>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
