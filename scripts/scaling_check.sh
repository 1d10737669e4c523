#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# On a machine with cores to spare (the 16-core machine of docs/benchmarks.md, "16 cores"): the
# multi-process measurements that a 2-core machine cannot make, in steps that each take under 10
# minutes. Logs and JSON go to $OUT (when set: an output folder) or scaling-results/.
#
#   scripts/scaling_check.sh build       # configure and build the benchmarks (about 2 minutes)
#   scripts/scaling_check.sh allreduce   # bench/allreduce_compare.py, 2 ranks: sockets, shared
#                                        # memory, loopback itself, gloo, MPI (when present)
#   scripts/scaling_check.sh ranks       # flotilla_tcp_busbw_bench at 2, 4, 8 ranks: sockets
#                                        # (default, ring, ring without helper, doubling), and
#                                        # shared memory
#   scripts/scaling_check.sh train       # flotilla_tcp_train_bench, 2 processes: stream_gradients
#                                        # off and on, shared memory and sockets, alternating
#   scripts/scaling_check.sh all         # build, allreduce, ranks in a row (too long for one command)
#
# ROUNDS (default 2) sets the rounds of the allreduce step, SIZES its sizes (bytes, comma-separated).
# Uses .gpu-deps/ (scripts/gpu_vendor_deps.sh: Eigen, doctest and Boost.Asio's headers) when
# present; MPI jobs run only where mpirun and an MPI compiler wrapper are found; the gloo job only
# where python3 imports torch.
#
# With binaries built elsewhere (scripts/device_pack.sh): FLOTILLA_SCALING_BUILD_DIR=.device-pack/scaling
# DEPS=.device-pack/deps. The MPI benchmark is then built here, against this machine's MPI, when
# mpirun is found (a few seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-scaling-results}
mkdir -p "$out"
build=${FLOTILLA_SCALING_BUILD_DIR:-build-scaling}
step=${1:-all}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
have_mpi=OFF
command -v mpirun > /dev/null && command -v mpicxx > /dev/null && have_mpi=ON
python=python3 have_torch=no
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" > /dev/null 2>&1; then python=$p have_torch=yes; break; fi
done

do_build() {
  local deps=()
  if [ -d .gpu-deps ]; then
    deps=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps" -DBoost_ROOT="$PWD/.gpu-deps" -DBoost_NO_BOOST_CMAKE=ON)
  fi
  local targets=(flotilla_tcp_busbw_bench flotilla_loopback_bench flotilla_core_latency_bench flotilla-launch)
  [ "$have_mpi" = ON ] && targets+=(flotilla_mpi_busbw_bench)
  { nproc; lscpu; } > "$out/machine.txt" 2>&1
  {
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_BUILD_BENCH=ON -DFLOTILLA_BUILD_TESTS=OFF \
          -DFLOTILLA_BUILD_EXAMPLES=OFF -DFLOTILLA_BUILD_TOOLS=ON -DFLOTILLA_WERROR=OFF \
          -DFLOTILLA_WITH_MPI=$have_mpi "${deps[@]}" &&
    cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
  } > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log"; tail -40 "$out/build.log"; exit 1; }
  echo "built in $build (MPI: $have_mpi, python with torch: $python)"
}

# The MPI benchmark links this machine's MPI library, so it is built where it runs.
ensure_mpi_bench() {
  [ "$have_mpi" = ON ] || return 0
  [ -x "$build/bench/flotilla_mpi_busbw_bench" ] && return 0
  local b=${TMPDIR:-/tmp}/flotilla-mpi-bench deps=${DEPS:-.gpu-deps}
  local prefix=()
  [ -d "$deps" ] && prefix=(-DCMAKE_PREFIX_PATH="$(realpath "$deps")")
  {
    cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DFLOTILLA_BUILD_BENCH=ON -DFLOTILLA_BUILD_TESTS=OFF \
          -DFLOTILLA_BUILD_EXAMPLES=OFF -DFLOTILLA_BUILD_TOOLS=OFF -DFLOTILLA_WERROR=OFF -DFLOTILLA_WITH_MPI=ON \
          -DFLOTILLA_WITH_TCP=OFF -DFLOTILLA_WITH_CUDA=OFF "${prefix[@]}" &&
    cmake --build "$b" -j "$(nproc)" --target flotilla_mpi_busbw_bench
  } > "$out/mpi_build.log" 2>&1 || { echo "MPI benchmark not built (see mpi_build.log): no MPI jobs"; have_mpi=OFF; return 0; }
  mkdir -p "$build/bench" && cp "$b/bench/flotilla_mpi_busbw_bench" "$build/bench/"
}

do_allreduce() {
  ensure_mpi_bench
  local jobs=flotilla-tcp,flotilla-shm,loopback
  [ "$have_torch" = yes ] && jobs+=,gloo
  [ "$have_mpi" = ON ] && jobs+=,mpi-tcp,mpi-vader
  local sizes=()
  [ -n "${SIZES:-}" ] && sizes=(--sizes "$SIZES")
  PYTHONUNBUFFERED=1 "$python" bench/allreduce_compare.py --launch "$build/tools/flotilla-launch" \
    --tcp-bench "$build/bench/flotilla_tcp_busbw_bench" --mpi-bench "$build/bench/flotilla_mpi_busbw_bench" \
    --jobs "$jobs" --rounds "${ROUNDS:-2}" "${sizes[@]}" --json "$out/allreduce.json" 2>&1 | tee "$out/allreduce.log"
}

do_ranks() {
  local cores
  cores=$(nproc)
  for n in 2 4 8; do
    if [ "$n" -gt "$cores" ]; then echo "skipping $n ranks: $cores cores"; continue; fi
    echo "== $n ranks, sockets"
    "$build/tools/flotilla-launch" -n "$n" --env FLOTILLA_SHARED_MEMORY=off -- "$build/bench/flotilla_tcp_busbw_bench" \
      --methods flotilla,ring,ring-nopipe,doubling --repeat 3 --target 0.2 --label "sockets-$n"
    echo "== $n ranks, shared memory"
    "$build/tools/flotilla-launch" -n "$n" -- "$build/bench/flotilla_tcp_busbw_bench" \
      --methods flotilla --repeat 3 --target 0.2 --label "shm-$n"
  done 2>&1 | tee "$out/ranks.log"
}

# TrainerOptions::stream_gradients off and on, alternating (ROUNDS of each), over shared memory and
# the sockets; samples/s of a run = samples of both ranks / the slower rank's seconds.
do_train() {
  local data=()
  [ -n "${FLOTILLA_FASHION_MNIST:-}" ] && data=(--data "$FLOTILLA_FASHION_MNIST")
  for round in $(seq "${ROUNDS:-4}"); do
    for stream in false true; do
      for shm in on off; do
        "$build/tools/flotilla-launch" -n 2 --env FLOTILLA_SHARED_MEMORY=$shm -- "$build/bench/flotilla_tcp_train_bench" \
          --stream-gradients "$stream" --repeat 3 "${data[@]}" 2>&1 | grep -o '{.*}' | sed "s/^{/{\"stream\":$stream,\"shm\":\"$shm\",\"round\":$round,/"
      done
    done
  done > "$out/train.jsonl"
  "$python" - "$out/train.jsonl" <<'PY' | tee "$out/train.log"
import collections, json, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    j = json.loads(line)
    runs[(j["shm"], j["stream"], j["round"], j["run"])]["samples"].append(j["samples"])
    runs[(j["shm"], j["stream"], j["round"], j["run"])]["seconds"].append(j["seconds"])
by = collections.defaultdict(list)
for (shm, stream, _, _), r in runs.items():
    by[(shm, stream)].append(sum(r["samples"]) / max(r["seconds"]))
for shm in ("on", "off"):
    off, on = by[(shm, False)], by[(shm, True)]
    if off and on:
        print(f"shared memory {shm}: stream_gradients off {statistics.median(off):.0f} samples/s "
              f"({min(off):.0f}-{max(off):.0f}, {len(off)} runs), on {statistics.median(on):.0f} "
              f"({min(on):.0f}-{max(on):.0f}, {len(on)} runs): on / off {statistics.median(on) / statistics.median(off):.2f}")
PY
}

case "$step" in
  build) do_build ;;
  allreduce) do_allreduce ;;
  ranks) do_ranks ;;
  train) do_train ;;
  all) do_build && do_allreduce && do_ranks ;;
  *) echo "usage: $0 build|allreduce|ranks|train|all" >&2; exit 2 ;;
esac
