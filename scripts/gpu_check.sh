#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# On a machine with a GPU: the CUDA backend's tests, Fashion-MNIST training on the GPU, and the
# benchmark against PyTorch, in one command, for a machine whose GPU time is scarce. Logs and JSON
# go to $OUT (when set: an output folder) or gpu-results/.
#
#   scripts/gpu_check.sh                 # build here, then everything below
#   PREBUILT=dir scripts/gpu_check.sh    # use binaries built elsewhere (scripts/device_pack.sh):
#                                        # dir/flotilla_cuda_gpu_tests, fashion_mnist_gpu,
#                                        # fashion_mnist_gpu_tcp, flotilla_gpu_train_bench
#   SKIP_TRAIN=1, SKIP_BENCH=1           # leave out the Fashion-MNIST runs, the benchmark
#   SANITIZE=1                           # also run the GPU tests under compute-sanitizer: memcheck
#                                        # (with leak check), initcheck, synccheck, racecheck
#   RUNS=5                               # benchmark runs per configuration (default 3)
#   TRAIN_MODELS="mlp cnn resnet"        # which models train on Fashion-MNIST (default mlp cnn)
#   BENCH_MODELS=resnet BENCH_BATCHES=128  # the benchmark's models and batches (default mlp,cnn at
#                                        # 64,256)
#   LAUNCH=flotilla-launch               # also train the distributed CNN on the GPU over TCP
#                                        # (fashion_mnist_gpu_tcp, when built): 2 workers in sync,
#                                        # then 2 workers and a server with fp16 pushes and pulls
#   FLOTILLA_FASHION_MNIST=dir           # the IDX files (default: Debian's place)
#
# Builds use .gpu-deps/ (scripts/gpu_vendor_deps.sh), or DEPS=dir (.device-pack/deps), for Eigen
# and doctest when present. Every step has a time limit, so that one hung step still leaves the
# others' results.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
if [ -n "${PREBUILT:-}" ]; then
  tests=$PREBUILT/flotilla_cuda_gpu_tests example=$PREBUILT/fashion_mnist_gpu bench=$PREBUILT/flotilla_gpu_train_bench
  # Binaries built on another machine find the CUDA libraries of this one's toolkit.
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  ldd "$tests" >> "$out/gpu.txt" 2>&1
else
  build=${FLOTILLA_GPU_BUILD_DIR:-build-gpu}
  prefix="" deps=${DEPS:-.gpu-deps}
  [ -d "$deps" ] && prefix="-DCMAKE_PREFIX_PATH=$(realpath "$deps")"
  {
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_WITH_CUDA=ON -DFLOTILLA_WERROR=OFF \
          -DFLOTILLA_BUILD_EXAMPLES=ON -DFLOTILLA_BUILD_TOOLS=OFF -DFLOTILLA_WITH_TCP=OFF -DFLOTILLA_WITH_MPI=OFF $prefix &&
    cmake --build "$build" -j "$(nproc)" --target flotilla_cuda_host_tests flotilla_cuda_gpu_tests flotilla_gpu_train_bench fashion_mnist_gpu
  } > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log"; tail -40 "$out/build.log"; exit 1; }
  tests=$build/tests/cuda/flotilla_cuda_gpu_tests example=$build/examples/fashion_mnist_gpu bench=$build/bench/flotilla_gpu_train_bench
fi
tests=$(realpath "$tests") example=$(realpath "$example") bench=$(realpath "$bench")
cat "$out/gpu.txt"

echo "== GPU tests"
timeout 150 "$tests" --duration=true > "$out/gpu_tests.log" 2>&1
status=$?
tail -5 "$out/gpu_tests.log"
if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
  # A failure's first cause: each kernel's own fault, named where it happens.
  echo "== GPU tests failed ($status): again with CUDA_LAUNCH_BLOCKING=1"
  CUDA_LAUNCH_BLOCKING=1 timeout 100 "$tests" > "$out/gpu_tests_blocking.log" 2>&1
  grep -E "ERROR|error|FAILED|test cases" "$out/gpu_tests_blocking.log" | head -40
fi

if [ -n "${SANITIZE:-}" ]; then
  # The deliberate failing call of the error test is not a memory error: API errors are not reported.
  for tool in "memcheck --report-api-errors no --leak-check full" initcheck synccheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    name=${tool%% *}
    # shellcheck disable=SC2086  # the tool's options are words
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 "$tests" > "$out/sanitize_$name.log" 2>&1
    echo "exit $?"
    grep -E "SUMMARY|test cases" "$out/sanitize_$name.log"
  done
fi

data=(); [ -n "${FLOTILLA_FASHION_MNIST:-}" ] && data=(--data "$(realpath "$FLOTILLA_FASHION_MNIST")")
if [ -z "${SKIP_TRAIN:-}" ]; then
  for m in ${TRAIN_MODELS:-mlp cnn}; do
    echo "== Fashion-MNIST $m on the GPU"
    limit=150; [ "$m" = resnet ] && limit=300  # 10 epochs of the ResNet
    (cd "$out" && timeout "$limit" "$example" --model "$m" "${data[@]}" > "train_$m.log" 2>&1)
    grep -E "epoch|test accuracy|error|no CUDA" "$out/train_$m.log" | tail -14
  done
fi

tcp_example=$(dirname "$example")/fashion_mnist_gpu_tcp
if [ -n "${LAUNCH:-}" ] && [ -x "$tcp_example" ]; then
  launch=$(realpath "$LAUNCH")
  for job in "2 sync" "3 sync-ps-fp16"; do
    set -- $job
    echo "== Fashion-MNIST CNN on the GPU over TCP: $1 ranks, --policy $2"
    (cd "$out" && timeout 240 "$launch" -n "$1" -- "$tcp_example" --policy "$2" --epochs "${TCP_EPOCHS:-2}" \
       "${data[@]}" --metrics "tcp_$2.jsonl" --plot "tcp_$2.svg" > "tcp_$2.log" 2>&1)
    echo "exit $?"
    grep -E "test accuracy|error" "$out/tcp_$2.log" | tail -3
  done
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== against PyTorch"
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu_train_vs_pytorch.py --flotilla "$bench" \
    --models "${BENCH_MODELS:-mlp,cnn}" --batches "${BENCH_BATCHES:-64,256}" \
    --runs "${RUNS:-3}" --json "$out/gpu_train.json" 2>&1 | tee "$out/bench.log"
fi
