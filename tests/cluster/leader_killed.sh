#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks runs hierarchical sums (each host through
# its shared memory, the hosts' leaders over their links) until the leader of host 1 (rank 2)
# kills itself (SIGKILL) in the middle of them (tcp_rank's shared-memory-kill). Every other rank
# must fail within 3 s: its own host's rank and the other leaders naming rank 2 and its address,
# the others naming rank 2 or the leader whose failure reached them first; none may hang.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/leader_killed.sh PROGRAM WORKDIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
victim=2
start_tcp_ranks killed FLOTILLA_HEARTBEAT_MS=250 -- "$program" shared-memory-kill $victim
status=0
for ((r = 0; r < n; r++)); do
  if wait "${pids[$r]}"; then echo "rank $r exited 0 though rank $victim died"; status=1; fi
done
for ((r = 0; r < n; r++)); do
  [ "$r" -eq "$victim" ] && continue
  log="$work/killed.rank$r.log"
  line=$(grep -m1 "^caught after" "$log" || true)
  if [ -z "$line" ]; then echo "rank $r did not report the failure:"; cat "$log"; status=1; continue; fi
  ms=$(echo "$line" | sed -n 's/^caught after \([0-9]*\) ms.*/\1/p')
  echo "rank $r: $line"
  if [ "$ms" -gt 3000 ]; then echo "rank $r took $ms ms, more than 3000"; status=1; fi
  # The victim's host-mate and the other leaders wait on the victim itself.
  if [ "$r" -eq $((victim + 1)) ] || [ $((r % 2)) -eq 0 ]; then
    case "$line" in
      *"rank $victim at ${hosts[1]}:"*) ;;
      *) echo "rank $r does not name rank $victim at ${hosts[1]}"; status=1 ;;
    esac
  fi
done
exit $status
