#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Allreduce bus bandwidth between 2 processes on this machine (loopback), in one invocation:

* flotilla-tcp:   collective::ring_allreduce over transport::Tcp's sockets (FLOTILLA_SHARED_MEMORY=off),
                  ranks started by flotilla-launch (flotilla_tcp_busbw_bench): with its default
                  options (the algorithm chosen by size: recursive doubling for 2 ranks up to
                  512 KiB, the ring above) and the ring alone;
* flotilla-shm:   the same transport as users get it on one host: ring_allreduce takes the
                  endpoint's shared-memory allreduce (TcpOptions::shared_memory, auto);
* mpi-tcp:        Open MPI's MPI_Allreduce, mpirun --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo;
* mpi-vader:      the same over shared memory, --mca btl vader,self;
* gloo:           torch.distributed.all_reduce with the gloo backend (/usr/bin/python3, two processes,
                  init through a TCP store on 127.0.0.1, GLOO_SOCKET_IFNAME=lo, one thread each);
* loopback:       no allreduce at all: what loopback TCP carries between the two processes
                  (flotilla_loopback_bench, next to --tcp-bench): one way, and both ways at once
                  (the traffic of any 2-rank allreduce, each rank sending and receiving the whole
                  buffer; busy-polled, with no framing and no additions): the machine's side of
                  an allreduce over the sockets;
* and, inside both mpirun jobs, flotilla's MPI transport (flotilla_mpi_busbw_bench):
  ring_allreduce on an MpiEndpoint with its default options (MPI_Allreduce up to 16 MiB, the ring
  above), with AllreduceAlgorithm::native (the endpoint's MPI_Allreduce) and with ::ring
  (flotilla's ring over MPI point-to-point), next to bare MPI_Allreduce.

    /usr/bin/python3 bench/allreduce_compare.py --launch build/tools/flotilla-launch \
        --tcp-bench build/bench/flotilla_tcp_busbw_bench \
        --mpi-bench build/bench/flotilla_mpi_busbw_bench [--rounds 5] [--json out.json]

Bus bandwidth = 2 (N-1)/N x bytes / time per call, N = 2; time per call = the slower rank's time
for a calibrated number of calls (about --target seconds) / calls; in-place sum of float32.
Each job measures every size once; the jobs are run in rounds, the order rotating each round, so
that every method sees the same conditions; before each job the driver waits for a quiet machine,
and it repeats a job during which other processes used more than --disturbance of the machine.
Tables give the median over rounds (and min-max). With flotilla_core_latency_bench built (next to
--tcp-bench), each job is tagged with the machine's phase, and two more tables give the rounds run
in the "near" and in the "far" phase alone (docs/benchmarks.md, "The machine's two phases").
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def default_sizes():
    return [4096 * 4 ** i for i in range(8)]  # 4 KiB .. 64 MiB


def size_text(b):
    return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)


# ---- gloo (torch.distributed) ---------------------------------------------------------------------

def gloo_rank(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (args.master, args.port), rank=args.rank,
                            world_size=args.world)
    n = dist.get_world_size()
    x = torch.full((1000003,), float(args.rank + 1))
    dist.all_reduce(x)
    assert bool((x == n * (n + 1) / 2).all()), "gloo allreduce gave a wrong sum"

    def time_calls(buf, iters):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item() / iters

    sizes = [int(s) for s in args.sizes.split(",")]
    iters = {}
    for b in sizes:
        buf = torch.zeros(max(b // 4, 1))
        for _ in range(3):
            dist.all_reduce(buf)
        probe = 1
        t = time_calls(buf, probe)
        while t * probe < 0.02 and probe < 20000:
            probe *= 4
            t = time_calls(buf, probe)
        want = torch.tensor([min(max(args.target / max(t, 1e-9), 3), 20000)], dtype=torch.float64)
        dist.broadcast(want, 0)
        iters[b] = int(want.item())
    for rep, b in ((rep, b) for rep in range(args.gloo_repeat) for b in sizes):
        buf = torch.zeros(max(b // 4, 1))
        dist.all_reduce(buf)
        t = time_calls(buf, iters[b])
        if args.rank == 0:
            print(json.dumps({"label": "gloo", "method": "gloo", "ranks": n, "bytes": b, "rep": rep, "iters": iters[b],
                              "seconds": t, "bus_gbps": 2 * (n - 1) / n * b / t / 1e9}), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- jobs -------------------------------------------------------------------------------------------

def job_commands(args):
    sizes = ",".join(str(b) for b in args.size_list)
    common = ["--sizes", sizes, "--repeat", "1", "--target", str(args.target)]
    mpi = ["mpirun", "-n", "2", "--bind-to", "none", "--mca", "pml", "ob1"]
    jobs = {
        "flotilla-tcp": lambda: [args.launch, "-n", "2", "--env", "FLOTILLA_SHARED_MEMORY=off", "--", args.tcp_bench,
                                 "--methods", "flotilla,ring"] + common,
        "flotilla-shm": lambda: [args.launch, "-n", "2", "--", args.tcp_bench, "--methods", "flotilla",
                                 "--label", "tcp-shm"] + common,
        "mpi-tcp": lambda: mpi + ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", args.mpi_bench,
                                  "--label", "mpi-tcp"] + common,
        "mpi-vader": lambda: mpi + ["--mca", "btl", "vader,self", args.mpi_bench, "--label", "mpi-vader"] + common,
        "loopback": lambda: [args.loopback_bench, "--methods", "stream,exchange-spin"] + common,
        "gloo": lambda: [sys.executable, os.path.abspath(__file__), "--gloo", "--sizes", sizes,
                         "--target", str(args.target)],
    }
    return {k: v for k, v in jobs.items() if k in args.jobs.split(",")}


def run_gloo_pair(args):
    port = free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--gloo-rank", str(r), "--port", str(port),
                               "--sizes", args.sizes, "--target", str(args.target)],
                              stdout=subprocess.PIPE, text=True, env=env) for r in range(2)]
    out = procs[0].communicate()[0]
    procs[1].wait()
    sys.stdout.write(out)
    if any(p.returncode for p in procs):
        sys.exit(1)


def run_job(name, argv, args):
    return benchlib.run_json_job(name, argv, args, env=dict(os.environ, **MPI_ENV))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launch", help="flotilla-launch")
    ap.add_argument("--tcp-bench", help="flotilla_tcp_busbw_bench")
    ap.add_argument("--mpi-bench", help="flotilla_mpi_busbw_bench")
    ap.add_argument("--loopback-bench", help="flotilla_loopback_bench (default: next to --tcp-bench, if built)")
    ap.add_argument("--jobs", default="flotilla-tcp,flotilla-shm,mpi-tcp,mpi-vader,gloo,loopback")
    ap.add_argument("--core-latency", help="flotilla_core_latency_bench (default: next to --tcp-bench, if built)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(str(b) for b in default_sizes()), help="bytes, comma-separated")
    ap.add_argument("--target", type=float, default=0.2, help="seconds per measurement")
    ap.add_argument("--quiet", type=float, default=0.10)
    ap.add_argument("--disturbance", type=float, default=0.05)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--gloo", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gloo-rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    # One gloo rank of a larger job elsewhere (bench/cluster_allreduce.sh): the store's address, the
    # job's size, and how many times to measure each size.
    ap.add_argument("--master", default="127.0.0.1", help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--gloo-repeat", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.core_latency:
        args.core_latency = benchlib.default_probe(args.tcp_bench)
    if not args.loopback_bench:
        args.loopback_bench = benchlib.built_next_to(args.tcp_bench, "flotilla_loopback_bench")
    if not args.loopback_bench:
        args.jobs = ",".join(j for j in args.jobs.split(",") if j != "loopback")
    args.size_list = [int(s) for s in args.sizes.split(",")]
    if args.gloo_rank >= 0:
        args.rank = args.gloo_rank
        return gloo_rank(args)
    if args.gloo:
        return run_gloo_pair(args)

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    jobs = job_commands(args)
    names = list(jobs)
    rows = []  # every measurement
    log = []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            out, foreign, retries = run_job(name, jobs[name](), args)
            for x in out:
                x["round"] = r
                x["job"] = name
            rows.extend(out)
            phase = out[0].get("phase") if out else None
            log.append({"round": r, "job": name, "foreign": foreign, "retries": retries, "phase": phase})
            print("  round %d %s done (others %.1f%%, phase %s)" % (r + 1, name, 100 * foreign, phase), file=sys.stderr)

    def series(job, method, b, phase=None):
        return [x["bus_gbps"] for x in rows if x["job"] == job and x["method"] == method and x["bytes"] == b
                and (phase is None or x.get("phase") == phase)]

    med = lambda xs: benchlib.median(xs)
    cols = [("flotilla TCP, sockets", "flotilla-tcp", "flotilla"), ("flotilla TCP, sockets, ring only", "flotilla-tcp", "ring"),
            ("flotilla TCP, shared memory (default)", "flotilla-shm", "flotilla"), ("MPI btl tcp", "mpi-tcp", "mpi"),
            ("MPI btl vader (shm)", "mpi-vader", "mpi"), ("gloo", "gloo", "gloo"),
            ("loopback TCP, one way", "loopback", "stream"), ("loopback TCP, both ways", "loopback", "exchange-spin")]
    cols = [c for c in cols if c[1] in jobs]
    ratios = [("sockets / MPI tcp", ("flotilla-tcp", "flotilla"), ("mpi-tcp", "mpi")),
              ("sockets / gloo", ("flotilla-tcp", "flotilla"), ("gloo", "gloo")),
              ("shared memory / MPI vader", ("flotilla-shm", "flotilla"), ("mpi-vader", "mpi")),
              ("sockets / loopback both ways", ("flotilla-tcp", "flotilla"), ("loopback", "exchange-spin"))]
    ratios = [r for r in ratios if r[1][0] in jobs and r[2][0] in jobs]

    def table(phase):
        print("| size | " + " | ".join(c[0] for c in cols + ratios) + " |")
        print("|---|" + "---|" * (len(cols) + len(ratios)))
        for b in args.size_list:
            cells = []
            for _, j, m in cols:
                xs = series(j, m, b, phase)
                cells.append(benchlib.fmt_spread(xs, 3) + (" [%d]" % len(xs) if phase and xs else "") if xs else "-")
            for _, num, den in ratios:
                n, d = series(*num, b, phase), series(*den, b, phase)
                cells.append("%.2fx" % (med(n) / med(d)) if n and d else "-")
            print("| %s | %s |" % (size_text(b), " | ".join(cells)))

    print("\nAllreduce bus bandwidth, 2 processes, loopback, float32 sum in place; GB/s (1e9 B/s): median (min-max) "
          "of %d rounds; %s" % (args.rounds, started))
    table(None)
    if any(x.get("phase") for x in rows):
        for phase, what in (("near", "shared a cache"), ("far", "did not share a cache")):
            if not any(x.get("phase") == phase for x in rows):
                continue
            print("\nThe same, rounds in the %s phase only ([rounds]; the two CPUs %s before and after the job):" % (
                phase, what))
            table(phase)

    for job, title in (("mpi-vader", "btl vader,self"), ("mpi-tcp", "btl tcp,self")):
        if job not in jobs:
            continue
        print("\nflotilla's MPI transport against bare MPI_Allreduce, mpirun %s; GB/s: median (min-max)" % title)
        print("| size | MPI_Allreduce | flotilla (default) | flotilla, native only | flotilla, ring only | default / bare "
              "| native / bare | ring / bare |")
        print("|---|---|---|---|---|---|---|---|")
        for b in args.size_list:
            bare, auto, nat, ring = (series(job, m, b) for m in ("mpi", "flotilla", "flotilla-native", "flotilla-ring"))
            print("| %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |" % (
                size_text(b), benchlib.fmt_spread(bare, 3), benchlib.fmt_spread(auto, 3), benchlib.fmt_spread(nat, 3),
                benchlib.fmt_spread(ring, 3), med(auto) / med(bare), med(nat) / med(bare), med(ring) / med(bare)))
    print("\njobs repeated because others used the machine: %d" % sum(x["retries"] for x in log))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(), "rows": rows, "log": log,
                                   "commands": {k: v() for k, v in jobs.items()}})


if __name__ == "__main__":
    main()
