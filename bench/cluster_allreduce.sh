#!/bin/bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Allreduce bus bandwidth across the emulated hosts of scripts/cluster.sh, two ranks a host, on
# links shaped to the cluster's rate, in one run:
#   flat          flotilla's ring over all n ranks (FLOTILLA_SHARED_MEMORY=off)
#   hierarchical  flotilla's default across hosts: each host sums through shared memory, the
#                 hosts' leaders run the ring over their links (transport/tcp/host_allreduce.hpp)
#   mpi           Open MPI's MPI_Allreduce over TCP (btl tcp,self; mpirun --hostfile across the
#                 hosts), where flotilla_mpi_busbw_bench is built, and in the same job
#   flotilla-mpi  flotilla's MPI transport as the trainer uses it: hierarchical across hosts
#                 (MPI_Reduce and MPI_Bcast inside each host, a ring of the leaders)
#   gloo          torch.distributed's all_reduce with the gloo backend over the hosts' links, where
#                 /usr/bin/python3 has PyTorch (bench/allreduce_compare.py's gloo rank)
# Bus bandwidth is the benchmarks' usual 2(n-1)/n x bytes / time (allreduce_common.hpp). A flat
# ring bound by its links reaches at most the link rate; the hierarchical sum, whose links carry
# 2(H-1)/H of the buffer where the flat ring's carry 2(n-1)/n, up to (n-1)H / (n(H-1)) times it
# (1.25 for 3 hosts of 2 ranks).
#
#   scripts/cluster.sh --hosts 3 --rate 500mbit -- bench/cluster_allreduce.sh BUILD [SIZES] [REPEAT] [JSON]
#
# BUILD holds bench/flotilla_tcp_busbw_bench (and bench/flotilla_mpi_busbw_bench for the MPI
# rows); SIZES as the benchmarks take them (default 64K,256K,1M,4M); REPEAT measurements of each
# (default 3, the median reported); JSON, when given, receives every measurement.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../tests/cluster/common.sh"
build="$(cd "$1" && pwd)"
sizes="${2:-64K,256K,1M,4M}"
repeat="${3:-3}"
json="${4:-}"
cluster_setup "$(mktemp -d)/cluster_allreduce"
trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"
: > "$results"

tcp_job() {  # tcp_job LABEL SHARED_MEMORY
  start_tcp_ranks "$1" FLOTILLA_SHARED_MEMORY="$2" -- "$build/bench/flotilla_tcp_busbw_bench" --sizes "$sizes" \
    --repeat "$repeat" --target 0.5 --label "$1"
  local status=0
  for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || status=1; done
  if [ "$status" -ne 0 ]; then echo "$1 failed:"; cat "$work/$1".rank*.log; exit 1; fi
  grep '^{' "$work/$1.rank0.log" >> "$results"
}
tcp_job flat off
tcp_job hierarchical auto
mpi_bench="$build/bench/flotilla_mpi_busbw_bench"
if [ -x "$mpi_bench" ] && command -v mpirun > /dev/null; then
  for h in "${hosts[@]}"; do echo "$h slots=2"; done > "$work/hostfile"
  "$FLOTILLA_CLUSTER_RUN" 0 mpirun --allow-run-as-root --hostfile "$work/hostfile" -n "$n" \
    --mca plm_rsh_agent "$FLOTILLA_CLUSTER_RSH" --mca pml ob1 --mca btl tcp,self --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
    "$mpi_bench" --sizes "$sizes" --repeat "$repeat" --target 0.5 --methods mpi,flotilla --label mpi > "$work/mpi.log" 2>&1 ||
    { echo "mpi failed:"; cat "$work/mpi.log"; exit 1; }
  grep '^{' "$work/mpi.log" >> "$results"
fi
# gloo (torch.distributed) where /usr/bin/python3 has PyTorch: one process a rank, two a host, its
# store on host 0; sizes in bytes.
if /usr/bin/python3 -c "import torch.distributed" 2> /dev/null; then
  bytes=$(echo "$sizes" | tr ',' '\n' | awk '/[kK]$/ { print $0 * 1024; next } /[mM]$/ { print $0 * 1048576; next } { print $0 + 0 }' |
          paste -sd, -)
  gpids=()
  for ((r = 0; r < n; r++)); do
    "$FLOTILLA_CLUSTER_RUN" $(( r / 2 )) env GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 /usr/bin/python3 \
      "$here/allreduce_compare.py" --gloo-rank $r --world $n --master "${hosts[0]}" --port 29600 --sizes "$bytes" \
      --target 0.5 --gloo-repeat "$repeat" > "$work/gloo.rank$r.log" 2>&1 &
    gpids+=($!)
  done
  for ((r = 0; r < n; r++)); do wait "${gpids[$r]}" || { echo "gloo rank $r failed:"; cat "$work/gloo.rank$r.log"; exit 1; }; done
  grep '^{' "$work/gloo.rank0.log" >> "$results"
fi
[ -z "$json" ] || cp "$results" "$json"
python3 - "$results" "$FLOTILLA_CLUSTER_RATE" "${#hosts[@]}" "$n" <<'PYEOF'
import json, re, statistics, sys
path, rate, hosts, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
link = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8 / 1e9 if m else None  # GB/s
runs = {}
for line in open(path):
    r = json.loads(line)
    # The MPI job times bare MPI_Allreduce ("mpi") and flotilla's MPI transport ("flotilla-mpi").
    label = r["label"] if r["label"] != "mpi" or r["method"] == "mpi" else "flotilla-mpi"
    runs.setdefault((label, r["bytes"]), []).append(r["bus_gbps"])
labels = [l for l in ("flat", "hierarchical", "flotilla-mpi", "mpi", "gloo") if any(k[0] == l for k in runs)]
sizes = sorted({k[1] for k in runs})
print(f"{hosts} hosts x 2 ranks, links at {rate}" + (f" ({link:.4f} GB/s each way)" if link else ""))
print("| size | " + " | ".join(f"{l} GB/s" + (" (x link)" if link else "") for l in labels) + " | hierarchical / flat |")
print("|---" * (len(labels) + 2) + "|")
for b in sizes:
    cells, med = [], {}
    for l in labels:
        v = runs.get((l, b))
        if not v:
            cells.append("-")
            continue
        med[l] = statistics.median(v)
        cells.append(f"{med[l]:.4f}" + (f" ({med[l] / link:.2f})" if link else ""))
    ratio = f"{med['hierarchical'] / med['flat']:.2f}x" if "flat" in med and "hierarchical" in med else "-"
    size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
    print(f"| {size} | " + " | ".join(cells) + f" | {ratio} |")
bound = 2 * (ranks - 1) / ranks / (2 * (hosts - 1) / hosts)
print(f"(a flat ring bound by its links reaches 1.00 x link; the hierarchical sum up to {bound:.2f} x link)")
PYEOF
