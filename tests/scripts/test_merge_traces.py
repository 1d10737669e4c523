#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""scripts/merge_traces.py: files of one host are joined as they are; files of several hosts are
moved onto the system clock with each file's offset; a file that is not a flotilla trace is refused
with its name. Exits non-zero on the first failed check."""

import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "merge_traces.py")


def trace(rank, host, offset, starts):
    events = [{"name": "forward+backward", "cat": "compute", "ph": "X", "ts": t, "dur": 5.0, "pid": rank, "tid": 0}
              for t in starts]
    events.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": "rank %d" % rank}})
    return {"traceEvents": events, "otherData": {"host": host, "clock": "steady", "steady_to_unix_us": offset}}


def merged(tmp, files, *options):
    paths = []
    for i, t in enumerate(files):
        p = os.path.join(tmp, "t%d.json" % i)
        with open(p, "w") as f:
            f.write(t if isinstance(t, str) else json.dumps(t))
        paths.append(p)
    out = os.path.join(tmp, "out.json")
    r = subprocess.run([sys.executable, SCRIPT, "-o", out] + list(options) + paths, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    with open(out) as f:
        return json.load(f), r.stdout


def starts(joined, rank):
    return [e["ts"] for e in joined["traceEvents"] if e["ph"] == "X" and e["pid"] == rank]


def main():
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        # One host: the steady clock is shared, the timestamps stay as written.
        joined, _ = merged(tmp, [trace(0, "a", 1000.0, [10.0, 30.0]), trace(1, "a", 1000.5, [12.0])])
        check(joined is not None, "one host: merged")
        check(starts(joined, 0) == [10.0, 30.0] and starts(joined, 1) == [12.0], "one host: timestamps unchanged")
        check([e["ts"] for e in joined["traceEvents"] if e["ph"] == "X"] == [10.0, 12.0, 30.0], "one host: time order")
        check(sum(e["ph"] == "M" for e in joined["traceEvents"]) == 2, "one host: both ranks' names")
        check(joined["otherData"]["clock"] == "steady", "one host: steady clock")

        # Two hosts: each file moves by its own offset onto the system clock.
        joined, _ = merged(tmp, [trace(0, "a", 1000.0, [10.0]), trace(1, "b", 5000.0, [7.0])])
        check(starts(joined, 0) == [1010.0] and starts(joined, 1) == [5007.0], "two hosts: moved by their offsets")
        check(joined["otherData"]["clock"] == "system" and joined["otherData"]["hosts"] == ["a", "b"],
              "two hosts: system clock, both hosts named")

        # --summary: 20 steps of 100 us starting together, rank 1's backward 5 us longer (the first
        # 10 steps are skipped as warm-up); the rank that finishes first waits for the other.
        steps = [1000.0 * i for i in range(20)]
        a, b = trace(0, "a", 0.0, steps), trace(1, "a", 0.0, steps)
        for e in b["traceEvents"]:
            if e["ph"] == "X":
                e["dur"] = 10.0
        for t, wait in ((a, 15.0), (b, 10.0)):
            t["traceEvents"] += [{"name": "wait for communication", "cat": "wait", "ph": "X", "ts": s + 100.0,
                                  "dur": wait, "pid": t["traceEvents"][0]["pid"], "tid": 0} for s in steps]
        joined, out = merged(tmp, [a, b], "--summary")
        check(joined is not None and "10 steps of ranks [0, 1]" in out, "summary: steps counted")
        check("spread of the ends of backward: median 5.0," in out, "summary: the spread")
        check("rank 1: forward+backward median 10.0" in out and "last to finish backward in 10 of 10" in out,
              "summary: rank 1 finished last")
        check("rank 0: forward+backward median 5.0, p10 5.0, p90 5.0; wait for communication median 15.0" in out,
              "summary: rank 0's wait")

        # --summary of a pipeline's ranks: 20 steps of 100 us each; rank 0 computes 60 us, waits 30 us,
        # sends 5 us and updates 2 us of each (3 us untraced), rank 1 computes 80 us and updates 20 us.
        def stage(rank, pieces):
            t = trace(rank, "a", 0.0, [])
            for i in range(20):
                at = 100.0 * i
                for name, cat, dur in pieces:
                    t["traceEvents"].append({"name": name, "cat": cat, "ph": "X", "ts": at, "dur": dur, "pid": rank, "tid": 0})
                    at += dur
            return t
        joined, out = merged(tmp, [stage(0, [("receive gradients 0", "wait", 30.0), ("forward 0", "compute", 25.0),
                                             ("send activations 0", "communication", 5.0), ("backward 0", "compute", 35.0),
                                             ("update", "update", 2.0)]),
                                   stage(1, [("forward 0", "compute", 30.0), ("backward 0", "compute", 50.0),
                                             ("update", "update", 20.0)])], "--summary")
        check(joined is not None and "pipeline: 10 steps of ranks [0, 1] (the first 10 skipped)" in out,
              "pipeline summary: steps counted")
        check("rank 0: compute 60.0%, wait 30.0%, communication 5.0%, update 2.0%, untraced 3.0%" in out,
              "pipeline summary: rank 0's shares")
        check("rank 1: compute 80.0%, wait 0.0%, communication 0.0%, update 20.0%, untraced 0.0%" in out,
              "pipeline summary: rank 1's shares")

        # Not a flotilla trace: refused, naming the file.
        joined, err = merged(tmp, [trace(0, "a", 0.0, [1.0]), {"traceEvents": []}])
        check(joined is None and "t1.json" in err and "steady_to_unix_us" in err, "no clock offset: refused by name")
        joined, err = merged(tmp, ["{not json"])
        check(joined is None and "t0.json" in err, "not JSON: refused by name")

    for f in failures:
        print("FAILED:", f)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
