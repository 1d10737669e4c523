// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// A compile-time split into more stages than the network has layers.
#include "flotilla/nn/dense.hpp"
#include "flotilla/pipeline/plan.hpp"

using namespace flotilla;
using Net = Sequential<Input<4>, Dense<3>, Dense<2>>;

#ifdef FLOTILLA_SHOULD_FAIL
constexpr auto bounds = pipeline::balanced_bounds<Net, 3>();
#else
constexpr auto bounds = pipeline::balanced_bounds<Net, 2>();
#endif

int main() { return static_cast<int>(bounds[1]); }
