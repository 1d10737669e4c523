// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_COSTMODEL_HPP_INCLUDED
#define FLOTILLA_PIPELINE_COSTMODEL_HPP_INCLUDED
// The per-layer cost estimates the automatic split balances and a Plan prints: those of
// nn/layer_cost.hpp, under the names the pipeline has always used for them.
#include "flotilla/nn/layer_cost.hpp"

namespace flotilla::pipeline {

using flotilla::estimate_layer_cost;
using flotilla::estimated_compute;
using flotilla::estimated_costs;
using flotilla::LayerCost;

}  // namespace flotilla::pipeline
#endif  // FLOTILLA_PIPELINE_COSTMODEL_HPP_INCLUDED
