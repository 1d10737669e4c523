#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Joins the Chrome-trace files that the processes of one flotilla job wrote into one timeline.

    scripts/merge_traces.py -o job.json timeline.json timeline.json.rank1 timeline.json.rank2 ...
    scripts/merge_traces.py -o job.json timeline.json*        (the shell's glob gives them all)
    scripts/merge_traces.py -o job.json --summary timeline.json*

With FitOptions::trace_file (the examples' --trace), rank 0 writes the named file and every other
worker's process the same name + ".rank<k>". Their timestamps are the steady clock's, which all
processes of one machine share, so files from one host are joined as they are. Files from different
hosts are first moved onto the system clock with the offset each file records ("otherData":
"steady_to_unix_us"), which lines them up to within the hosts' clock synchronisation (about a
millisecond with NTP): good for seeing who waited for whom at the scale of a step, not for
microsecond gaps between hosts.

--summary also prints, for data-parallel workers, where the steps' exposed communication went: the
spread between the ranks' ends of backward (the time the first to finish waits for the last before
any bucket can be summed) against each rank's wait for communication. Steps are matched by their
order in each rank's file, which synchronous training keeps in step. For the ranks of a pipeline
(pipeline::Trainer), it prints the share of each rank's steps spent computing, waiting for its
neighbours (the bubble, and the transfers), sending, in the replicas' allreduce and updating.

Exits non-zero, naming the file, on a file that is not such a trace.
"""

import argparse
import json
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("merge_traces.py: %s: %s" % (path, e))
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise SystemExit("merge_traces.py: %s: not a trace in the JSON object format (no traceEvents list)" % path)
    other = trace.get("otherData")
    if not isinstance(other, dict) or other.get("clock") != "steady" or \
            not isinstance(other.get("steady_to_unix_us"), (int, float)):
        raise SystemExit("merge_traces.py: %s: no otherData.clock/steady_to_unix_us (written by flotilla before "
                         "the clock was recorded?)" % path)
    return trace


def merge(traces):
    """One trace of all the files' events; their timestamps moved to the system clock when the
    files come from more than one host."""
    hosts = {t["otherData"].get("host", "") for t in traces}
    several_hosts = len(hosts) > 1
    events, seen_metadata = [], set()
    for t in traces:
        shift = t["otherData"]["steady_to_unix_us"] if several_hosts else 0.0
        for e in t["traceEvents"]:
            if e.get("ph") == "M":
                # Process and thread names: once per (pid, tid, name), whichever file has them.
                key = (e.get("name"), e.get("pid"), e.get("tid"))
                if key in seen_metadata:
                    continue
                seen_metadata.add(key)
            elif "ts" in e:
                e = dict(e, ts=round(e["ts"] + shift, 3))
            events.append(e)
    events.sort(key=lambda e: (e.get("ph") == "M", e.get("ts", 0)))
    clock = "system" if several_hosts else "steady"
    return {"traceEvents": events,
            "otherData": {"hosts": sorted(hosts), "clock": clock, "files": len(traces)}}


def quantiles(values):
    v = sorted(values)
    return "median %.1f, p10 %.1f, p90 %.1f" % (v[len(v) // 2], v[len(v) // 10], v[len(v) * 9 // 10])


def pipeline_summary(events_by_rank, ranks, skip):
    """Per pipeline rank, the share of its steps' time (from the end of update `skip` to the end of
    its last update) in each category of event; what no event covers is "untraced"."""
    n = min(sum(e["name"] == "update" for e in events_by_rank[r]) for r in ranks)
    if n <= skip:
        return ["summary: too few steps (%d)" % n]
    lines = ["pipeline: %d steps of ranks %s (the first %d skipped), share of each rank's time:" % (n - skip, ranks, skip)]
    for r in ranks:
        events = sorted(events_by_rank[r], key=lambda e: e["ts"])
        updates = [e for e in events if e["name"] == "update"]
        begin = updates[skip - 1]["ts"] + updates[skip - 1]["dur"] if skip else events[0]["ts"]
        end = updates[n - 1]["ts"] + updates[n - 1]["dur"]
        spent = {}
        for e in events:
            if e["ts"] >= begin and e["ts"] + e["dur"] <= end:
                spent[e.get("cat", "")] = spent.get(e.get("cat", ""), 0.0) + e["dur"]
        total = max(end - begin, 1e-9)
        parts = ["%s %.1f%%" % (c, 100.0 * spent.get(c, 0.0) / total) for c in ("compute", "wait", "communication", "update")]
        lines.append("  rank %d: %s, untraced %.1f%%" % (r, ", ".join(parts), 100.0 * (total - sum(spent.values())) / total))
    return lines


def summary(joined, skip=10):
    """Lines on the spread of the ranks' ends of backward and on each rank's wait (microseconds),
    over the steps every rank has, less the first `skip` (warm-up); for pipeline ranks (events
    "forward <micro-batch>"), pipeline_summary's."""
    by_rank = {}
    for e in joined["traceEvents"]:
        if e.get("ph") == "X":
            by_rank.setdefault(e["pid"], []).append(e)
    stages = sorted(r for r, events in by_rank.items() if any(e["name"].startswith("forward ") for e in events))
    if stages:
        return pipeline_summary(by_rank, stages, skip)
    steps = {}
    for e in joined["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") in ("forward+backward", "wait for communication"):
            steps.setdefault(e["pid"], {}).setdefault(e["name"], []).append(e)
    ranks = sorted(r for r in steps if "forward+backward" in steps[r])
    if len(ranks) < 2:
        return ["summary: needs the traces of at least two workers"]
    for r in ranks:
        for events in steps[r].values():
            events.sort(key=lambda e: e["ts"])
    n = min(len(steps[r]["forward+backward"]) for r in ranks)
    if n <= skip:
        return ["summary: too few steps (%d)" % n]
    ends = [[steps[r]["forward+backward"][i]["ts"] + steps[r]["forward+backward"][i]["dur"] for r in ranks]
            for i in range(skip, n)]
    lines = ["%d steps of ranks %s (the first %d skipped), microseconds:" % (n - skip, ranks, skip),
             "  spread of the ends of backward: " + quantiles([max(e) - min(e) for e in ends])]
    last = [0] * len(ranks)
    for e in ends:
        last[e.index(max(e))] += 1
    for k, r in enumerate(ranks):
        line = "  rank %d: forward+backward %s" % (r, quantiles([e["dur"] for e in steps[r]["forward+backward"][skip:n]]))
        waits = steps[r].get("wait for communication", [])[skip:n]
        if waits:
            line += "; wait for communication %s" % quantiles([e["dur"] for e in waits])
        lines.append(line + "; last to finish backward in %d of %d steps" % (last[k], len(ends)))
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", required=True, help="the joined trace")
    parser.add_argument("--summary", action="store_true",
                        help="print how far apart the workers finished backward, and how long each waited "
                             "(pipelines: where each rank's time went)")
    parser.add_argument("traces", nargs="+", help="the processes' trace files")
    args = parser.parse_args(argv)
    joined = merge([load(p) for p in args.traces])
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(joined, f, separators=(",", ":"))
        f.write("\n")
    ranks = sorted({e["pid"] for e in joined["traceEvents"] if e.get("ph") == "X" and "pid" in e})
    print("%s: %d events of ranks %s from %d file(s), %s clock" %
          (args.output, sum(e.get("ph") == "X" for e in joined["traceEvents"]), ranks, len(args.traces),
           joined["otherData"]["clock"]))
    if args.summary:
        print("\n".join(summary(joined)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
