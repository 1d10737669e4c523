#!/bin/bash
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks across the emulated hosts, each rank bound
# to its host's address with a shared secret (required off loopback), running the transport
# conformance suite (tcp_rank job-size). Meanwhile a process on the last host tries to join with a
# wrong secret: it must be refused, and the job must not notice.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/tcp_job.sh PROGRAM WORKDIR
set -euo pipefail
program="$1"
work="$2"
read -r -a hosts <<< "$FLOTILLA_CLUSTER_HOSTS"
n=$(( ${#hosts[@]} * 2 ))
rm -rf "$work" && mkdir -p "$work"
head -c 32 /dev/urandom | base64 > "$work/secret" && chmod 600 "$work/secret"
head -c 32 /dev/urandom | base64 > "$work/wrong" && chmod 600 "$work/wrong"
coordinator="${hosts[0]}:29500"
common="FLOTILLA_WORLD_SIZE=$n FLOTILLA_COORDINATOR=$coordinator FLOTILLA_CONNECT_TIMEOUT_MS=20000 FLOTILLA_TIMEOUT_MS=20000"

# The intruder first, so that it is waiting when rank 0 starts listening.
last=$(( ${#hosts[@]} - 1 ))
"$FLOTILLA_CLUSTER_RUN" "$last" env $common FLOTILLA_RANK=$(( n - 1 )) FLOTILLA_BIND="${hosts[$last]}" \
  FLOTILLA_SECRET_FILE="$work/wrong" FLOTILLA_CONNECT_TIMEOUT_MS=5000 "$program" job-size > "$work/intruder.log" 2>&1 &
intruder=$!
pids=()
for ((r = 0; r < n; r++)); do
  h=$(( r / 2 ))
  "$FLOTILLA_CLUSTER_RUN" "$h" env $common FLOTILLA_RANK=$r FLOTILLA_BIND="${hosts[$h]}" \
    FLOTILLA_SECRET_FILE="$work/secret" "$program" job-size > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
status=0
for ((r = 0; r < n; r++)); do
  if ! wait "${pids[$r]}"; then
    echo "rank $r failed:"; cat "$work/rank$r.log"; status=1
  fi
done
intruder_status=0
wait "$intruder" || intruder_status=$?
if [ "$status" -ne 0 ]; then exit 1; fi
if ! grep -q "job of $n ranks" "$work/rank0.log"; then
  echo "rank 0 did not report a job of $n ranks:"; cat "$work/rank0.log"; exit 1
fi
if [ "$intruder_status" -eq 0 ]; then
  echo "the process with the wrong secret was not refused:"; cat "$work/intruder.log"; exit 1
fi
echo "a job of $n ranks on ${#hosts[@]} hosts (${hosts[*]}) passed the conformance suite;"
echo "the process with a wrong secret was refused: $(tail -n 1 "$work/intruder.log")"
