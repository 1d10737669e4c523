#!/usr/bin/env python3
"""The shipped example programs, run as a user runs them, on inputs a user can get wrong.

    test_program_inputs.py PROGRAM [PROGRAM ...]

Each PROGRAM is the path of a built Fashion-MNIST example (fashion_mnist_distributed,
fashion_mnist_tcp, fashion_mnist_mlp, ...). Every program must refuse a zero batch, a negative
learning rate and one that is not a number with exit status 1 and a message naming the flag (not
a signal, not a run that trains to nothing). A program whose name ends in _tcp is also run by hand,
without the launcher, on a small made-up data set: it must print its final report.
"""
import gzip
import os
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path


def write_fashion_mnist(directory: Path, train: int, test: int) -> None:
    """A data set in Fashion-MNIST's file format: random 28x28 images and labels."""
    rng = random.Random(7)
    for prefix, n in (("train", train), ("t10k", test)):
        images = struct.pack(">IIII", 0x803, n, 28, 28) + bytes(rng.randrange(256) for _ in range(n * 784))
        labels = struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n))
        (directory / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(images))
        (directory / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))


def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOTILLA_", "OMPI_", "PMI_"))}
    return env


failures = []


def expect(condition: bool, what: str, result: subprocess.CompletedProcess) -> None:
    if not condition:
        failures.append(f"{what}\n  exit status {result.returncode}\n  stdout: {result.stdout[-800:]}\n"
                        f"  stderr: {result.stderr[-800:]}")


def main() -> int:
    programs = [Path(p) for p in sys.argv[1:]]
    if not programs:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        write_fashion_mnist(data, 96, 32)
        common = ["--data", str(data), "--epochs", "1"]
        for program in programs:
            name = program.name
            extra = ["--baseline-steps", "0"] if "distributed" in name or name.endswith("_tcp") else []
            cases = [
                (["--batch", "0"], "--batch: '0' must be at least 1"),
                (["--lr", "-1"], "--lr: '-1' must be above 0"),
                (["--lr", "nan"], "--lr: 'nan' is not a finite number"),
                (["--lr", "inf"], "--lr: 'inf' is not a finite number"),
            ]
            for flags, message in cases:
                r = subprocess.run([str(program), *common, *extra, *flags], cwd=work, env=environment(),
                                   capture_output=True, text=True, timeout=300)
                expect(r.returncode == 1 and message in r.stderr,
                       f"{name} {' '.join(flags)}: expected exit status 1 and '{message}'", r)
            if name.endswith("_tcp"):
                # Started by hand: a job of one, whose one rank reports.
                r = subprocess.run([str(program), *common, *extra, "--batch", "16"], cwd=work, env=environment(),
                                   capture_output=True, text=True, timeout=300)
                expect(r.returncode == 0 and "test accuracy" in r.stdout,
                       f"{name} run by hand: expected the final report (test accuracy) on standard output", r)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    print(f"{len(failures)} failures over {len(programs)} programs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
