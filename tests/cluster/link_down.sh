#!/bin/bash
# Inside scripts/cluster.sh: a TCP job of HOSTS x 2 ranks; once every rank is past a barrier, the
# last host's link is taken down. Every rank on the other hosts must fail within LIMIT_MS of that,
# naming a rank of the lost host and the host's address.
#
#   scripts/cluster.sh --hosts 3 -- tests/cluster/link_down.sh PROGRAM WORKDIR [LIMIT_MS]
set -euo pipefail
program="$1"
work="$2"
limit="${3:-3000}"
read -r -a hosts <<< "$FLOTILLA_CLUSTER_HOSTS"
n=$(( ${#hosts[@]} * 2 ))
last=$(( ${#hosts[@]} - 1 ))
lost=$(( 2 * last ))  # the first rank on the last host: the one the others wait for
rm -rf "$work" && mkdir -p "$work"
head -c 32 /dev/urandom | base64 > "$work/secret" && chmod 600 "$work/secret"
# Heartbeats every 250 ms, a peer silent for 6 of them lost: 1.5 s.
common="FLOTILLA_WORLD_SIZE=$n FLOTILLA_COORDINATOR=${hosts[0]}:29500 FLOTILLA_SECRET_FILE=$work/secret FLOTILLA_HEARTBEAT_MS=250"
pids=()
for ((r = 0; r < n; r++)); do
  h=$(( r / 2 ))
  "$FLOTILLA_CLUSTER_RUN" "$h" env $common FLOTILLA_RANK=$r FLOTILLA_BIND="${hosts[$h]}" "$program" link-down $lost \
    > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
# Every rank past the barrier, then the link goes.
for ((t = 0; t < 600; t++)); do
  ready=0
  for ((r = 0; r < n; r++)); do grep -q "past the barrier" "$work/rank$r.log" && ready=$((ready + 1)); done
  [ "$ready" -eq "$n" ] && break
  sleep 0.05
done
if [ "$ready" -ne "$n" ]; then
  echo "only $ready of $n ranks passed the barrier"; for ((r = 0; r < n; r++)); do cat "$work/rank$r.log"; done
  kill "${pids[@]}" 2>/dev/null || true; exit 1
fi
down_ms=$(date +%s%3N)
"$FLOTILLA_CLUSTER_LINK" "$last" down
# The lost host's ranks cannot be told anything: end them once the survivors have reported.
status=0
for ((r = 0; r < 2 * last; r++)); do
  wait "${pids[$r]}" || true
  line=$(grep "caught at" "$work/rank$r.log" || true)
  if [ -z "$line" ]; then echo "rank $r reported nothing:"; cat "$work/rank$r.log"; status=1; continue; fi
  at=$(echo "$line" | sed -E 's/^caught at ([0-9]+) ms.*/\1/')
  took=$(( at - down_ms ))
  echo "rank $r after $took ms: ${line#*: }"
  if [ "$took" -gt "$limit" ]; then echo "rank $r took $took ms, over $limit"; status=1; fi
  if ! echo "$line" | grep -q "rank $lost at ${hosts[$last]}"; then echo "rank $r did not name rank $lost at ${hosts[$last]}"; status=1; fi
done
for ((r = 2 * last; r < n; r++)); do kill "${pids[$r]}" 2>/dev/null || true; wait "${pids[$r]}" 2>/dev/null || true; done
exit $status
