// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A device::Cuda model in a Trainer needs the CUDA engine's header (compiled by nvcc); without it,
// the compiler says which header to include rather than failing somewhere inside the trainer.
#include "flotilla/flotilla.hpp"

using namespace flotilla;
using Net = Sequential<Input<8>, Dense<3>>;

#ifdef FLOTILLA_SHOULD_FAIL
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float, device::Cuda>;
#else
using M = Model<Net, SoftmaxCrossEntropy, optim::SGD, float, device::Cpu>;
#endif

int main() {
  Trainer<M> t;
  return static_cast<int>(t.step());
}
