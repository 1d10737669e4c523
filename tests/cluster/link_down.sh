#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks; once every rank is past a barrier, the
# last host's link is taken down. Every rank on the other hosts must fail within LIMIT_MS of that,
# naming a rank of the lost host and the host's address.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/link_down.sh PROGRAM WORKDIR [LIMIT_MS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
limit="${3:-3000}"
last=$(( ${#hosts[@]} - 1 ))
lost=$(( 2 * last ))  # the first rank on the last host: the one the others wait for
# Heartbeats every 250 ms, a peer silent for 6 of them lost: 1.5 s.
start_tcp_ranks down FLOTILLA_HEARTBEAT_MS=250 -- "$program" link-down $lost
# Every rank past the barrier, then the link goes.
for ((t = 0; t < 600; t++)); do
  ready=0
  for ((r = 0; r < n; r++)); do grep -q "past the barrier" "$work/down.rank$r.log" && ready=$((ready + 1)); done
  [ "$ready" -eq "$n" ] && break
  sleep 0.05
done
if [ "$ready" -ne "$n" ]; then
  echo "only $ready of $n ranks passed the barrier"; for ((r = 0; r < n; r++)); do cat "$work/down.rank$r.log"; done
  kill "${pids[@]}" 2>/dev/null || true; exit 1
fi
down_ms=$(date +%s%3N)
"$FLOTILLA_CLUSTER_LINK" "$last" down
# The lost host's ranks cannot be told anything: end them once the survivors have reported.
status=0
for ((r = 0; r < 2 * last; r++)); do
  wait "${pids[$r]}" || true
  line=$(grep "caught at" "$work/down.rank$r.log" || true)
  if [ -z "$line" ]; then echo "rank $r reported nothing:"; cat "$work/down.rank$r.log"; status=1; continue; fi
  at=$(echo "$line" | sed -E 's/^caught at ([0-9]+) ms.*/\1/')
  took=$(( at - down_ms ))
  echo "rank $r after $took ms: ${line#*: }"
  if [ "$took" -gt "$limit" ]; then echo "rank $r took $took ms, over $limit"; status=1; fi
  if ! echo "$line" | grep -q "rank $lost at ${hosts[$last]}"; then echo "rank $r did not name rank $lost at ${hosts[$last]}"; status=1; fi
done
for ((r = 2 * last; r < n; r++)); do kill "${pids[$r]}" 2>/dev/null || true; wait "${pids[$r]}" 2>/dev/null || true; done
exit $status
