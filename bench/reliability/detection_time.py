#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""How long the surviving ranks of a TCP job take to notice a dead or stalled peer.

Runs a 3-rank job of tests/transport/tcp_rank.cpp N times (default 20) for each failure:
  kill   rank 1 kills itself (SIGKILL) 200 ms after a barrier: its connections close
  stall  rank 1 stops itself (SIGSTOP) 200 ms after the barrier: only its heartbeats stop
Rank 0 waits for a message from rank 1 and prints "caught after <ms> ms" from the barrier on; rank 2
waits for one from rank 0 and learns of the failure from rank 0. Detection time = caught - 200 ms.
Prints the median and the worst per failure and per rank, and one JSON line with all of it.

  python3 bench/reliability/detection_time.py --build build [--runs 20] [--heartbeat-ms 500]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

VICTIM_DELAY_MS = 200  # tcp_rank.cpp: the victim fails this long after the barrier


def run_once(launch, rank_program, mode, heartbeat_ms):
    cmd = [launch, "-n", "3", "--timeout", "30", "--grace", "0.2", "--env", f"FLOTILLA_HEARTBEAT_MS={heartbeat_ms}",
           "--", rank_program, mode, "1"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\[rank (\d+)\] caught after (\d+) ms: (.*)", line)
        if m:
            found[int(m.group(1))] = (int(m.group(2)) - VICTIM_DELAY_MS, m.group(3))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--modes", default="kill,stall")
    a = ap.parse_args()
    launch = os.path.join(a.build, "tools", "flotilla-launch")
    rank_program = os.path.join(a.build, "tests", "transport", "flotilla_tcp_rank")
    result = {"runs": a.runs, "heartbeat_ms": a.heartbeat_ms, "stall_limit_ms": 6 * a.heartbeat_ms}
    for mode in a.modes.split(","):
        times = {0: [], 2: []}
        example = None
        missing = 0
        for _ in range(a.runs):
            found = run_once(launch, rank_program, mode, a.heartbeat_ms)
            for r in times:
                if r in found:
                    times[r].append(found[r][0])
                    if r == 0 and example is None:
                        example = found[r][1]
                else:
                    missing += 1
        for r, t in times.items():
            if t:
                print(f"{mode:5} rank {r}: median {statistics.median(t):7.1f} ms, worst {max(t):5d} ms over {len(t)} runs")
                result[f"{mode}_rank{r}"] = {"median_ms": statistics.median(t), "worst_ms": max(t), "n": len(t)}
        result[f"{mode}_missing_reports"] = missing
        print(f"{mode:5} message: {example}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
