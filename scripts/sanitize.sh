#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Builds flotilla's tests with sanitizers and runs them: AddressSanitizer with UndefinedBehavior-
# Sanitizer (out-of-bounds, use-after-free, leaks, overflow, misaligned access), then
# ThreadSanitizer (data races between the threads of one process: the in-process transport, the
# ready runner, the TCP transport's helper threads). Every finding fails its test.
#
#   scripts/sanitize.sh                  # both, in build/asan and build/tsan
#   SANITIZERS=thread scripts/sanitize.sh
#   JOBS=2, CMAKE_ARGS=...               # as for scripts/test.sh
#
# Not CI: the two builds take about as long as CI's whole run. Left out: the MPI transport (Open
# MPI's own allocations and threads are not ours to report), the CUDA backend (device code has
# compute-sanitizer: scripts/gpu_check.sh), the accuracy tests (real training, 10-20x slower under
# ThreadSanitizer) and what only compiles (packaging, compile_fail), or has its own sanitizers
# (fuzz). Between processes, shared memory is outside what ThreadSanitizer sees; the shared-memory
# allreduce's tests check its results instead.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${JOBS:-$(nproc)}
# The programs of the tests run below (not the header and packaging checks, which only compile).
targets=(flotilla-launch flotilla_unit_tests flotilla_codec_native_tests flotilla_gemm_native_tests flotilla_cuda_host_tests
         flotilla_tcp_rank flotilla_tcp_tests flotilla_distributed_tcp flotilla_pipeline_tests
         flotilla_doc_examples)
excluded='packaging|compile_fail|fuzz|mpi|accuracy|bench|gpu'

# Reports name the source line; a leak or a race ends the program with a failure status.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1}

status=0
for sanitizer in ${SANITIZERS:-address,undefined thread}; do
  name=asan
  [ "$sanitizer" = thread ] && name=tsan
  dir=${FLOTILLA_SANITIZE_BUILD_ROOT:-build}/$name
  echo "== -fsanitize=$sanitizer in $dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # CMAKE_ARGS is split on purpose
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOTILLA_SANITIZE="$sanitizer" -DFLOTILLA_WERROR=ON \
        -DFLOTILLA_WITH_MPI=OFF -DFLOTILLA_WITH_CUDA=OFF -DFLOTILLA_BUILD_EXAMPLES=OFF -DFLOTILLA_BUILD_BENCH=OFF \
        ${CMAKE_ARGS:-} > "$dir/configure.log" || { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" --parallel "$jobs" --target "${targets[@]}"
  ctest --test-dir "$dir" --output-on-failure --parallel "$jobs" --timeout 1200 -LE "$excluded" || status=1
done
exit $status
