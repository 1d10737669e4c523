// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Embedding rows live on parameter servers: a sparse trainer on a ring policy is refused.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = sparse::CtrModel<sparse::Inputs<2, 1>, Embedding<2>, Sequential<Input<5>, Dense<1>>>;

#ifdef FLOTILLA_SHOULD_FAIL
using P = policy::Synchronous<topology::Ring>;
#else
using P = policy::Synchronous<topology::ParameterServer>;
#endif

int main() {
  sparse::Trainer<M, P> t;
  return static_cast<int>(t.steps());
}
