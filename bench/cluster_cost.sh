#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# The cost model's measurements (topology/cost_model.hpp, docs/cost_model.md): one synchronous
# step's gradient exchange through the Trainer across the emulated hosts of scripts/cluster.sh, on
# links shaped to the cluster's rate, for
#   ring          N workers, one a host, flotilla's ring over the links (shared memory off)
#   hierarchical  N workers, two a host (shared memory inside each host, the leaders' ring between)
#   servers S     N workers, one a host, and S parameter servers, each on a host of its own
# with fp32 and fp16 on the wire, for each number of workers and size of model.
#
#   scripts/cluster.sh --hosts 10 --rate 500mbit -- bench/cluster_cost.sh BUILD OUT.jsonl [SIZES] [WORKERS] [STEPS]
#
# BUILD holds bench/flotilla_exchange_step_bench; OUT receives one JSON line a job (rank 0's);
# SIZES are MiB of parameters (default 1,4,16,64), WORKERS the numbers of workers (default 2,4,8),
# STEPS the timed steps of each job (default 3). The cluster needs max(WORKERS) + 2 hosts.
# bench/cost_model.py fits the model to OUT and writes the table and the plot.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../tests/cluster/common.sh"
build="$(cd "$1" && pwd)"
out="$2"
sizes="${3:-1,4,16,64}"
workers_list="${4:-2,4,8}"
steps="${5:-3}"
cluster_setup "$(mktemp -d)/cluster_cost"
trap 'rm -rf "$work"' EXIT
: > "$out"
port=29600

# job NAME WORKERS PER_HOST SERVERS SHARED_MEMORY BENCH_ARGS...: workers on hosts 0.., PER_HOST a
# host, then each server on a host of its own; rank 0's line appended to OUT.
job() {
  local name="$1" workers="$2" per_host="$3" servers="$4" shm="$5"; shift 5
  local ranks=$(( workers + servers )) worker_hosts=$(( (workers + per_host - 1) / per_host ))
  if (( worker_hosts + servers > ${#hosts[@]} )); then
    echo "cluster_cost.sh: $name needs $(( worker_hosts + servers )) hosts, the cluster has ${#hosts[@]}" >&2
    exit 2
  fi
  port=$(( port + 1 ))
  local pids=() r h
  for ((r = 0; r < ranks; r++)); do
    if (( r < workers )); then h=$(( r / per_host )); else h=$(( worker_hosts + r - workers )); fi
    "$FLOTILLA_CLUSTER_RUN" "$h" env FLOTILLA_WORLD_SIZE=$ranks FLOTILLA_COORDINATOR="${hosts[0]}:$port" FLOTILLA_RANK=$r \
      FLOTILLA_BIND="${hosts[$h]}" FLOTILLA_SECRET_FILE="$work/secret" FLOTILLA_SHARED_MEMORY="$shm" \
      "$build/bench/flotilla_exchange_step_bench" --steps "$steps" --ranks-per-host "$per_host" "$@" \
      > "$work/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for ((r = 0; r < ranks; r++)); do wait "${pids[$r]}" || status=1; done
  if [ "$status" -ne 0 ]; then echo "$name failed:"; tail -n 5 "$work/$name".rank*.log; exit 1; fi
  grep '^{' "$work/$name.rank0.log" | tee -a "$out"
}

IFS=, read -r -a size_list <<< "$sizes"
IFS=, read -r -a worker_counts <<< "$workers_list"
for mib in "${size_list[@]}"; do
  for n in "${worker_counts[@]}"; do
    for codec in fp32 fp16; do
      job "ring-$n-$mib-$codec" "$n" 1 0 off --exchange ring --codec "$codec" --mib "$mib"
      # (Two ranks a host sum hierarchically in float only: fp16 would be the flat ring again.)
      if (( n >= 4 )) && [ "$codec" = fp32 ]; then
        job "hier-$n-$mib-$codec" "$n" 2 0 auto --exchange ring --codec "$codec" --mib "$mib"
      fi
      for s in 1 2; do
        job "ps$s-$n-$mib-$codec" "$n" 1 "$s" off --exchange servers --servers "$s" --codec "$codec" --mib "$mib"
      done
    done
  done
done
