// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
#pragma once
#ifndef FLOTILLA_PIPELINE_HPP_INCLUDED
#define FLOTILLA_PIPELINE_HPP_INCLUDED
// Model-parallel, pipelined training: a network split into stages on different ranks, with
// micro-batches keeping the stages busy at once. See docs/pipeline.md.
#include "flotilla/pipeline/balance.hpp"
#include "flotilla/pipeline/cost_model.hpp"
#include "flotilla/pipeline/layout.hpp"
#include "flotilla/pipeline/plan.hpp"
#include "flotilla/pipeline/runner.hpp"
#include "flotilla/pipeline/schedule.hpp"
#include "flotilla/pipeline/stage.hpp"
#include "flotilla/pipeline/stage_network.hpp"
#include "flotilla/pipeline/timing.hpp"
#include "flotilla/pipeline/trainer.hpp"
#endif  // FLOTILLA_PIPELINE_HPP_INCLUDED
