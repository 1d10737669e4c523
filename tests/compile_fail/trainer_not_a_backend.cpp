// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The third argument of Trainer must be a transport backend.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;

#ifdef FLOTILLA_SHOULD_FAIL
using B = transport::InProcessEndpoint;  // an endpoint, not a backend
#else
using B = transport::InProcess;
#endif

int main() {
  Trainer<M, policy::Synchronous<>, B> t;
  return static_cast<int>(t.step());
}
