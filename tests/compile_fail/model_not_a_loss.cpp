// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The second argument of Model must be a loss.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using Net = Sequential<Input<4>, Dense<2>>;

#ifdef FLOTILLA_SHOULD_FAIL
using M = Model<Net, optim::SGD, optim::SGD>;
#else
using M = Model<Net, MSE, optim::SGD>;
#endif

int main() { return static_cast<int>(M::parameter_count) - 10; }
