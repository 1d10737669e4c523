// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Asynchronous updates need parameter servers: there is no "asynchronous" on a ring.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;

#ifdef FLOTILLA_SHOULD_FAIL
using P = policy::Asynchronous<topology::Ring>;
#else
using P = policy::Asynchronous<topology::ParameterServer>;
#endif

int main() {
  Trainer<M, P> t;
  return static_cast<int>(t.step());
}
