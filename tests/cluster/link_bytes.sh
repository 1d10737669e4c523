#!/bin/bash
# Inside scripts/cluster.sh: bytes on the links between hosts against the theory. A flat ring of
# n = 2 x HOSTS ranks (two a host, ranks 2h and 2h+1 on host h) runs R allreduces of F floats:
# each rank sends 2(n-1)/n * 4F bytes an allreduce, and only the ring's step from a host's second
# rank to the next host's first crosses a link, so each host's link carries one rank's share each
# way (the step inside a host stays on its loopback). Checked: flotilla's count of every rank's
# payload equals the theory exactly, and each link's kernel counters (tx and rx of the host's eth0)
# are within [1, 1.1] times it, plus 256 KiB for the rendezvous, heartbeats and barriers (TCP/IP
# headers and ACKs are the rest: about 7% at a 1500-byte MTU).
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/link_bytes.sh PROGRAM WORKDIR [FLOATS] [REPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
program="$1"
cluster_setup "$2"
floats="${3:-3000000}"
reps="${4:-3}"
if [ $(( floats % n )) -ne 0 ]; then echo "FLOATS must be a multiple of $n"; exit 2; fi
theory=$(( reps * 2 * (n - 1) * (floats / n) * 4 ))
counter() { "$FLOTILLA_CLUSTER_RUN" "$1" cat "/sys/class/net/eth0/statistics/$2"; }
declare -a tx0 rx0
for ((h = 0; h < ${#hosts[@]}; h++)); do tx0[$h]=$(counter $h tx_bytes); rx0[$h]=$(counter $h rx_bytes); done
start_tcp_ranks bytes -- "$program" ring-bytes "$floats" "$reps"
status=0
for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || { echo "rank $r failed:"; cat "$work/bytes.rank$r.log"; status=1; }; done
[ "$status" -eq 0 ] || exit 1
for ((r = 0; r < n; r++)); do
  sent=$(sed -n 's/^payload bytes sent \([0-9]*\)$/\1/p' "$work/bytes.rank$r.log")
  if [ "$sent" != "$theory" ]; then echo "rank $r counted $sent payload bytes sent, the theory $theory"; status=1; fi
done
echo "each rank sent $theory payload bytes (flotilla's count), as the theory says: $reps x 2($n-1)/$n x $(( floats * 4 ))"
slack=262144
for ((h = 0; h < ${#hosts[@]}; h++)); do
  tx=$(( $(counter $h tx_bytes) - tx0[h] )); rx=$(( $(counter $h rx_bytes) - rx0[h] ))
  for pair in "tx $tx" "rx $rx"; do
    set -- $pair
    ratio=$(awk -v b="$2" -v t="$theory" 'BEGIN { printf "%.4f", b / t }')
    echo "host $h link $1: $2 bytes, $ratio x the theory"
    if [ "$2" -lt "$theory" ] || [ "$2" -gt $(( theory * 11 / 10 + slack )) ]; then
      echo "host $h link $1: $2 bytes is outside [$theory, 1.1 x $theory + $slack]"; status=1
    fi
  done
done
exit $status
