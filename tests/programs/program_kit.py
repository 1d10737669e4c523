# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""What the tests of the shipped programs share: a made-up data set in Fashion-MNIST's files, and
the environment a program is started in, free of any job's settings."""
import gzip
import os
import random
import struct
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
    """This process's environment less the variables of a flotilla, Open MPI or PMI job."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("FLOTILLA_", "OMPI_", "PMI_"))}
