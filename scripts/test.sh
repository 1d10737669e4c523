#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Builds flotilla with warnings as errors and runs every test; exits non-zero on any failure.
# What CI runs (.ci/run). On a fresh Debian 12 machine, from anywhere:
#
#   scripts/test.sh
#
# Environment: FLOTILLA_BUILD_DIR (default build/ci), JOBS (default: all cores), CMAKE_ARGS (extra
# configure arguments, e.g. "-DCMAKE_CXX_COMPILER=clang++").
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

# OpenMPI refuses to start as root unless told it may (CI runs as root). Harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

build_dir=${FLOTILLA_BUILD_DIR:-build/ci}
jobs=${JOBS:-$(nproc)}

# FLOTILLA_WITH_MPI: build and run the MPI transport's tests too (under mpirun, label "mpi").
# FLOTILLA_PROGRAM_OPTIMIZATION=-O0: the examples and benchmarks only have to build and start here
# (bench_smoke runs each benchmark on tiny inputs); -O0 compiles them faster than -O1
# (docs/benchmarks.md, "Build and CI time"; scripts/train.sh builds the main example with full
# optimisation in build/release).
# FLOTILLA_GCC_FEWER_COLLECTIONS: g++ collects garbage less often (faster, more memory per job).
# shellcheck disable=SC2086  # CMAKE_ARGS is split on purpose
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_WERROR=ON -DFLOTILLA_WITH_MPI=ON \
  -DFLOTILLA_PROGRAM_OPTIMIZATION=-O0 -DFLOTILLA_GCC_FEWER_COLLECTIONS=ON ${CMAKE_ARGS:-}
cmake --build "$build_dir" --parallel "$jobs"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs" --timeout 900
