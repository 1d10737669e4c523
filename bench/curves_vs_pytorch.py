#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Learning curves of the MLP, flotilla against PyTorch, with identical settings.

    /usr/bin/python3 bench/curves_vs_pytorch.py --flotilla build/bench/flotilla_train_bench \
        [--model mlp] [--epochs 5] [--seeds 1,2,3] [--threads 1] [--json out.json]

Both sides: the whole Fashion-MNIST training set (60000 images / 255) in a new random order every
epoch, batch 64 (the last batch of an epoch has the 32 left over), softmax cross-entropy averaged
over the batch, SGD lr 0.05 with momentum 0.9, weights drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in))
(PyTorch's default for Linear, flotilla's init::LeCunUniform), biases 0 (flotilla's only choice; the
PyTorch biases are zeroed after the default initialisation), test loss and accuracy over the
10000 test images after every epoch. flotilla: `flotilla_train_bench --mode curve`; PyTorch: this
file with --worker. Seeds fix each side's initial weights and data order (the two sides draw them
with different generators, so a seed is not the same run on both sides: compare the means and
spreads over seeds).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from train_vs_pytorch import torch_model  # noqa: E402


def worker(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    benchlib.require_openblas()
    torch.manual_seed(args.seed)
    xtr, ytr = benchlib.fashion_mnist("train")
    xte, yte = benchlib.fashion_mnist("test")
    shape = (-1, 1, 28, 28) if args.model == "cnn" else (-1, 784)
    xtr = torch.from_numpy(np.ascontiguousarray(xtr)).reshape(shape)
    xte = torch.from_numpy(np.ascontiguousarray(xte)).reshape(shape)
    ytr, yte = torch.from_numpy(ytr), torch.from_numpy(yte)
    model = torch_model(args.model)
    if not args.keep_bias:
        with torch.no_grad():
            for m in model.modules():
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gen = torch.Generator().manual_seed(args.seed)
    n = len(xtr)
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen)
        loss_sum = correct = 0.0
        model.train()
        for b in range(0, n, args.batch):
            idx = perm[b:b + args.batch]
            x, y = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            correct += (out.argmax(1) == y).sum().item()
        seconds = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            out = torch.cat([model(xte[i:i + 1000]) for i in range(0, len(xte), 1000)])
            test_loss = F.cross_entropy(out, yte, reduction="sum").item() / len(xte)
            test_acc = (out.argmax(1) == yte).float().mean().item()
        print(json.dumps({"epoch": epoch, "train_loss": loss_sum / n, "train_accuracy": correct / n,
                          "test_loss": test_loss, "test_accuracy": test_acc, "seconds": seconds}), flush=True)


def run_lines(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv), out.stderr))
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def mean_pm(xs, scale=1.0, digits=2):
    xs = [scale * x for x in xs]
    m = sum(xs) / len(xs)
    return "%.*f ± %.*f" % (digits, m, digits, (max(xs) - min(xs)) / 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flotilla", help="path of flotilla_train_bench")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--keep-bias", action="store_true", help="keep PyTorch's default bias initialisation")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if not args.flotilla or not os.access(args.flotilla, os.X_OK):
        ap.error("--flotilla must name the flotilla_train_bench program")

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    runs = {"flotilla": {}, "pytorch": {}}
    common = ["--model", args.model, "--epochs", str(args.epochs), "--threads", str(args.threads),
              "--batch", str(args.batch), "--lr", str(args.lr), "--momentum", str(args.momentum)]
    for seed in [int(s) for s in args.seeds.split(",")]:
        runs["flotilla"][seed] = run_lines([args.flotilla, "--mode", "curve", "--seed", str(seed)] + common)
        worker_argv = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(seed)] + common
        if args.keep_bias:
            worker_argv.append("--keep-bias")
        runs["pytorch"][seed] = run_lines(worker_argv)
        print("  seed %d: flotilla %.2f%%, pytorch %.2f%% test accuracy after %d epochs" % (
            seed, 100 * runs["flotilla"][seed][-1]["test_accuracy"], 100 * runs["pytorch"][seed][-1]["test_accuracy"],
            args.epochs), file=sys.stderr)

    seeds = sorted(runs["flotilla"])
    print("\n%s, SGD lr %g momentum %g, batch %d, %d epochs, seeds %s: mean ± half-range over seeds; %s" % (
        args.model.upper(), args.lr, args.momentum, args.batch, args.epochs, ",".join(map(str, seeds)), started))
    print("| epoch | flotilla test acc. % | PyTorch test acc. % | flotilla test loss | PyTorch test loss "
          "| flotilla train loss | PyTorch train loss |")
    print("|---|---|---|---|---|---|---|")
    for e in range(args.epochs):
        col = lambda side, key, scale=1.0, digits=4: mean_pm([runs[side][s][e][key] for s in seeds], scale, digits)
        print("| %d | %s | %s | %s | %s | %s | %s |" % (
            e + 1, col("flotilla", "test_accuracy", 100, 2), col("pytorch", "test_accuracy", 100, 2),
            col("flotilla", "test_loss"), col("pytorch", "test_loss"),
            col("flotilla", "train_loss"), col("pytorch", "train_loss")))
    benchlib.emit_json(args.json, {"started": started, "settings": vars(args), "runs": runs})


if __name__ == "__main__":
    main()
