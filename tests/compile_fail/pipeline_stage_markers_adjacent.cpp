// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// Two pipeline::Stage markers in a row: the stage between them would hold nothing but a marker.
#include "flotilla/nn/dense.hpp"
#include "flotilla/pipeline/plan.hpp"

using namespace flotilla;

#ifdef FLOTILLA_SHOULD_FAIL
using Net = Sequential<Input<4>, Dense<3>, pipeline::Stage, pipeline::Stage, Dense<2>>;
#else
using Net = Sequential<Input<4>, Dense<3>, pipeline::Stage, Dense<2>>;
#endif

int main() { return static_cast<int>(pipeline::Plan::from_markers<Net>().stages()); }
