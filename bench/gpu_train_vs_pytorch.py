#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""GPU training throughput, flotilla (Model<..., device::Cuda>) against PyTorch on the same GPU.

    python3 bench/gpu_train_vs_pytorch.py --flotilla build/bench/flotilla_gpu_train_bench \
        [--models mlp,cnn,resnet] [--batches 64,256] [--runs 5] [--json out.json]

Both sides train the same model (MLP 784-256-128-10, the CNN conv5x5x32-pool-conv5x5x64-pool-
dense10 of docs/benchmarks.md, or the ResNet of examples/fashion_mnist_resnet.hpp, built for PyTorch
by bench/train_vs_pytorch.py, with BatchNorm in training mode on both sides) with SGD and momentum 0.9 and softmax cross-entropy, on synthetic
28x28 inputs with 10 classes (values do not change the work), for the same number of steps after a
warm-up. Batches start on the host on both sides: flotilla's Trainer uploads each batch through
page-locked memory; the PyTorch side indexes a pinned host tensor and copies with non_blocking=True.
Each timed run ends when the GPU has finished (flotilla: the parameters copied back; PyTorch:
torch.cuda.synchronize()). Runs alternate which side goes first; the driver prints medians, the
spread and the ratio flotilla / PyTorch of the medians.

PyTorch runs two ways, and flotilla is compared with the faster:
  - "step": the loss and the correct count read on the host every step, in one synchronization,
    as flotilla's Trainer does (it reports both per step);
  - "epoch": both summed on the GPU and read once at the end, so PyTorch never waits for the GPU
    inside the loop: what a loop written for speed does.
Both use PyTorch's defaults otherwise (eager mode; cuDNN may use TF32 for the convolutions, where
flotilla computes in full fp32), with torch.backends.cudnn.benchmark on.

With --torch-compile, a third PyTorch side runs the "epoch" loop with the network compiled by
torch.compile(mode="reduce-overhead"): Inductor's fused kernels replayed as CUDA Graphs (the
optimizer step stays eager). It is reported beside the others, not in the eager ratio. Each of its
runs compiles anew in its warm-up, which takes tens of seconds.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

STEPS = {"mlp": 2000, "cnn": 300, "resnet": 200}
WARMUP = {"mlp": 200, "cnn": 30, "resnet": 20}


def torch_run(model, batch, steps, warmup, metrics):
    import torch
    import torch.nn as nn
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    if model == "mlp":
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    elif model == "resnet":
        import os
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from train_vs_pytorch import resnet
        net = resnet()
    else:
        net = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1024, 10))
    net = net.to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    if metrics == "compiled":
        net = torch.compile(net, mode="reduce-overhead")
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(7)
    n = batch * 64
    x = torch.rand(n, 1, 28, 28, generator=g).pin_memory()
    y = torch.randint(0, 10, (n,), generator=g).pin_memory()

    def step(i):
        k = (i % 64) * batch
        xb = x[k:k + batch].to(dev, non_blocking=True)
        yb = y[k:k + batch].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        out = net(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        opt.step()
        return loss, out, yb

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if metrics == "step":
        for i in range(steps):
            loss, out, yb = step(i)
            # One synchronization for both figures, as flotilla's Trainer makes one per step.
            _ = torch.stack([loss.detach(), (out.argmax(1) == yb).sum().float()]).tolist()
    else:
        total = torch.zeros(2, device=dev)
        for i in range(steps):
            loss, out, yb = step(i)
            total += torch.stack([loss.detach(), (out.argmax(1) == yb).sum().float()])
        _ = total.tolist()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def flotilla_run(binary, model, batch, steps, warmup):
    out = subprocess.run([binary, "--model", model, "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flotilla", required=True, help="path to flotilla_gpu_train_bench")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--torch-compile", action="store_true", help="also PyTorch with torch.compile (reduce-overhead)")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 77
    gpu = torch.cuda.get_device_name(0)
    results = []
    for model in a.models.split(","):
        for batch in [int(b) for b in a.batches.split(",")]:
            steps, warmup = STEPS[model], WARMUP[model]
            sides = ["flotilla", "step", "epoch"] + (["compiled"] if a.torch_compile else [])
            runs = {k: [] for k in sides}
            for r in range(a.runs):
                order = sides[r % len(sides):] + sides[:r % len(sides)]  # each side goes first in turn
                for side in order:
                    if side == "flotilla":
                        runs[side].append(flotilla_run(a.flotilla, model, batch, steps, warmup)["samples_per_s"])
                    else:
                        runs[side].append(batch * steps / torch_run(model, batch, steps, warmup, side))
            med = {k: statistics.median(v) for k, v in runs.items()}
            best = max(("step", "epoch"), key=lambda k: med[k])
            row = {"model": model, "batch": batch, "gpu": gpu, "flotilla_samples_per_s": med["flotilla"],
                   "torch_step_samples_per_s": med["step"], "torch_epoch_samples_per_s": med["epoch"],
                   "torch_best": best, "torch_samples_per_s": med[best], "runs": runs,
                   "torch_version": torch.__version__}
            row["ratio"] = med["flotilla"] / med[best]
            spread = {k: f"{min(v):.0f}-{max(v):.0f}" for k, v in runs.items()}
            compiled = ""
            if a.torch_compile:
                row["torch_compiled_samples_per_s"] = med["compiled"]
                row["ratio_to_compiled"] = med["flotilla"] / med["compiled"]
                compiled = (f"; torch.compile {med['compiled']:.0f} ({spread['compiled']}), "
                            f"flotilla / torch.compile {row['ratio_to_compiled']:.2f}")
            results.append(row)
            print(f"{model} batch {batch}: flotilla {med['flotilla']:.0f} samples/s ({spread['flotilla']}), "
                  f"PyTorch metrics per step {med['step']:.0f} ({spread['step']}), "
                  f"per epoch {med['epoch']:.0f} ({spread['epoch']}); "
                  f"flotilla / best PyTorch {row['ratio']:.2f}{compiled}  [{gpu}]", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
