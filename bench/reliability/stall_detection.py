#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""How long the ranks of a TCP job take to name a stopped (SIGSTOP) rank, on each path a job takes.

Each path runs N times (default 20), with heartbeats every --heartbeat-ms (default 500, the
default of TcpOptions: stall limit 3 s). For each run it takes the time from the stop to each
survivor's report, and whether that report named the stopped rank and its host (rank R at
host:port). The documented bound is stall limit - interval to stall limit + interval
(docs/reliability.md, "Failure detection").

  sockets         3 ranks of tests/transport/tcp_rank.cpp (`stall 1`): rank 1 stops 200 ms after a
                  barrier; rank 0 waits for a message from it, rank 2 for one from rank 0
  shared-memory   3 ranks of tcp_rank (`shared-memory-stall 1`) summing through the shared-memory
                  segment; rank 1 stops between two sums, and ranks 0 and 2 wait on it in the next
  ps-async        4 workers + 1 asynchronous server (`ps-recovery drive stall`): worker 2 stops
                  after 20 pushes while the others keep pushing; the server drops it
  ps-sync         the same with a synchronous server (`ps-recovery drive stall-sync`): every
                  survivor stops with an error naming it
  pipeline        2 stages x 2 replicas (`pipeline stall 2 2 1`): rank 1 stops in its fourth step

Times of sockets, shared memory and pipeline come from the ranks' own clocks (the steady clock,
which the processes of one host share); those of the parameter servers from when the test driver
read each line.

  python3 bench/reliability/stall_detection.py --build build [--runs 20] [--heartbeat-ms 500] [--paths a,b]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

NAMED = re.compile(r"rank (\d+) at [0-9a-zA-Z.:\[\]-]+:\d+ has sent nothing")


def named(message, victim):
    m = NAMED.search(message or "")
    return bool(m) and int(m.group(1)) == victim


def launch(a, ranks, args, heartbeat_ms):
    cmd = [os.path.join(a.build, "tools", "flotilla-launch"), "-n", str(ranks), "--timeout", "60", "--grace", "0.2",
           "--env", f"FLOTILLA_HEARTBEAT_MS={heartbeat_ms}", "--"] + args
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120).stdout


def sockets(a, hb, mode="stall", offset_ms=200):
    out = launch(a, 3, [os.path.join(a.build, "tests", "transport", "flotilla_tcp_rank"), mode, "1"], hb)
    found = {}
    for line in out.splitlines():
        m = re.match(r"\[rank (\d+)\] caught after (\d+) ms: (.*)", line)
        if m and int(m.group(1)) not in found:
            found[int(m.group(1))] = (int(m.group(2)) - offset_ms, m.group(3))
    return found, 1


def shared_memory(a, hb):
    # Timed from the start of the sum the others wait in: rank 1 stops between two sums, so within
    # a sum's time (microseconds) of it.
    return sockets(a, hb, "shared-memory-stall", 0)


def ps(a, hb, mode):
    program = os.path.join(a.build, "tests", "distributed", "flotilla_distributed_tcp")
    out = subprocess.run([program, "ps-recovery", "drive", mode, str(hb)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120).stdout
    found = {}
    if mode == "stall":
        m = re.search(r"stall: worker 2 dropped (\d+) ms after it stopped", out)
        why = re.search(r"parameter server 4: dropped worker 2, going on \(\d+ still training\): (.*)", out)
        if m:
            found[4] = (int(m.group(1)), why.group(1) if why else "")
    else:
        for m in re.finditer(r"stall-sync: rank (\d+) named it (\d+) ms after it stopped", out):
            r = int(m.group(1))
            why = re.search(rf"^error: tcp rank {r} of 5: (.*)$", out, re.M)
            found[r] = (int(m.group(2)), why.group(1) if why else "")
    return found, 2


def pipeline(a, hb):
    program = os.path.join(a.build, "tests", "distributed", "flotilla_distributed_tcp")
    out = launch(a, 4, [program, "pipeline", "stall", "2", "2", "1"], hb)
    stop = re.search(r"\[rank 1\] stopping at (\d+)", out)
    found = {}
    for m in re.finditer(r"\[rank (\d+)\] caught at (\d+): (.*)", out):
        r = int(m.group(1))
        if stop and r not in found:
            found[r] = (int(m.group(2)) - int(stop.group(1)), m.group(3))
    return found, 1


PATHS = {
    "sockets": sockets,
    "shared-memory": shared_memory,
    "ps-async": lambda a, hb: ps(a, hb, "stall"),
    "ps-sync": lambda a, hb: ps(a, hb, "stall-sync"),
    "pipeline": pipeline,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--paths", default=",".join(PATHS))
    a = ap.parse_args()
    hb = a.heartbeat_ms
    limit = 6 * hb  # TcpOptions::heartbeat_misses
    result = {"runs": a.runs, "heartbeat_ms": hb, "stall_limit_ms": limit, "bound_ms": [limit - hb, limit + hb]}
    print(f"heartbeats every {hb} ms, stall limit {limit} ms: bound {limit - hb} to {limit + hb} ms")
    for path in a.paths.split(","):
        times, all_named, missing, example, victim = {}, True, 0, None, None
        for _ in range(a.runs):
            found, victim = PATHS[path](a, hb)
            if not found:
                missing += 1
            for r, (ms, message) in found.items():
                times.setdefault(r, []).append(ms)
                all_named = all_named and named(message, victim)
                example = example or message
        entry = {"victim": victim, "missing_runs": missing, "named_rank_and_host": all_named and not missing}
        for r, t in sorted(times.items()):
            within = sum(limit - hb <= x <= limit + hb for x in t)
            print(f"{path:13} rank {r}: median {statistics.median(t):7.1f} ms, worst {max(t):5d} ms, "
                  f"{within} of {len(t)} within the bound")
            entry[f"rank{r}"] = {"median_ms": statistics.median(t), "worst_ms": max(t), "best_ms": min(t), "n": len(t),
                                 "within_bound": within}
        print(f"{path:13} named rank {victim} and its host in every report: {entry['named_rank_and_host']}; "
              f"runs without a report: {missing}")
        print(f"{path:13} message: {example}")
        result[path] = entry
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
