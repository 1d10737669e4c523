// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Bounded staleness needs parameter servers too.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;

#ifdef FLOTILLA_SHOULD_FAIL
using P = policy::BoundedStaleness<2, topology::Ring>;
#else
using P = policy::BoundedStaleness<2>;
#endif

int main() {
  Trainer<M, P> t;
  return static_cast<int>(t.step());
}
