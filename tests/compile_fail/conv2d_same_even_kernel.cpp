// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// `same` padding pads (K - 1) / 2 on each side: an even kernel would need uneven padding.
#include "flotilla/nn/conv2d.hpp"
#include "flotilla/nn/network.hpp"
#include "flotilla/nn/sequential.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<3, 8, 8>, Conv2D<4, 4, 1, same>>;
#else
using Net = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, same>>;
#endif

int main() {
  Network<Net> net;
  return static_cast<int>(net.batch_size());
}
