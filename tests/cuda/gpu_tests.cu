// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The GPU tests as one translation unit. nvcc reads flotilla's headers several times per
// translation unit (its front end, the device compiler, the host compiler), and the layer and
// training files instantiate the same layers: compiled apart they took 111 s, together 68 s. Each
// file keeps to a namespace of its own.
#include "test_layers.cu"
#include "test_training.cu"
// Last: Thrust brings libcu++'s global namespace `cuda`, which makes `cuda::` ambiguous in the
// files above (they say `using namespace flotilla;`); templates bind such names where defined.
#include "test_embedding.cu"
