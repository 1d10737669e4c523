// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A classification loss needs a vector of class scores, not an image.
#include "flotilla/flotilla.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<1, 8, 8>, Conv2D<10, 3>>;
#else
using Net = Sequential<Input<1, 8, 8>, Conv2D<10, 3>, Flatten, Dense<10>>;
#endif
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD>;

int main() { return M::parameter_count > 0 ? 0 : 1; }
