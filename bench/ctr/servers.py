#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Click-through training on 1, 2 and 4 parameter servers at a fixed number of workers, with
uniform and skewed IDs: samples per second, and each server's share of the keys it serves.

    /usr/bin/python3 bench/ctr/servers.py --ctr build/rel/examples/ctr \
        --generate build/rel/tools/flotilla-ctr-generate \
        --server-load build/rel/bench/flotilla_ctr_server_load \
        [--workers 4] [--batch 256] [--servers 1,2,4] [--zipf 0.001,1.1,2] [--lines 300000] [--runs 2]

For each Zipf exponent it writes a training and a held-out file (flotilla-ctr-generate --zipf: an
exponent of 0.001 draws every field's IDs all but uniformly, the most frequent ID 1.4% more often
than the least of a million; 1.1 is the generator's default, Criteo-like skew), then for each
server count:

* runs examples/ctr in one process (workers and servers are threads), --workers W --servers S
  --batch B (per worker), synchronous, one epoch; samples/s is its RESULT's (the epoch's training
  throughput, parsing and evaluation excluded), the best of --runs, each run on a quiet machine
  as in ctr_vs_pytorch.py (repeated while others used more than --disturbance of it);
* replays the epoch's keys with flotilla_ctr_server_load (same seed, same batches: the trainer's
  order, each worker its part of every global batch) and charges each worker's distinct keys of a
  step to owner_of(key, S): each server's share of the keys served, as RowServer's keys_pulled
  would count them, of the IDs behind them before a worker coalesces a batch's repeats, and of
  the rows held.

The shares come from the replay, which counts what the servers' counters (RowServer::counters(),
sparse::Trainer::server_counters()) count, with any number of servers, without running them.
"""

import argparse
import atexit
import json
import os
import subprocess
import sys
import shutil
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import benchlib  # noqa: E402
from ctr_vs_pytorch import generate, measured  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctr", required=True, help="examples/ctr, built Release")
    ap.add_argument("--generate", required=True, help="flotilla-ctr-generate")
    ap.add_argument("--server-load", required=True, help="flotilla_ctr_server_load (bench/ctr/server_load.cpp)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256, help="examples per worker and step")
    ap.add_argument("--servers", default="1,2,4")
    ap.add_argument("--zipf", default="0.001,1.1,2", help="Zipf exponents of the ID draws, comma-separated")
    ap.add_argument("--lines", type=int, default=300000)
    ap.add_argument("--test-lines", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--quiet", type=float, default=0.15, help="wait before a run until others use less than this")
    ap.add_argument("--max-wait", type=float, default=30, help="seconds to wait for that at most")
    ap.add_argument("--disturbance", type=float, default=0.15,
                    help="repeat a run during which others used more than this share of the machine")
    ap.add_argument("--retries", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    for p in (args.ctr, args.generate, args.server_load):
        if not os.access(p, os.X_OK):
            ap.error("%s is not an executable (build it first)" % p)
    servers = [int(s) for s in args.servers.split(",")]
    exponents = [float(z) for z in args.zipf.split(",")]

    workdir = tempfile.mkdtemp(prefix="ctr_servers_")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)  # the generated files
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    rows = []
    for z in exponents:
        train, test, planted = generate(args, workdir, suffix="_z%g" % z, extra=["--zipf", str(z)])
        out = subprocess.run([args.server_load, "--train", train, "--workers", str(args.workers), "--batch",
                              str(args.batch), "--server-counts", args.servers, "--seed", str(args.seed)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("flotilla_ctr_server_load failed: %s" % out.stderr)
        load = {x["servers"]: x for x in (json.loads(line) for line in out.stdout.splitlines() if line.startswith("{"))}
        runs = {s: [] for s in servers}
        for r in range(args.runs):
            for s in (servers if r % 2 == 0 else list(reversed(servers))):
                argv = [args.ctr, "--train", train, "--test", test, "--workers", str(args.workers), "--servers", str(s),
                        "--batch", str(args.batch), "--epochs", "1", "--seed", str(args.seed)]
                result, foreign, cores, _ = measured("ctr, %d servers" % s, argv, args)
                runs[s].append(dict(result, foreign=foreign, cores=cores))
                print("  zipf %g, %d servers, run %d: %.0f samples/s, others used %.0f%%" % (
                    z, s, r + 1, result["samples_per_s"], 100 * foreign), file=sys.stderr)
        for s in servers:
            best = max(runs[s], key=lambda x: x["samples_per_s"])
            # The replay must have formed the batches the trainer did: the distinct keys per step that
            # the trainer reports are one of its workers' (whichever wrote the figure last).
            for r in runs[s]:
                if min(abs(r["rows_per_step"] - k) for k in load[s]["worker_keys_per_step"]) > 0.1:
                    raise SystemExit("the trainer's distinct keys per step (%.1f) are none of the replay's workers' (%s): "
                                     "the replay did not form the trainer's batches" % (
                                         r["rows_per_step"], load[s]["worker_keys_per_step"]))
            rows.append({"zipf": z, "servers": s, "best": best, "runs": runs[s], "load": load[s], "planted": planted})

    print("\nClick-through training on parameter servers: %d in-process workers x batch %d, %d lines, one epoch, %s" % (
        args.workers, args.batch, args.lines, started))
    print("| IDs | servers | samples/s (best of %d) | other runs | cores used | keys per worker and step | hottest "
          "server's share of keys served (even: 1/S) | hottest / mean | hottest share of IDs before coalescing | "
          "hottest share of rows held | AUC |" % args.runs)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        b, l = x["best"], x["load"]
        kind = "uniform (zipf %g)" % x["zipf"] if x["zipf"] < 0.01 else "zipf %g" % x["zipf"]
        others = ", ".join("%.0f" % r["samples_per_s"] for r in x["runs"] if r is not b)
        print("| %s | %d | %.0f | %s | %s | %.0f | %.4f | %.3f | %.4f | %.4f | %.4f |" % (
            kind, x["servers"], b["samples_per_s"], others or "-", "%.2f" % b["cores"] if b["cores"] else "-",
            l["keys_per_step"], l["hottest_share"],
            l["hottest_over_mean"], max(l["id_shares"]), max(l["row_shares"]), b["auc"]))
    foreign = [r["foreign"] for x in rows for r in x["runs"]]
    print("\nothers used %.0f-%.0f%% of the machine during the runs (load average at the end: %s)" % (
        100 * min(foreign), 100 * max(foreign), benchlib.loadavg()))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(), "args": vars(args),
                                   "rows": rows})


if __name__ == "__main__":
    main()
