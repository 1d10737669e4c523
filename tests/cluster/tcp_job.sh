#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks across the emulated hosts, each rank bound
# to its host's address with a shared secret (required off loopback), running the transport
# conformance suite (tcp_rank conformance). While the job waits for its last rank, a process on the
# last host tries to join as that rank with a wrong secret: it must be refused by the
# authentication, and the job must not notice.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/tcp_job.sh PROGRAM WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
head -c 32 /dev/urandom | base64 > "$work/wrong" && chmod 600 "$work/wrong"

# All ranks but the last start, so that rank 0 listens and waits for it; then a process claiming
# to be the last rank, with a wrong secret, must be refused by its authentication; then the real
# last rank joins, and the job must go on as if nothing had happened.
pids=()
for ((r = 0; r < n - 1; r++)); do
  tcp_rank $r "$work/secret" FLOTILLA_CONNECT_TIMEOUT_MS=30000 -- "$program" conformance > "$work/job.rank$r.log" 2>&1 &
  pids+=($!)
done
intruder_status=0
tcp_rank $(( n - 1 )) "$work/wrong" FLOTILLA_CONNECT_TIMEOUT_MS=10000 -- "$program" conformance > "$work/intruder.log" 2>&1 \
  || intruder_status=$?
tcp_rank $(( n - 1 )) "$work/secret" -- "$program" conformance > "$work/job.rank$(( n - 1 )).log" 2>&1 &
pids+=($!)
status=0
for ((r = 0; r < n; r++)); do
  if ! wait "${pids[$r]}"; then
    echo "rank $r failed:"; cat "$work/job.rank$r.log"; status=1
  fi
done
if [ "$status" -ne 0 ]; then exit 1; fi
if ! grep -q "job of $n ranks" "$work/job.rank0.log"; then
  echo "rank 0 did not report a job of $n ranks:"; cat "$work/job.rank0.log"; exit 1
fi
if [ "$intruder_status" -eq 0 ] || ! grep -q "authentication failed" "$work/intruder.log"; then
  echo "the process with the wrong secret was not refused by the authentication:"; cat "$work/intruder.log"; exit 1
fi
echo "a job of $n ranks on ${#hosts[@]} hosts (${hosts[*]}) passed the conformance suite;"
echo "the process with a wrong secret was refused: $(tail -n 1 "$work/intruder.log")"
