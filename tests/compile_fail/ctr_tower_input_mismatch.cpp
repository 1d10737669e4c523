// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A click-through model's tower must take every field's pooled embedding and the numeric
// features: 3 fields of 4 values and 2 numeric features are 14 inputs, not 12.
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/sparse/ctr_model.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Tower = Sequential<Input<12>, Dense<8>, ReLU, Dense<1>>;
#else
using Tower = Sequential<Input<3 * 4 + 2>, Dense<8>, ReLU, Dense<1>>;
#endif
using M = sparse::CtrModel<sparse::Inputs<3, 2>, Embedding<4>, Tower>;

int main() { return static_cast<int>(M::tower_inputs) - 14; }
