#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Click-through training, flotilla's sparse trainer against PyTorch, on this machine: samples per
second of one epoch's training and AUC on a held-out file after it.

    /usr/bin/python3 bench/ctr/ctr_vs_pytorch.py --ctr build/rel/examples/ctr \
        --generate build/rel/tools/flotilla-ctr-generate [--lines 300000] [--test-lines 50000] \
        [--runs 2] [--json out.json]
    /usr/bin/python3 bench/ctr/ctr_vs_pytorch.py --ctr ... --train train.tsv --test test.tsv

The same model on both sides: 26 fields embedded (16 values a row, a row per distinct (field, ID):
flotilla's Embedding without buckets, PyTorch's peer with --table-size 0, per-field index maps),
sum pooling, the 13 numeric features as log(1 + x), a 64-32-1 ReLU tower (Glorot-uniform weights,
zero biases on both sides), rows initialised uniform in [-0.05, 0.05] and trained by Adagrad (lr
--row-lr), the tower by Adam (lr --tower-lr), binary cross-entropy averaged over a global batch of
--batch examples, one epoch.

What each side times: training only, parsing excluded on both. flotilla: the `samples_per_s` of
examples/ctr's RESULT line, the epoch's training samples over the epoch's wall time up to (not
including) the held-out evaluation. PyTorch (bench/ctr/pytorch_ctr.py): samples over the wall time
of the training loop, the files having been parsed into tensors first.

Configurations (flotilla in-process: workers and parameter servers are threads of one process):
* one CPU (both processes under `taskset -c 0`): flotilla 1 worker + 1 server, PyTorch 1 thread;
* two CPUs: flotilla 1 worker + 1 server, 2 workers (each --batch / 2) + 1 server, 2 workers + 2
  servers; PyTorch 1 thread, 2 threads, and 2 threads with OMP_WAIT_POLICY=passive (libgomp's default
  spinning makes PyTorch's 2 threads over ten times slower whenever another process holds one of
  the two cores, as on this shared machine).
A flotilla configuration's ratio is to PyTorch's fastest configuration on as many CPUs.
Next to each figure it reports the cores the side used on average while training: PyTorch's
process CPU time over the loop's wall time; for flotilla, the process's CPU time over the wall time
during which its worker and server threads exist (fit: training and the held-out evaluation),
sampled from /proc every few milliseconds.

The machine is shared: before each run the driver waits (up to --max-wait s) until others use less
than --quiet of it, measures how much others used during the run and repeats it (up to --retries
times) when that was more than --disturbance; it runs each configuration --runs times, in turns
(the order reversed every other round), and reports the best samples/s of each.
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
sys.path.insert(0, os.path.dirname(HERE))
import benchlib  # noqa: E402

PEER = os.path.join(HERE, "pytorch_ctr.py")


# ---- running one job ------------------------------------------------------------------------------

def proc_cpu_ticks(pid):
    """(utime + stime of the whole process, number of its threads), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12]), int(fields[17])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def run_job(name, argv, env=None, poll=0.004):
    """Runs argv; returns (RESULT json, stdout, share of the machine others used, fit-window cores).

    The fit window is the span during which the process has more than one thread (flotilla's
    in-process ranks); its cores are the process's CPU ticks over that span's wall time."""
    with benchlib.Disturbance(lambda: [os.getpid()]) as d:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        window = None  # [t0, ticks0, t1, ticks1]
        # Reading the pipes only at the end is safe: the programs print a few lines.
        while proc.poll() is None:
            s = proc_cpu_ticks(proc.pid)
            now = time.perf_counter()
            if s is not None:
                ticks, threads = s
                if threads > 1:
                    if window is None:
                        window = [now, ticks, now, ticks]
                    window[2], window[3] = now, ticks
            time.sleep(poll)
        out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit("%s failed (%d): %s\n%s" % (name, proc.returncode, " ".join(argv), err[-3000:]))
    result = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    if result is None:
        raise SystemExit("%s printed no RESULT line: %s\n%s" % (name, " ".join(argv), out[-3000:]))
    cores = None
    if window is not None and window[2] - window[0] > 0.05:
        cores = (window[3] - window[1]) / benchlib.CLK_TCK / (window[2] - window[0])
    return result, out, d.foreign, cores


def quiet_enough(threshold, max_wait):
    """Waits until others use less than `threshold` of the machine, at most max_wait seconds;
    returns the last sample of the machine's load."""
    start = time.time()
    while True:
        load = benchlib.foreign_load(0.5)
        if load < threshold or time.time() - start > max_wait:
            return load
        time.sleep(1)


def measured(name, argv, args):
    """One run of argv on a quiet machine: waits until others use less than args.quiet of it (at
    most args.max_wait s), and repeats the run (at most args.retries times) while others used more
    than args.disturbance of it meanwhile. Returns (RESULT json, others' share, fit-window cores,
    attempts)."""
    for attempt in range(1, args.retries + 2):
        before = quiet_enough(args.quiet, args.max_wait)
        result, _, foreign, cores = run_job(name, argv)
        if foreign <= args.disturbance or attempt == args.retries + 1:
            result.update(load_before=before, loadavg=benchlib.loadavg(), attempts=attempt)
            return result, foreign, cores, attempt
        print("  %s: others used %.0f%% of the machine during the run, again" % (name, 100 * foreign), file=sys.stderr)


def generate(args, workdir, suffix="", extra=()):
    train = os.path.join(workdir, "train%s.tsv" % suffix)
    test = os.path.join(workdir, "test%s.tsv" % suffix)
    out = subprocess.run([args.generate, "--lines", str(args.lines), "--out", train, "--test-lines",
                          str(args.test_lines), "--test-out", test, "--seed", str(args.seed)] + list(extra),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("flotilla-ctr-generate failed: %s" % out.stderr)
    planted = None
    for line in out.stdout.splitlines():
        if line.startswith("planted model"):
            planted = line.strip()
    return train, test, planted


# ---- the comparison -----------------------------------------------------------------------------------

def configurations(args):
    """(label, side, cpus, argv maker) of every configuration."""
    one_cpu = ["taskset", "-c", "0"]

    def flotilla(workers, servers=1):
        return lambda train, test: [args.ctr, "--train", train, "--test", test, "--workers", str(workers),
                                    "--servers", str(servers), "--batch", str(args.batch // workers), "--epochs", "1",
                                    "--row-lr", str(args.row_lr), "--tower-lr", str(args.tower_lr),
                                    "--seed", str(args.seed)]

    def pytorch(threads):
        return lambda train, test: [sys.executable, PEER, "--train", train, "--test", test, "--table-size", "0",
                                    "--dim", "16", "--hidden", "64,32", "--batch", str(args.batch), "--epochs", "1",
                                    "--lr", str(args.row_lr), "--tower-optimizer", "adam",
                                    "--tower-lr", str(args.tower_lr), "--row-init", "uniform:0.05",
                                    "--tower-init", "glorot", "--threads", str(threads), "--seed", str(args.seed)]

    f1, f2, f22, p1, p2 = flotilla(1), flotilla(2), flotilla(2, 2), pytorch(1), pytorch(2)
    passive = ["env", "OMP_WAIT_POLICY=passive"]
    return [
        ("flotilla 1 worker + 1 server", "flotilla", 1, lambda tr, te: one_cpu + f1(tr, te)),
        ("PyTorch 1 thread", "pytorch", 1, lambda tr, te: one_cpu + p1(tr, te)),
        ("flotilla 1 worker + 1 server", "flotilla", 2, f1),
        ("flotilla 2 workers + 1 server", "flotilla", 2, f2),
        ("flotilla 2 workers + 2 servers", "flotilla", 2, f22),
        ("PyTorch 1 thread", "pytorch", 2, p1),
        ("PyTorch 2 threads", "pytorch", 2, p2),
        ("PyTorch 2 threads, OMP_WAIT_POLICY=passive", "pytorch", 2, lambda tr, te: passive + p2(tr, te)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctr", required=True, help="examples/ctr, built Release")
    ap.add_argument("--generate", help="flotilla-ctr-generate (to write the files; or give --train and --test)")
    ap.add_argument("--train")
    ap.add_argument("--test")
    ap.add_argument("--lines", type=int, default=300000)
    ap.add_argument("--test-lines", type=int, default=50000)
    ap.add_argument("--batch", type=int, default=1024, help="global batch (flotilla's 2 workers take half each)")
    ap.add_argument("--row-lr", type=float, default=0.05)
    ap.add_argument("--tower-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--quiet", type=float, default=0.15, help="wait before a run until others use less than this")
    ap.add_argument("--max-wait", type=float, default=30, help="seconds to wait for that at most")
    ap.add_argument("--disturbance", type=float, default=0.15,
                    help="repeat a run during which others used more than this share of the machine")
    ap.add_argument("--retries", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated indexes of the configurations to run (debugging)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.batch % 2:
        ap.error("--batch must be even (two workers take half each)")
    if not os.access(args.ctr, os.X_OK):
        ap.error("--ctr: %s is not an executable (build the ctr target)" % args.ctr)

    workdir = tempfile.mkdtemp(prefix="ctr_vs_pytorch_")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)  # the generated files
    planted = None
    if args.train and args.test:
        train, test = args.train, args.test
    elif args.generate:
        train, test, planted = generate(args, workdir)
    else:
        ap.error("give --generate, or --train and --test")

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    configs = configurations(args)
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(len(configs))
    runs = {i: [] for i in chosen}
    for r in range(args.runs):
        order = list(chosen) if r % 2 == 0 else list(reversed(list(chosen)))
        for i in order:
            label, side, cpus, argv = configs[i]
            result, foreign, cores, _ = measured(label, argv(train, test), args)
            if side == "pytorch":
                cores = result["train_cpu_seconds"] / result["train_seconds"]
            x = dict(result, foreign=foreign, cores=cores)
            runs[i].append(x)
            print("  %s, %d CPU(s), run %d: %.0f samples/s, AUC %.4f, %.2f cores, others used %.0f%%" % (
                label, cpus, r + 1, x["samples_per_s"], x["auc"], cores or float("nan"), 100 * foreign),
                file=sys.stderr)

    best = {i: max(runs[i], key=lambda x: x["samples_per_s"]) for i in chosen}
    # The peer of a flotilla configuration: PyTorch's fastest on as many CPUs (on two CPUs, with
    # one thread or two, either OpenMP wait policy), so that a ratio never flatters flotilla.
    peer_of = {}
    for i in chosen:
        _, side, cpus, _ = configs[i]
        peers = [j for j in chosen if configs[j][1] == "pytorch" and configs[j][2] == cpus]
        if side == "flotilla" and peers:
            peer_of[i] = max(peers, key=lambda j: best[j]["samples_per_s"])

    print("\nClick-through training, one epoch of %s lines, global batch %d, %s" % (
        "%d" % args.lines if not args.train else train, args.batch, started))
    if planted:
        print(planted)
    pt = [best[i] for i in chosen if configs[i][1] == "pytorch"]
    if pt:
        print("PyTorch %s, %s; PyTorch table: %d rows" % (pt[0].get("torch"), pt[0].get("blas"), pt[0]["table_rows"]))
    print("| CPUs | configuration | samples/s (best of %d) | other runs | others' share of the machine | cores used "
          "| AUC | log loss | samples/s vs PyTorch | AUC - PyTorch's |" % args.runs)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i in chosen:
        label, side, cpus, _ = configs[i]
        b = best[i]
        others = ", ".join("%.0f" % x["samples_per_s"] for x in runs[i] if x is not b)
        ratio = dauc = "-"
        if i in peer_of:
            p = best[peer_of[i]]
            ratio = "**%.2fx**" % (b["samples_per_s"] / p["samples_per_s"])
            dauc = "%+.4f" % (b["auc"] - p["auc"])
        if ratio != "-":
            ratio += " (%s)" % configs[peer_of[i]][0].replace("PyTorch ", "")
        print("| %d | %s | %.0f | %s | %.0f%% | %s | %.4f | %.4f | %s | %s |" % (
            cpus, label, b["samples_per_s"], others or "-", 100 * b["foreign"],
            "%.2f" % b["cores"] if b["cores"] else "-", b["auc"],
            b["log_loss"], ratio, dauc))
    foreign = [x["foreign"] for i in chosen for x in runs[i]]
    print("\nothers used %.0f-%.0f%% of the machine during the runs (load average at the end: %s)" % (
        100 * min(foreign), 100 * max(foreign), benchlib.loadavg()))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(), "args": vars(args),
                                   "configurations": [c[:3] for c in configs],
                                   "runs": {str(i): runs[i] for i in chosen}})


if __name__ == "__main__":
    main()
