// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A reproducible sum takes one batch per update: accumulating micro-batches would add them in an
// order of their own.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;

#ifdef FLOTILLA_SHOULD_FAIL
using P = policy::Accumulate<2, policy::Reproducible>;
#else
using P = policy::Reproducible;
#endif

int main() {
  Trainer<M, P> t;
  return static_cast<int>(t.step());
}
