// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The second argument of Trainer must be an update policy.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;
struct NotAPolicy {};

#ifdef FLOTILLA_SHOULD_FAIL
using P = NotAPolicy;
#else
using P = policy::Synchronous<>;
#endif

int main() {
  Trainer<M, P> t;
  return static_cast<int>(t.step());
}
