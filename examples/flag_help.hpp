// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2026 The flotilla authors
// The help of the flags that several example and benchmark programs take: one text each, so that a
// flag means the same in every program that has it (tests/programs/test_flag_consistency.py checks
// every program's --help against the others').
#pragma once

namespace example::flag_help {

inline constexpr const char* data = "directory of the data set's files";
inline constexpr const char* epochs = "passes over the training set";
inline constexpr const char* batch = "samples per worker per step (a synchronous update takes this times the workers)";
inline constexpr const char* lr = "learning rate (its starting value, where the program anneals it)";
inline constexpr const char* momentum = "momentum (SGD with momentum only)";
inline constexpr const char* seed = "seed of the initial weights, the data order and any generated data";
inline constexpr const char* workers =
    "workers, each taking --batch samples per step (threads of this process, or a launched job's ranks less its servers)";
inline constexpr const char* servers = "parameter servers, where the program has them (a launched job's last ranks)";
inline constexpr const char* threads = "cores of each worker, sharing its batch";
inline constexpr const char* metrics = "per-epoch metrics file (.jsonl or .csv)";
inline constexpr const char* plot = "SVG plot of the per-epoch curves (loss, and accuracy or AUC)";
inline constexpr const char* trace = "Chrome-trace timeline of every rank (JSON)";
inline constexpr const char* step_log = "per-rank, per-step times and bytes (JSON lines)";
inline constexpr const char* overlap = "send gradients during backward: auto (where a core is free), always, never";
inline constexpr const char* resume =
    "continue from the newest checkpoint this program writes; with none there yet, start from the beginning "
    "(for restarts: flotilla-launch --restarts N); --epochs then counts the whole run";
inline constexpr const char* max_steps = "stop after this many steps of each worker (0: run every epoch)";
inline constexpr const char* synthetic = "use this many random samples instead of Fashion-MNIST";
inline constexpr const char* server_counts = "parameter server counts, comma-separated";
inline constexpr const char* ranks_per_host = "ranks on each host (for the cost model's hierarchical sum)";
// Click-through data (examples/ctr, bench/ctr).
inline constexpr const char* train = "Criteo-format training file (without it: --lines generated lines)";
inline constexpr const char* lines = "training lines to generate without --train (as flotilla-ctr-generate does)";
// The benchmarks' timing.
inline constexpr const char* steps = "timed steps in each run";
inline constexpr const char* warmup = "untimed steps before them";
inline constexpr const char* repeat = "timed runs of each configuration";

}  // namespace example::flag_help
