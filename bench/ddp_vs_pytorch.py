#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Synchronous data-parallel training of the MLP, 2 processes x 1 thread, batch 64 per process:
flotilla over its TCP transport against PyTorch DistributedDataParallel with gloo, and each against
its own single process, in one invocation.

    /usr/bin/python3 bench/ddp_vs_pytorch.py --launch build/tools/flotilla-launch \
        --flotilla build/bench/flotilla_tcp_train_bench [--rounds 4] [--steps 1000] [--json out.json]

* flotilla: `flotilla-launch -n 2 -- flotilla_tcp_train_bench`: Trainer<Mlp, policy::Synchronous<>,
  transport::Tcp>, TrainerOptions::threads = 1, batch 64 per worker (global 128), gradients summed
  during backward in buckets, through the shared-memory allreduce that the transport takes for
  ranks on one host (TcpOptions::shared_memory); `-n 1` for the single process.
  `flotilla-sockets-2`: the same with FLOTILLA_SHARED_MEMORY=off, the buckets summed by ring
  allreduce over loopback TCP.
* `flotilla-1x2`: two single-process jobs at once, side by side, sharing nothing; throughput is
  both jobs' samples over the slower one's time. It is what two ranks could reach if communicating
  cost nothing: where the machine's two CPUs slow each other down (shared caches, memory bandwidth,
  a hypervisor's SMT siblings), a 2-process job's scaling is bounded by this job's, not by 100%.
* PyTorch: this file with --ddp-rank: torch.set_num_threads(1), nn.Sequential MLP wrapped in
  DistributedDataParallel, gloo process group initialised through a TCP store on 127.0.0.1,
  torch.optim.SGD(lr 0.05, momentum 0.9); every rank draws the same permutation and takes its 64 of
  each global batch of 128 from the preloaded tensor. World size 1 for the single process (DDP
  with one rank, as PyTorch users would run it; also without DDP, plain, for reference).

Each job warms up (--warmup steps), then times --repeat runs of --steps steps; a run's throughput is
(samples of all ranks) / (the slowest rank's seconds). Jobs are run in rounds, the order rotating,
with the quiet-machine wait and the disturbance check of the other drivers. With
flotilla_core_latency_bench built (bench/machine), each job is also tagged with the machine's
phase (a cache-line round trip between CPUs 0 and 1 before and after it: "near" below 150 ns),
and the table gives the medians of each phase as well.
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from train_vs_pytorch import torch_model  # noqa: E402

BATCH = 64


def ddp_rank(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(1)
    benchlib.require_openblas()
    world, rank = args.world, args.ddp_rank
    torch.manual_seed(1)
    images, labels = benchlib.fashion_mnist("train")
    g = BATCH * world
    n = len(images) // g * g
    x_all = torch.from_numpy(np.ascontiguousarray(images[:n]))
    y_all = torch.from_numpy(labels[:n])
    model = torch_model("mlp")
    if args.plain:
        net = model
    else:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    state = {"perm": torch.randperm(n, generator=gen), "pos": 0}

    def step():
        if state["pos"] + g > n:
            state["perm"] = torch.randperm(n, generator=gen)
            state["pos"] = 0
        idx = state["perm"][state["pos"] + rank * BATCH:state["pos"] + (rank + 1) * BATCH]
        state["pos"] += g
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        out = net(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.item(), (out.argmax(1) == y).sum().item()

    for _ in range(args.warmup):
        step()
    for r in range(args.repeat):
        if not args.plain:
            dist.barrier()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(args.steps):
            step()
        t1, c1 = time.perf_counter(), time.process_time()
        print(json.dumps({"rank": rank, "world": world, "run": r, "steps": args.steps, "samples": args.steps * BATCH,
                          "seconds": t1 - t0, "cpu_seconds": c1 - c0}), flush=True)
    if not args.plain:
        dist.destroy_process_group()


def ddp_job(args):
    port = free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    argv = lambda r: [sys.executable, os.path.abspath(__file__), "--ddp-rank", str(r), "--world", str(args.world),
                      "--port", str(port), "--steps", str(args.steps), "--warmup", str(args.warmup),
                      "--repeat", str(args.repeat)] + (["--plain"] if args.plain else [])
    procs = [subprocess.Popen(argv(r), stdout=subprocess.PIPE, text=True, env=env) for r in range(args.world)]
    outs = [p.communicate()[0] for p in procs]
    sys.stdout.write("".join(outs))
    if any(p.returncode for p in procs):
        sys.exit(1)


def side_by_side(argv):
    """A command that runs `argv` twice at once and fails if either fails. Both print their runs as
    rank 0; run_job pairs the two runs of each index, so a run's throughput is both jobs' samples
    over the slower one's seconds."""
    one = " ".join(shlex.quote(a) for a in argv)
    return ["/bin/sh", "-c", "%s & a=$!; %s & b=$!; wait $a; x=$?; wait $b; y=$?; [ $x -eq 0 ] && [ $y -eq 0 ]" % (one, one)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(name, argv, args):
    rows, foreign, attempt = benchlib.run_json_job(name, argv, args)
    # One throughput per timed run: all ranks' samples over the slowest rank's time.
    runs = []
    for r in sorted({x["run"] for x in rows}):
        part = [x for x in rows if x["run"] == r]
        runs.append({"samples_per_second": sum(x["samples"] for x in part) / max(x["seconds"] for x in part),
                     "ranks": part, "phase": part[0].get("phase")})
    return runs, foreign, attempt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launch", help="flotilla-launch")
    ap.add_argument("--flotilla", help="flotilla_tcp_train_bench")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per job")
    ap.add_argument("--jobs", default="flotilla-2,flotilla-sockets-2,ddp-2,flotilla-1,flotilla-1x2,ddp-1,torch-1")
    ap.add_argument("--quiet", type=float, default=0.10)
    ap.add_argument("--disturbance", type=float, default=0.05)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--core-latency", help="flotilla_core_latency_bench, to tag each run with the machine's phase "
                    "(default: next to --flotilla, if built)")
    ap.add_argument("--ddp", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ddp-rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ddp_rank >= 0:
        return ddp_rank(args)
    if args.ddp:
        return ddp_job(args)
    if not (args.launch and args.flotilla):
        ap.error("--launch and --flotilla are required")
    if not args.core_latency:
        args.core_latency = benchlib.default_probe(args.flotilla)

    timing = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--repeat", str(args.repeat)]
    me = [sys.executable, os.path.abspath(__file__), "--ddp"] + timing
    all_jobs = {
        "flotilla-2": [args.launch, "-n", "2", "--", args.flotilla, "--threads", "1"] + timing,
        "flotilla-sockets-2": [args.launch, "-n", "2", "--env", "FLOTILLA_SHARED_MEMORY=off", "--", args.flotilla,
                               "--threads", "1"] + timing,
        "ddp-2": me + ["--world", "2"],
        "flotilla-1": [args.launch, "-n", "1", "--", args.flotilla, "--threads", "1"] + timing,
        "flotilla-1x2": side_by_side([args.launch, "-n", "1", "--", args.flotilla, "--threads", "1"] + timing),
        "ddp-1": me + ["--world", "1"],
        "torch-1": me + ["--world", "1", "--plain"],
    }
    jobs = {k: all_jobs[k] for k in args.jobs.split(",")}
    names = list(jobs)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results = {k: [] for k in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            runs, foreign, retries = run_job(name, jobs[name], args)
            results[name].extend(runs)
            print("  round %d %s: %s samples/s (others %.1f%%, phase %s)" % (
                r + 1, name, ", ".join("%.0f" % x["samples_per_second"] for x in runs), 100 * foreign,
                runs[0].get("phase") if runs else None), file=sys.stderr)

    sps = {k: [x["samples_per_second"] for x in v] for k, v in results.items()}
    med = {k: benchlib.median(v) for k, v in sps.items()}
    print("\nSynchronous data-parallel MLP, batch 64 per process, 1 thread per process, SGD momentum 0.9; samples/s of "
          "the job: median (min-max) of %d runs (%d rounds x %d); %s" % (args.rounds * args.repeat, args.rounds,
                                                                         args.repeat, started))
    labels = {"flotilla-2": "flotilla, TCP transport (shared-memory allreduce), 2 processes",
              "flotilla-sockets-2": "flotilla, TCP transport, sums over the sockets, 2 processes",
              "ddp-2": "PyTorch DDP gloo, 2 processes",
              "flotilla-1": "flotilla, 1 process",
              "flotilla-1x2": "flotilla, two 1-process jobs side by side (no communication)",
              "ddp-1": "PyTorch DDP gloo, 1 process",
              "torch-1": "PyTorch without DDP, 1 process"}
    # By the machine's phase (docs/benchmarks.md, "The machine's two phases"): near = the two CPUs
    # share a cache. A job of one process runs alike in both.
    by_phase = lambda k, ph: [x["samples_per_second"] for x in results[k] if x.get("phase") == ph]
    phased = any(x.get("phase") for v in results.values() for x in v)
    if phased:
        print("| job | samples/s | near phase | far phase |")
        print("|---|---|---|---|")
    else:
        print("| job | samples/s |")
        print("|---|---|")
    for k in names:
        cells = [benchlib.fmt_spread(sps[k])]
        if phased:
            cells += ["%s, %d runs" % (benchlib.fmt_spread(by_phase(k, ph)), len(by_phase(k, ph))) if by_phase(k, ph)
                      else "-" for ph in ("near", "far")]
        print("| %s | %s |" % (labels[k], " | ".join(cells)))
    if "flotilla-2" in med and "ddp-2" in med:
        print("\nflotilla 2 processes / PyTorch DDP 2 processes: %.2fx" % (med["flotilla-2"] / med["ddp-2"]))
    if "flotilla-sockets-2" in med and "ddp-2" in med:
        print("flotilla 2 processes over the sockets / PyTorch DDP 2 processes: %.2fx" % (
            med["flotilla-sockets-2"] / med["ddp-2"]))
    for two in ("flotilla-2", "flotilla-sockets-2"):
        if two in med and "flotilla-1" in med:
            print("flotilla scaling efficiency, %s / (2 x 1 process): %.0f%%" % (
                labels[two], 100 * med[two] / (2 * med["flotilla-1"])))
            for ph in ("near", "far"):
                if by_phase(two, ph):
                    print("  in the %s phase (%d runs): %.0f%%" % (
                        ph, len(by_phase(two, ph)), 100 * benchlib.median(by_phase(two, ph)) / (2 * med["flotilla-1"])))
    if "flotilla-1x2" in med and "flotilla-1" in med:
        print("the machine's own scaling, two 1-process jobs side by side / (2 x 1 process): %.0f%%" % (
            100 * med["flotilla-1x2"] / (2 * med["flotilla-1"])))
        for two in ("flotilla-2", "flotilla-sockets-2"):
            if two in med:
                print("  %s / two 1-process jobs side by side: %.0f%%" % (labels[two], 100 * med[two] / med["flotilla-1x2"]))
    for one in ("ddp-1", "torch-1"):
        if "ddp-2" in med and one in med:
            print("PyTorch DDP scaling efficiency over %s: %.0f%%" % (labels[one], 100 * med["ddp-2"] / (2 * med[one])))
    for two in ("flotilla-2", "flotilla-sockets-2"):
        f2 = [x["ranks"] for x in results.get(two, [])]
        if f2:
            keys = ("compute_ms_per_step", "exposed_comm_ms_per_step", "update_ms_per_step")
            vals = {k: benchlib.median([rk[k] for run in f2 for rk in run if k in rk]) for k in keys}
            print("%s, per step (median over ranks and runs): compute %.3f ms, exposed communication "
                  "%.3f ms, update %.3f ms" % ((labels[two],) + tuple(vals[k] for k in keys)))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(), "commands": jobs,
                                   "results": results})


if __name__ == "__main__":
    main()
