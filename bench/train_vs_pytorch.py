#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Training throughput, flotilla against PyTorch, on this machine, in one invocation.

    /usr/bin/python3 bench/train_vs_pytorch.py --flotilla build/bench/flotilla_train_bench \
        [--models mlp,cnn,resnet] [--threads 1,2] [--runs 7] [--json out.json]

Both sides train the same model (the MLP 784-256-128-10, the CNN or the residual network of docs/benchmarks.md) on the same
Fashion-MNIST samples held in memory (the first 937 x 64 training images), batch 64, SGD with
momentum 0.9, softmax cross-entropy, with the same number of threads:

* flotilla: `flotilla_train_bench --mode serve`: Trainer::fit with FitOptions::max_steps,
  TrainerOptions::threads = n, log = nullptr, no validation set, prefetch 0 (no loader thread);
* PyTorch: this file with --worker: torch.set_num_threads(n) (and OMP_NUM_THREADS=n), the model as
  nn.Sequential, torch.optim.SGD(momentum=0.9), each step indexing the preloaded tensor with the
  next 64 entries of a shuffled permutation; it sums the loss and counts correct predictions every
  step, as Trainer::fit does.

Both processes load the data once and stay up; the driver asks each in turn for a timed run of a
fixed number of steps, alternating which goes first, after warm-up runs. Before each run it waits
for the machine to be quiet, and it discards (and repeats) a run during which other processes used
more than --disturbance of the machine. It prints medians, the spread (min-max) and the ratio
flotilla / PyTorch: of the medians, and the median of the per-pair ratios.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

BATCH = 64
DEFAULT_STEPS = {"mlp": 1500, "cnn": 150, "resnet": 60}
DEFAULT_WARMUP = {"mlp": 300, "cnn": 30, "resnet": 10}


# ---- the PyTorch side ---------------------------------------------------------------------------------

def torch_model(name):
    import torch.nn as nn
    if name == "mlp":
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    elif name == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(1024, 10))
    elif name == "resnet":
        net = resnet()
    else:
        raise SystemExit("unknown model " + name)
    return net


def resnet():
    """examples/fashion_mnist_resnet.hpp: He et al.'s CIFAR ResNet shape with two basic blocks a stage."""
    import torch.nn as nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU(),
                                      nn.Conv2d(cout, cout, 3, 1, 1), nn.BatchNorm2d(cout))
            # flotilla's Project: a 1 x 1 convolution with a bias, as every flotilla convolution has.
            self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Conv2d(cin, cout, 1, stride)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + self.shortcut(x))

    def stage(cin, cout, stride, blocks):
        return [Basic(cin, cout, stride)] + [Basic(cout, cout, 1) for _ in range(blocks - 1)]

    return nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(),
                         *stage(16, 16, 1, 2), *stage(16, 32, 2, 2), *stage(32, 64, 2, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def worker(args):
    """Speaks the same line protocol as flotilla_train_bench --mode serve."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    blas = benchlib.require_openblas()
    torch.manual_seed(args.seed)
    images, labels = benchlib.fashion_mnist("train")
    n = len(images) // BATCH * BATCH
    x_all = torch.from_numpy(np.ascontiguousarray(images[:n]))
    if args.model in ("cnn", "resnet"):
        x_all = x_all.reshape(n, 1, 28, 28)
    y_all = torch.from_numpy(labels[:n])
    model = torch_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(args.seed)
    state = {"perm": torch.randperm(n, generator=gen), "pos": 0}

    def step():
        if state["pos"] + BATCH > n:
            state["perm"] = torch.randperm(n, generator=gen)
            state["pos"] = 0
        idx = state["perm"][state["pos"]:state["pos"] + BATCH]
        state["pos"] += BATCH
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.item() * BATCH, (out.argmax(1) == y).sum().item()

    print(json.dumps({"ready": True, "blas": blas, "torch": torch.__version__, "threads": torch.get_num_threads()}),
          flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        steps = int(words[1])
        loss_sum = correct = 0
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(steps):
            l, c = step()
            loss_sum += l
            correct += c
        t1, c1 = time.perf_counter(), time.process_time()
        print(json.dumps({"steps": steps, "samples": steps * BATCH, "seconds": t1 - t0, "cpu_seconds": c1 - c0,
                          "samples_per_second": steps * BATCH / (t1 - t0), "loss": loss_sum / (steps * BATCH)}),
              flush=True)


# ---- the driver -----------------------------------------------------------------------------------------

class Server:
    """A benchmark process answering `run N` with one JSON line."""

    def __init__(self, name, argv, env=None):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        first = self.proc.stdout.readline()
        if not first:
            raise SystemExit("%s did not start: %s" % (name, " ".join(argv)))
        self.hello = first.strip()

    def run(self, steps):
        self.proc.stdin.write("run %d\n" % steps)
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("%s died" % self.name)
        return json.loads(line)

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)


def measured(server, steps, args):
    """One undisturbed timed run (retried while others used the machine)."""
    for attempt in range(args.retries + 1):
        benchlib.wait_quiet(args.quiet)
        with benchlib.Disturbance(lambda: benchlib.process_tree(server.proc.pid)) as d:
            r = server.run(steps)
        r["foreign"] = d.foreign
        r["attempts"] = attempt + 1
        if d.foreign <= args.disturbance:
            return r
        print("  %s: run disturbed (others used %.0f%% of the machine), again" % (server.name, 100 * d.foreign),
              file=sys.stderr)
    r["disturbed"] = True
    return r


def compare(model, threads, args):
    steps = args.steps or DEFAULT_STEPS[model]
    warmup = args.warmup or DEFAULT_WARMUP[model]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    flo = Server("flotilla", [args.flotilla, "--mode", "serve", "--model", model, "--threads", str(threads),
                              "--batch", str(BATCH), "--prefetch", "0"], env=env)
    pt = Server("pytorch", [sys.executable, os.path.abspath(__file__), "--worker", "--model", model,
                            "--threads", str(threads)], env=env)
    info = json.loads(pt.hello)
    try:
        for s in (flo, pt):
            s.run(warmup)
        rows = {"flotilla": [], "pytorch": []}
        for i in range(args.runs):
            order = (flo, pt) if i % 2 == 0 else (pt, flo)
            for s in order:
                r = measured(s, steps, args)
                rows[s.name].append(r)
            print("  %s %d thread(s) run %d: flotilla %.0f, pytorch %.0f samples/s" % (
                model, threads, i + 1, rows["flotilla"][-1]["samples_per_second"],
                rows["pytorch"][-1]["samples_per_second"]), file=sys.stderr)
    finally:
        flo.close()
        pt.close()
    f = [r["samples_per_second"] for r in rows["flotilla"]]
    p = [r["samples_per_second"] for r in rows["pytorch"]]
    pair = [a / b for a, b in zip(f, p)]
    return {"model": model, "threads": threads, "steps": steps, "warmup": warmup, "runs": rows,
            "flotilla": f, "pytorch": p, "ratio_of_medians": benchlib.median(f) / benchlib.median(p),
            "pair_ratios": pair, "torch": info.get("torch"), "blas": info.get("blas")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flotilla", help="path of flotilla_train_bench")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=7, help="timed runs of each side per configuration")
    ap.add_argument("--steps", type=int, default=0, help="steps per timed run (default: mlp 1500, cnn 150, resnet 60)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed steps first (default: mlp 300, cnn 30, resnet 10)")
    ap.add_argument("--quiet", type=float, default=0.10, help="wait before each run until the machine is less busy")
    ap.add_argument("--disturbance", type=float, default=0.05,
                    help="repeat a run during which others used more than this fraction of the machine")
    ap.add_argument("--retries", type=int, default=10)
    ap.add_argument("--json", help="write every run here")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="mlp", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.worker:
        args.threads = int(args.threads)
        return worker(args)
    if rest:
        ap.error("unexpected arguments: %s" % rest)
    if not args.flotilla or not os.access(args.flotilla, os.X_OK):
        ap.error("--flotilla must name the flotilla_train_bench program (build it first)")

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results = []
    for model in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            results.append(compare(model, threads, args))

    print("\nTraining throughput, batch %d, samples/s: median (min-max) of %d runs each, alternated; %s" % (
        BATCH, args.runs, started))
    print("PyTorch %s with %s" % (results[0]["torch"], results[0]["blas"]))
    print("| model | threads | flotilla | PyTorch | flotilla / PyTorch (medians) | per-pair ratio: median (min-max) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print("| %s | %d | %s | %s | %.2fx | %s |" % (r["model"].upper(), r["threads"], benchlib.fmt_spread(r["flotilla"]),
                                                      benchlib.fmt_spread(r["pytorch"]), r["ratio_of_medians"],
                                                      benchlib.fmt_spread(r["pair_ratios"], 2)))
    disturbed = sum(1 for r in results for side in r["runs"].values() for x in side if x.get("disturbed"))
    retried = sum(x["attempts"] - 1 for r in results for side in r["runs"].values() for x in side)
    print("\n%d run(s) repeated because other processes used the machine; %d still disturbed after %d retries" % (
        retried, disturbed, args.retries))
    benchlib.emit_json(args.json, {"started": started, "machine": benchlib.machine_summary(), "results": results})


if __name__ == "__main__":
    main()
