#!/bin/bash
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks across the emulated hosts, each rank bound
# to its host's address with a shared secret (required off loopback), running the transport
# conformance suite (tcp_rank job-size). Meanwhile a process on the last host tries to join with a
# wrong secret: it must be refused, and the job must not notice.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/tcp_job.sh PROGRAM WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
head -c 32 /dev/urandom | base64 > "$work/wrong" && chmod 600 "$work/wrong"

# The intruder first, so that it is waiting when rank 0 starts listening.
last=$(( ${#hosts[@]} - 1 ))
"$FLOTILLA_CLUSTER_RUN" "$last" env FLOTILLA_WORLD_SIZE=$n FLOTILLA_COORDINATOR="${hosts[0]}:29500" \
  FLOTILLA_RANK=$(( n - 1 )) FLOTILLA_BIND="${hosts[$last]}" FLOTILLA_SECRET_FILE="$work/wrong" \
  FLOTILLA_CONNECT_TIMEOUT_MS=5000 "$program" job-size > "$work/intruder.log" 2>&1 &
intruder=$!
start_tcp_ranks job FLOTILLA_CONNECT_TIMEOUT_MS=20000 FLOTILLA_TIMEOUT_MS=20000 -- "$program" job-size
status=0
for ((r = 0; r < n; r++)); do
  if ! wait "${pids[$r]}"; then
    echo "rank $r failed:"; cat "$work/job.rank$r.log"; status=1
  fi
done
intruder_status=0
wait "$intruder" || intruder_status=$?
if [ "$status" -ne 0 ]; then exit 1; fi
if ! grep -q "job of $n ranks" "$work/job.rank0.log"; then
  echo "rank 0 did not report a job of $n ranks:"; cat "$work/job.rank0.log"; exit 1
fi
if [ "$intruder_status" -eq 0 ]; then
  echo "the process with the wrong secret was not refused:"; cat "$work/intruder.log"; exit 1
fi
echo "a job of $n ranks on ${#hosts[@]} hosts (${hosts[*]}) passed the conformance suite;"
echo "the process with a wrong secret was refused: $(tail -n 1 "$work/intruder.log")"
