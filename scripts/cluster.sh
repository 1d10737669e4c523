#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# An emulated cluster on one machine: H hosts, each a network and UTS namespace of its own (its
# own network stack and host name), joined through a bridge in a switch namespace by veth links
# shaped to a rate (tbf, both ways). Nothing is added to the machine's own namespace: the test
# subnet (10.213.0.0/24, host i at 10.213.0.(i+1)) exists only inside the namespaces, and
# everything is removed when the command ends, fails or is interrupted.
#
#   scripts/cluster.sh [--hosts H] [--rate RATE] -- COMMAND [ARGS...]
#
# COMMAND runs in the machine's namespace with
#   FLOTILLA_CLUSTER_HOSTS   the hosts' addresses, space-separated (host 0 first)
#   FLOTILLA_CLUSTER_RATE    RATE, as given
#   FLOTILLA_CLUSTER_RUN     a command that runs a program on host i: "$FLOTILLA_CLUSTER_RUN" i prog args...
#   FLOTILLA_CLUSTER_LINK    a command that takes host i's link down or up: "$FLOTILLA_CLUSTER_LINK" i down
#   FLOTILLA_CLUSTER_RSH     an rsh agent: "$FLOTILLA_CLUSTER_RSH" ADDRESS COMMAND-LINE runs the command line
#                            on the host with that address, as ssh would (mpirun --mca plm_rsh_agent)
# and the script exits with its status. RATE is tc's (e.g. 1gbit, 200mbit; default 1gbit).
#
# Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; where namespaces cannot be made it
# says so and exits 77, which the tests take as "skipped".
set -euo pipefail

hosts=3
rate=1gbit
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --) shift; break ;;
    run-on-host) # internal: run-on-host NAMESPACE HOSTNAME PROGRAM ARGS...
      ns="$2"; name="$3"; shift 3
      exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@" ;;
    *) echo "cluster.sh: unknown argument '$1' (usage: cluster.sh [--hosts H] [--rate RATE] -- COMMAND...)" >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "cluster.sh: no command given (usage: cluster.sh [--hosts H] [--rate RATE] -- COMMAND...)" >&2
  exit 2
fi
case "$hosts" in
  ''|*[!0-9]*) echo "cluster.sh: --hosts '$hosts' is not a number" >&2; exit 2 ;;
esac
if [ "$hosts" -lt 1 ] || [ "$hosts" -gt 200 ]; then
  echo "cluster.sh: --hosts must be 1 to 200, not $hosts" >&2
  exit 2
fi

# Names unique to this run, so that several clusters can exist at once.
tag="fl$$"
switch="${tag}sw"
namespaces=()

cleanup() {
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  ip netns del "$switch" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! command -v ip > /dev/null || ! command -v unshare > /dev/null; then
  echo "cluster.sh: SKIPPED: needs iproute2's ip and util-linux's unshare" >&2
  exit 77
fi
if ! ip netns add "$switch" 2> /dev/null; then
  echo "cluster.sh: SKIPPED: cannot create network namespaces here (needs root or CAP_NET_ADMIN)" >&2
  exit 77
fi
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
ip -n "$switch" link set lo up

# tbf's burst: what an idle link may send at once, beyond its rate. Too small, and the link runs
# below its rate: veth hands tbf segments of up to 64 KB whole, and a 500 Mbit/s link with a burst
# of 1 ms (62.5 KB) carried a 64 MiB ring at 0.84 of it. Too large, and short messages outrun the
# rate: with 4 ms (250 KB) a parameter server's 0.25 MB shards crossed in 0.6 of the time the
# rate allows, as no real link lets them. 1.5 ms of the rate, at least 96 KB: the ring at the rate, the
# shards within 5% of it.
burst_bytes=$(awk -v r="$rate" 'BEGIN {
  n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1;
  b = int(n * m / 8 * 0.0015); if (b < 98304) b = 98304; print b }')
addresses=()
for ((i = 0; i < hosts; i++)); do
  ns="${tag}h$i"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$switch" link add "h$i" type veth peer name eth0 netns "$ns"
  ip -n "$switch" link set "h$i" master br0
  ip -n "$switch" link set "h$i" up
  address="10.213.0.$((i + 1))"
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # The host's link, shaped both ways: its sends on eth0, its receives on the switch's port.
  burst=$burst_bytes
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  ip netns exec "$switch" tc qdisc add dev "h$i" root tbf rate "$rate" burst "$burst" latency 100ms
  addresses+=("$address")
done

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
runner="$(mktemp "${TMPDIR:-/tmp}/flotilla-cluster-run.XXXXXX")"
cleanup_runner() { rm -f "$runner"; cleanup; }
trap cleanup_runner EXIT
cat > "$runner" << EOF
#!/bin/sh
# Runs a program on host \$1 of the cluster ${tag}: "\$0" i program args...
i="\$1"; shift
case "\$i" in ''|*[!0-9]*) echo "cluster run: '\$i' is not a host number" >&2; exit 2 ;; esac
[ "\$i" -lt $hosts ] || { echo "cluster run: no host \$i (the cluster has $hosts)" >&2; exit 2; }
exec "$self" run-on-host "${tag}h\$i" "host\$i" "\$@"
EOF
chmod 700 "$runner"
link="$runner.link"
cleanup_runner() { rm -f "$runner" "$link"; cleanup; }
cat > "$link" << EOF
#!/bin/sh
# Takes host \$1's link of the cluster ${tag} down or up (\$2): the switch's port of it.
case "\$1" in ''|*[!0-9]*) echo "cluster link: '\$1' is not a host number" >&2; exit 2 ;; esac
case "\$2" in up|down) ;; *) echo "cluster link: '\$2' is not up or down" >&2; exit 2 ;; esac
exec ip -n "$switch" link set "h\$1" "\$2"
EOF
chmod 700 "$link"
rsh="$runner.rsh"
cleanup_runner() { rm -f "$runner" "$link" "$rsh"; cleanup; }
cat > "$rsh" << EOF
#!/bin/sh
# Stands in for ssh inside the cluster ${tag}: \$1 is a host's address, the rest a command line.
address="\$1"; shift
i=0
for a in ${addresses[*]}; do
  if [ "\$a" = "\$address" ]; then exec "$runner" "\$i" sh -c "\$*"; fi
  i=\$((i + 1))
done
echo "cluster rsh: no host at '\$address' (the hosts: ${addresses[*]})" >&2
exit 255
EOF
chmod 700 "$rsh"

export FLOTILLA_CLUSTER_HOSTS="${addresses[*]}"
export FLOTILLA_CLUSTER_RATE="$rate"
export FLOTILLA_CLUSTER_RUN="$runner"
export FLOTILLA_CLUSTER_LINK="$link"
export FLOTILLA_CLUSTER_RSH="$rsh"
set +e
"$@"
status=$?
set -e
exit "$status"
