// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// policy::Compressed needs a codec.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using M = Model<Sequential<Input<4>, Dense<2>>, MSE, optim::SGD>;

#ifdef FLOTILLA_SHOULD_FAIL
using P = policy::Compressed<int>;
#else
using P = policy::Compressed<codec::Fp16>;
#endif

int main() {
  Trainer<M, P> t;
  return static_cast<int>(t.step());
}
