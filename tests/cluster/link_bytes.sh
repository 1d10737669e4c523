#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Inside scripts/cluster.sh: bytes on the links between hosts against the theory, for the flat ring
# and the hierarchical sum. n = 2 x H ranks (two a host, ranks 2h and 2h+1 on host h) run R
# allreduces of F floats (collective::ring_allreduce, fp32), twice:
#   - flat (FLOTILLA_SHARED_MEMORY=off): a ring of all n ranks over the sockets. Each rank sends
#     2(n-1)/n * 4F bytes an allreduce; only the step from a host's second rank to the next host's
#     first crosses a link, so each host's link carries one rank's share each way.
#   - hierarchical (shared memory on, pieces of P bytes): the two ranks of a host sum through
#     their segment, the host leaders (even ranks) run a ring of H, the total goes back through
#     the segment. Each leader sends 2(H-1)/H * 4F bytes, the others none, and each host's link
#     carries its leader's share each way.
# Checked for each: flotilla's count of every rank's payload equals the theory exactly, and each
# link's kernel counters (tx and rx of the host's eth0) are within [1, 1.1] times it, plus 256 KiB
# for the rendezvous, heartbeats and barriers (TCP/IP headers and ACKs are the rest: about 7% at a
# 1500-byte MTU). F is a multiple of P/4 and P/4 of n, so that every chunk of both rings has the
# same size and the theory is exact.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/link_bytes.sh PROGRAM WORKDIR [FLOATS] [REPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
piece=786432  # bytes: 196608 floats, a multiple of 6
floats="${3:-2949120}"
reps="${4:-3}"
hosts_n=${#hosts[@]}
if [ $(( floats % (piece / 4) )) -ne 0 ] || [ $(( piece / 4 % n )) -ne 0 ]; then
  echo "FLOATS must be a multiple of $(( piece / 4 )), itself a multiple of $n"; exit 2
fi
counter() { "$FLOTILLA_CLUSTER_RUN" "$1" cat "/sys/class/net/eth0/statistics/$2"; }
status=0
declare -A link_total

# run NAME SHARED_MEMORY LEADER_THEORY OTHER_THEORY: one job, its counts against the theory
run() {
  local name="$1" setting="$2" leader_theory="$3" other_theory="$4"
  local -a tx0 rx0
  for ((h = 0; h < hosts_n; h++)); do tx0[$h]=$(counter $h tx_bytes); rx0[$h]=$(counter $h rx_bytes); done
  start_tcp_ranks "$name" FLOTILLA_SHARED_MEMORY="$setting" -- "$program" ring-bytes "$floats" "$reps"
  local failed=0
  for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || { echo "$name: rank $r failed:"; cat "$work/$name.rank$r.log"; failed=1; }; done
  [ "$failed" -eq 0 ] || exit 1
  for ((r = 0; r < n; r++)); do
    local want=$other_theory sent
    [ $(( r % 2 )) -eq 0 ] && want=$leader_theory
    sent=$(sed -n 's/^payload bytes sent \([0-9]*\)$/\1/p' "$work/$name.rank$r.log")
    if [ "$sent" != "$want" ]; then echo "$name: rank $r counted $sent payload bytes sent, the theory $want"; status=1; fi
  done
  echo "$name: each host's first rank sent $leader_theory payload bytes, its second $other_theory (flotilla's count), as the theory says"
  local slack=262144 theory=$leader_theory
  [ "$other_theory" -gt "$theory" ] && theory=$other_theory
  link_total[$name]=0
  for ((h = 0; h < hosts_n; h++)); do
    local tx=$(( $(counter $h tx_bytes) - tx0[h] )) rx=$(( $(counter $h rx_bytes) - rx0[h] ))
    link_total[$name]=$(( link_total[$name] + tx + rx ))
    for pair in "tx $tx" "rx $rx"; do
      set -- $pair
      echo "$name: host $h link $1: $2 bytes, $(awk -v b="$2" -v t="$theory" 'BEGIN { printf "%.4f", b / t }') x the theory"
      if [ "$2" -lt "$theory" ] || [ "$2" -gt $(( theory * 11 / 10 + slack )) ]; then
        echo "$name: host $h link $1: $2 bytes is outside [$theory, 1.1 x $theory + $slack]"; status=1
      fi
    done
  done
}

flat=$(( reps * 2 * (n - 1) * (floats / n) * 4 ))
run flat off "$flat" "$flat"
hierarchical=$(( reps * 2 * (hosts_n - 1) * (floats / hosts_n) * 4 ))
run hierarchical "$piece" "$hierarchical" 0
echo "links between hosts: the hierarchical sum moved $(awk -v a="${link_total[hierarchical]}" -v b="${link_total[flat]}" \
  'BEGIN { printf "%.3f", a / b }') x the flat ring's bytes (theory $(awk -v h="$hosts_n" -v n="$n" \
  'BEGIN { printf "%.3f", (h - 1) / h / ((n - 1) / n) }'))"
exit $status
