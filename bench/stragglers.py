#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Update policies with and without a straggler: in-process workers (threads, one core each) training
the MLP for one epoch, then a full test-set evaluation, per policy (flotilla_straggler_bench).

    /usr/bin/python3 bench/stragglers.py --bench build/bench/flotilla_straggler_bench \
        [--workers 4,2] [--runs 3] [--json out.json]

For W workers: the slow worker is the last (TrainerOptions::straggler = {W-1, 2.0}: after computing
each step's gradients it sleeps as long again), or none. Policies: Synchronous<> (ring allreduce),
Synchronous<ParameterServer>, BoundedStaleness<1, 2, 4, 8>, Asynchronous<ParameterServer>
(parameter-server policies add one server thread). Every run is a fresh trainer with seed 1,
batch 64 per worker, SGD momentum 0.9 at --lr (default 0.05) and, for the parameter-server policies
that apply each worker's update alone (bounded staleness, asynchronous), also at --lr / W
(--scaled-lr, the usual correction: W updates reach the server per global batch).
Each policy runs in its own process, runs alternate, the driver waits for a quiet machine and
repeats disturbed runs. Throughput is the epoch record's samples/s (all workers' samples over the
epoch's wall time).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

POLICIES = ["sync", "sync-ps", "ssp1", "ssp2", "ssp4", "ssp8", "async"]
NAMES = {"sync": "Synchronous<> (ring)", "sync-ps": "Synchronous<ParameterServer>", "ssp1": "BoundedStaleness<1>",
         "ssp2": "BoundedStaleness<2>", "ssp4": "BoundedStaleness<4>", "ssp8": "BoundedStaleness<8>",
         "async": "Asynchronous<ParameterServer>"}


def run_one(argv, args):
    for attempt in range(args.retries + 1):
        benchlib.wait_quiet(args.quiet)
        with benchlib.Disturbance(lambda: [os.getpid()]) as d:
            r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("failed: %s\n%s" % (" ".join(argv), r.stderr[-3000:]))
        if d.foreign <= args.disturbance:
            break
        print("  disturbed (others used %.0f%%), again" % (100 * d.foreign), file=sys.stderr)
    out = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    for x in out:
        x["foreign"] = d.foreign
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="flotilla_straggler_bench")
    ap.add_argument("--workers", default="4,2")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--no-scaled-lr", action="store_true")
    ap.add_argument("--quiet", type=float, default=0.10)
    ap.add_argument("--disturbance", type=float, default=0.05)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()

    configs = []  # (workers, straggler?, policy, lr)
    for w in [int(x) for x in args.workers.split(",")]:
        for slow in (True, False):
            for p in args.policies.split(","):
                configs.append((w, slow, p, args.lr))
                if not args.no_scaled_lr and p.startswith(("ssp", "async")):
                    configs.append((w, slow, p, args.lr / w))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results = {c: [] for c in configs}
    for r in range(args.runs):
        order = configs if r % 2 == 0 else configs[::-1]
        for c in order:
            w, slow, p, lr = c
            argv = [args.bench, "--workers", str(w), "--policies", p, "--lr", repr(lr),
                    "--straggler", str(w - 1), "--factor", str(args.factor if slow else 1.0)]
            results[c].extend(run_one(argv, args))
        print("  run %d of %d done" % (r + 1, args.runs), file=sys.stderr)

    print("\nMLP, 1 epoch (60000 samples), batch 64 per worker, 1 core per worker, SGD momentum 0.9; "
          "median (min-max) of %d runs; %s" % (args.runs, started))
    for w in [int(x) for x in args.workers.split(",")]:
        for slow in (True, False):
            title = ("worker %d slowed %gx" % (w - 1, args.factor)) if slow else "no straggler"
            print("\n%d workers, %s" % (w, title))
            print("| policy | lr | samples/s | test accuracy % | test loss | max steps ahead | max staleness "
                  "| compute ms/step | exposed comm ms/step |")
            print("|---|---|---|---|---|---|---|---|---|")
            for c in configs:
                if c[0] != w or c[1] != slow:
                    continue
                rs = results[c]
                col = lambda k: [x[k] for x in rs]
                print("| %s | %g | %s | %s | %s | %s | %s | %.2f | %.2f |" % (
                    NAMES[c[2]], c[3], benchlib.fmt_spread(col("samples_per_second")),
                    benchlib.fmt_spread([100 * a for a in col("test_accuracy")], 2),
                    benchlib.fmt_spread(col("test_loss"), 3), benchlib.fmt_spread(col("max_steps_ahead")),
                    benchlib.fmt_spread(col("max_staleness")), benchlib.median(col("compute_ms_per_step")),
                    benchlib.median(col("exposed_comm_ms_per_step"))))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(),
                                   "results": [{"workers": c[0], "straggler": c[1], "policy": c[2], "lr": c[3],
                                                "runs": v} for c, v in results.items()]})


if __name__ == "__main__":
    main()
