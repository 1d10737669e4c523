// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A click-through model's tower ends in one value, the click logit.
#include "flotilla/nn/activation.hpp"
#include "flotilla/nn/dense.hpp"
#include "flotilla/sparse/ctr_model.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Tower = Sequential<Input<6>, Dense<8>, ReLU, Dense<2>>;
#else
using Tower = Sequential<Input<6>, Dense<8>, ReLU, Dense<1>>;
#endif
using M = sparse::CtrModel<sparse::Inputs<2, 2>, Embedding<2>, Tower>;

int main() { return static_cast<int>(M::fields) - 2; }
