# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""What the benchmark drivers share: Fashion-MNIST in NumPy, the OpenBLAS check, waiting for a quiet
machine, telling whether a run was disturbed by other processes, and statistics.

The drivers run with /usr/bin/python3 (Debian's, which sees Debian's PyTorch). They build nothing:
they are given the paths of flotilla's benchmark programs.
"""

import gzip
import json
import os
import statistics
import subprocess
import sys
import time

FASHION_MNIST = os.environ.get("FLOTILLA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


# ---- data -----------------------------------------------------------------------------------------

def _idx(path):
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist(split, directory=FASHION_MNIST):
    """(images float32 (n, 784) scaled to [0, 1] as flotilla does (x / 255), labels int64 (n,))."""
    import numpy as np
    prefix = "train" if split == "train" else "t10k"

    def find(stem):
        for name in (stem + ".gz", stem):
            p = os.path.join(directory, name)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(os.path.join(directory, stem + ".gz"))

    images = _idx(find(prefix + "-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) * np.float32(1.0 / 255.0)
    labels = _idx(find(prefix + "-labels-idx1-ubyte")).astype(np.int64)
    return images, labels


# ---- PyTorch's BLAS ---------------------------------------------------------------------------------

def loaded_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                libs.add(parts[5])
    return sorted(libs)


def require_openblas():
    """Runs a matrix product through PyTorch and refuses to go on unless this process has OpenBLAS
    mapped (Debian's PyTorch calls the libblas.so.3 alternative: the reference BLAS unless OpenBLAS
    is selected). Returns the library's path."""
    import torch
    a = torch.randn(64, 784)
    b = torch.randn(784, 256)
    (a @ b).sum().item()
    blas = [p for p in loaded_libraries() if "openblas" in os.path.basename(p)]
    if not blas:
        sys.exit("error: this PyTorch process has not loaded OpenBLAS (its BLAS is: %s); refusing to report"
                 % [p for p in loaded_libraries() if "blas" in p])
    return blas[0]


# ---- a quiet machine --------------------------------------------------------------------------------

def cpu_busy_ticks():
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal
    return total - idle, total


def process_ticks(pids):
    """utime + stime of the processes (all their threads), clock ticks; children reaped are counted
    by their parent's cutime/cstime, which we add too."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def process_tree(root):
    """root and all its descendants (flotilla-launch's ranks, mpirun's processes)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def foreign_load(seconds=0.5):
    """The fraction of the machine's CPU time used over `seconds` (by everyone: call it while the
    benchmarks are idle)."""
    b0, t0 = cpu_busy_ticks()
    time.sleep(seconds)
    b1, t1 = cpu_busy_ticks()
    return (b1 - b0) / max(t1 - t0, 1)


def wait_quiet(threshold=0.10, seconds=0.5, max_wait=1800, log=sys.stderr):
    """Waits until less than `threshold` of the machine is busy (sampled over `seconds`); returns the
    last sample. Gives up (returns the sample anyway) after `max_wait` seconds."""
    start = time.time()
    warned = False
    while True:
        load = foreign_load(seconds)
        if load < threshold:
            return load
        if not warned and log:
            print("  waiting for a quiet machine (%.0f%% busy, load average %s)" % (100 * load, loadavg()), file=log)
            warned = True
        if time.time() - start > max_wait:
            print("  the machine did not become quiet in %d s; measuring anyway" % max_wait, file=log)
            return load
        time.sleep(2)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Disturbance:
    """Measures how much CPU others used while a run was going on: (busy ticks of the machine) less
    (ticks of our processes), as a fraction of (wall time x CPUs)."""

    def __init__(self, pids_fn):
        self.pids_fn = pids_fn

    def __enter__(self):
        self.b0, self.t0 = cpu_busy_ticks()
        self.pids = self.pids_fn()
        self.p0 = process_ticks(self.pids)
        return self

    def __exit__(self, *exc):
        b1, t1 = cpu_busy_ticks()
        pids = set(self.pids) | set(self.pids_fn())
        p1 = process_ticks(pids)
        self.foreign = max(0.0, ((b1 - self.b0) - (p1 - self.p0)) / max(t1 - self.t0, 1))
        return False


# ---- statistics -------------------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    """(min, max)."""
    return (min(xs), max(xs)) if xs else (float("nan"), float("nan"))


def fmt_spread(xs, digits=0):
    if not xs:
        return "-"
    lo, hi = spread(xs)
    return "%.*f (%.*f-%.*f)" % (digits, median(xs), digits, lo, digits, hi)


def machine_summary():
    """A few lines about this machine and the software measured."""
    out = {}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "L2 cache", "L3 cache", "Hypervisor vendor"):
                out[k.strip()] = v.strip()
    except OSError:
        pass
    out["loadavg"] = loadavg()
    return out


def emit_json(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


# ---- a job printing JSON lines ------------------------------------------------------------------------

NEAR_NS = 150  # a cache-line round trip below this: the two CPUs share a cache (docs/benchmarks.md)


def core_round_trip_ns(probe):
    """The round trip of a cache line between CPUs 0 and 1 in ns (flotilla_core_latency_bench), or
    None without a probe or with fewer than two CPUs."""
    if not probe or (os.cpu_count() or 1) < 2:
        return None
    out = subprocess.run([probe, "--trips", "20000", "--repeat", "1"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["round_trip_ns"]


def phase_of(before, after):
    """"near" or "far" when both probes agree, "mixed" when the phase changed during the job."""
    if before is None or after is None:
        return None
    near = (before < NEAR_NS, after < NEAR_NS)
    return "near" if all(near) else "far" if not any(near) else "mixed"


def built_next_to(next_to, name):
    """The program `name` in the directory of the program `next_to`, if it was built there."""
    if not next_to:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(next_to)), name)
    return path if os.access(path, os.X_OK) else None


def default_probe(next_to):
    """flotilla_core_latency_bench in the directory of the program `next_to`, if it was built."""
    return built_next_to(next_to, "flotilla_core_latency_bench")


def run_json_job(name, argv, args, env=None):
    """Runs `argv` (a launcher and its ranks) on a quiet machine and returns (rows, foreign, attempt):
    the JSON objects it printed one per line (a launcher's "[rank k] " prefix removed; with
    args.core_latency, each tagged with the machine's phase before and after), the share of
    the machine other processes used meanwhile, and how many disturbed attempts were discarded
    (at most args.retries). Our own ticks count with those of the children we waited for: the
    job's processes are all waited for by their parents (mpirun, flotilla-launch, a Python
    launcher) and then by us."""
    rows, foreign = [], 0.0
    probe = getattr(args, "core_latency", None)
    for attempt in range(args.retries + 1):
        wait_quiet(args.quiet)
        before = core_round_trip_ns(probe)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        with Disturbance(lambda: [os.getpid()]) as d:
            out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit("%s failed (%d): %s\n%s" % (name, proc.returncode, " ".join(argv), err[-3000:]))
        after = core_round_trip_ns(probe)
        rows = []
        for line in out.splitlines():
            line = line.split("] ", 1)[1] if line.startswith("[rank") else line
            if line.startswith("{"):
                rows.append(json.loads(line))
        if before is not None:
            for x in rows:  # which phase of the machine the job ran in (docs/benchmarks.md)
                x.update(round_trip_ns=[before, after], phase=phase_of(before, after))
        foreign = d.foreign
        if foreign <= args.disturbance:
            return rows, foreign, attempt
        print("  %s disturbed (others used %.0f%% of the machine), again" % (name, 100 * foreign), file=sys.stderr)
    return rows, foreign, args.retries
