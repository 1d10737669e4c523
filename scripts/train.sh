#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Builds flotilla's main example in Release and runs it; any arguments go to the example.
# On a fresh Debian 12 machine, from anywhere:
#
#   scripts/train.sh                 # e.g. scripts/train.sh --epochs 5, scripts/train.sh --help
#
# The example runs in the directory you call this from (its output files land there).
# Environment: FLOTILLA_BUILD_DIR (default build/release, relative to the repository), JOBS
# (default: all cores).
set -euo pipefail

# The example target (examples/<name>) to build and run.
EXAMPLE=fashion_mnist_distributed

root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

# OpenMPI refuses to start as root unless told it may. Harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

build_dir=${FLOTILLA_BUILD_DIR:-build/release}
case $build_dir in /*) ;; *) build_dir=$root/$build_dir ;; esac
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_BUILD_EXAMPLES=ON \
  -DFLOTILLA_BUILD_TESTS=OFF -DFLOTILLA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" --target "$EXAMPLE" --parallel "${JOBS:-$(nproc)}"
exec "$build_dir/examples/$EXAMPLE" "$@"
