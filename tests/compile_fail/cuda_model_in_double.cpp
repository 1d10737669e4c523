// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The CUDA backend computes in float: a double model on device::Cuda is refused.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using Net = Sequential<Input<8>, Dense<3>>;

#ifdef FLOTILLA_SHOULD_FAIL
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, double, device::Cuda>;
#else
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float, device::Cuda>;
#endif

int main() { return static_cast<int>(M::parameter_count) == 27 ? 0 : 1; }
