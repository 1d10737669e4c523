#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Inside scripts/cluster.sh, two ranks a host: synchronous training across the emulated hosts
# equals one worker with an N-times batch (flotilla_distributed_* sync-equivalence: rank 0 trains
# the reference and compares), on a ring (in double, and in float summed hierarchically)
# and on parameter servers; asynchronous and bounded-staleness jobs on parameter servers complete
# and learn (async-training). Over TCP (each rank bound to its host's address, with a secret) or
# over MPI (mpirun --hostfile across the hosts, the cluster's rsh agent standing in for ssh). Also
# the MPI transport's conformance suite across the hosts.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/equivalence.sh tcp PROGRAM WORKDIR
#   scripts/cluster.sh --hosts 3 -- tests/cluster/equivalence.sh mpi PROGRAM WORKDIR CONFORMANCE MPIEXEC
set -euo pipefail
source "$(dirname "$0")/common.sh"
backend="$1"
program="$2"
cluster_setup "$3"

# job NAME ARGS...: one job of n ranks, two a host, running PROGRAM ARGS.
job() {
  local name="$1"; shift
  if [ "$backend" = tcp ]; then
    local status=0
    start_tcp_ranks "$name" -- "$@"
    for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || status=1; done
  else
    local status=0
    "$FLOTILLA_CLUSTER_RUN" 0 "$mpiexec" --allow-run-as-root --hostfile "$work/hostfile" -n $n \
      --mca plm_rsh_agent "$FLOTILLA_CLUSTER_RSH" --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 \
      --mca oob_tcp_if_include 10.213.0.0/24 "$@" > "$work/$name.log" 2>&1 || status=1
  fi
  if [ "$status" -ne 0 ]; then
    echo "$backend $name failed:"; cat "$work/$name"*.log; exit 1
  fi
  echo "$backend $name: $n ranks on ${#hosts[@]} hosts passed"
}

if [ "$backend" = mpi ]; then
  conformance="$4"
  mpiexec="$5"
  for h in "${hosts[@]}"; do echo "$h slots=2"; done > "$work/hostfile"
  job conformance "$conformance" $n
fi
job ring "$program" sync-equivalence ring
job servers "$program" sync-equivalence ps 2
# Float buckets, summed hierarchically (each host through its shared memory or MPI_Reduce and
# MPI_Bcast, the hosts' leaders over their links); over TCP with the bytes on the wire and through
# memory against the theory.
job ring-float "$program" sync-equivalence ring-float ${#hosts[@]}
# Asynchronous and bounded-staleness updates across the hosts: every worker finishes and learns.
job async "$program" async-training async 2
job staleness "$program" async-training staleness 2
