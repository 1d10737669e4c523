#!/usr/bin/env bash
# On a machine with a GPU: builds the CUDA backend's tests and benchmark, runs the tests
# (ctest -L cuda), then the benchmark against PyTorch, and leaves the logs and the JSON in
# $OUT (the device tool's output folder) or gpu-results/. One command, for a session with little
# GPU time:
#
#   scripts/gpu_check.sh            # tests, then MLP and CNN at batch 64 and 256, 3 runs each
#   RUNS=5 scripts/gpu_check.sh     # more runs;  SKIP_BENCH=1: tests only
#
# Uses .gpu-deps/ (scripts/gpu_vendor_deps.sh) for Eigen and doctest when present.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
build=${FLOTILLA_GPU_BUILD_DIR:-build-gpu}
prefix=""
[ -d .gpu-deps ] && prefix="-DCMAKE_PREFIX_PATH=$PWD/.gpu-deps"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
{
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_WITH_CUDA=ON -DFLOTILLA_WERROR=OFF \
        -DFLOTILLA_BUILD_EXAMPLES=OFF -DFLOTILLA_BUILD_TOOLS=OFF -DFLOTILLA_WITH_TCP=OFF $prefix &&
  cmake --build "$build" -j "$(nproc)" --target flotilla_cuda_host_tests flotilla_cuda_gpu_tests flotilla_gpu_train_bench
} > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log"; tail -40 "$out/build.log"; exit 1; }
ctest --test-dir "$build" -L cuda --output-on-failure 2>&1 | tee "$out/ctest.log"
# The full doctest report of the GPU tests (every check, with its INFO on failure).
"$build/tests/cuda/flotilla_cuda_gpu_tests" --success=false > "$out/gpu_tests.log" 2>&1
if [ -z "${SKIP_BENCH:-}" ]; then
  PYTHONUNBUFFERED=1 python3 bench/gpu_train_vs_pytorch.py --flotilla "$build/bench/flotilla_gpu_train_bench" \
    --runs "${RUNS:-3}" --json "$out/gpu_train.json" 2>&1 | tee "$out/bench.log"
fi
