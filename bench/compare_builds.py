#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Training throughput and allreduce bus bandwidth of two builds of flotilla, run alternately.

    python3 bench/compare_builds.py BEFORE_BUILD AFTER_BUILD [--rounds 5]

Each BUILD is a CMake build folder (configured with -DCMAKE_BUILD_TYPE=Release) in which
flotilla_train_bench, flotilla_tcp_busbw_bench and flotilla-launch are built. Every round runs
each measurement once with each build, one after the other, so a drift of the machine's speed
hits both alike; the table gives the medians over the rounds and after/before.

Measured: the Fashion-MNIST MLP and CNN (bench/train/train_bench.cpp) on 1 and 2 threads, in
samples per second of timed training steps; flotilla's allreduce between 2 processes of
flotilla-launch (bench/allreduce/tcp_busbw_bench.cpp), bus bandwidth in GB/s.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

TRAIN = [("mlp", 1, 3000), ("mlp", 2, 3000), ("cnn", 1, 150), ("cnn", 2, 150)]
SIZES = ["64K", "1M", "16M"]


def train(build: Path, model: str, threads: int, steps: int) -> float:
    out = subprocess.run([str(build / "bench" / "flotilla_train_bench"), "--model", model, "--threads", str(threads),
                          "--mode", "run", "--steps", str(steps), "--repeat", "1"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_second"]


def busbw(build: Path) -> dict[str, float]:
    out = subprocess.run([str(build / "tools" / "flotilla-launch"), "-n", "2", "--timeout", "300", "--",
                          str(build / "bench" / "flotilla_tcp_busbw_bench"), "--sizes", ",".join(SIZES),
                          "--repeat", "1"], check=True, capture_output=True, text=True).stdout
    result = {}
    for line in out.splitlines():
        if "{" not in line:
            continue
        record = json.loads(line[line.index("{"):])
        result[str(record["bytes"])] = record["bus_gbps"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    samples: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for model, threads, steps in TRAIN:
            for side, build in (("before", args.before), ("after", args.after)):
                v = train(build, model, threads, steps)
                samples.setdefault((f"{model}, {threads} thread{'s' if threads > 1 else ''} (samples/s)", side), []).append(v)
        for side, build in (("before", args.before), ("after", args.after)):
            for size, v in busbw(build).items():
                label = f"allreduce {int(size) // 1024} KiB, 2 processes (GB/s)"
                samples.setdefault((label, side), []).append(v)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    print(f"| measurement | before (median of {args.rounds}) | after (median of {args.rounds}) | after / before |")
    print("|---|---|---|---|")
    for label in dict.fromkeys(k[0] for k in samples):
        b = statistics.median(samples[(label, "before")])
        a = statistics.median(samples[(label, "after")])
        print(f"| {label} | {b:.4g} | {a:.4g} | {a / b:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
