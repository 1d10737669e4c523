#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Files written by NumPy itself, read by flotilla: writes .npy files of every dtype flotilla reads
(both byte orders, C and Fortran order, format versions 1.0 to 3.0), .npz archives by np.savez and
np.savez_compressed, and a CSV file by np.savetxt, into a temporary directory, then runs the unit
test case that reads them (tests/unit/test_data_files.cpp, "numpy: files written by ...").

    numpy_files.py <flotilla_unit_tests>

Exits 77 (ctest's SKIP_RETURN_CODE) where this Python has no numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed for " + sys.executable + ": skipped")
    sys.exit(77)

CASE = "numpy: files written by np.save, np.savez, np.savez_compressed and np.savetxt"
# doctest splits a filter at commas, so the case is named by its first words.
FILTER = "numpy: files written by np.save*"

# The element types and, as in value_of() in test_data_files.cpp, the value at C index i.
DTYPES = {
    "f2": "f", "f4": "f", "f8": "f", "i1": "i", "u1": "u", "i2": "i", "u2": "u",
    "i4": "i", "u4": "u", "i8": "i", "u8": "u", "b1": "b",
}


def values(kind, n):
    i = np.arange(n)
    if kind == "f":
        return (i % 23) * 0.25 - 2
    if kind == "i":
        return (i % 23) - 11
    if kind == "u":
        return i * 11 % 251
    return i % 3 == 0


def write(directory):
    for code, kind in DTYPES.items():
        orders = ["<", ">"] if code[1] != "1" else ["|"]
        for endian in orders:
            dtype = np.dtype(endian + code) if code != "b1" else np.dtype(bool)
            array = values(kind, 24).astype(dtype).reshape(4, 3, 2)
            for order in ("C", "F"):
                stored = np.asfortranarray(array) if order == "F" else np.ascontiguousarray(array)
                name = "%s_%s_%s.npy" % (code, order, "be" if endian == ">" else "le")
                np.save(os.path.join(directory, name), stored)
    for version in (1, 2, 3):
        with open(os.path.join(directory, "version%d.npy" % version), "wb") as f:
            np.lib.format.write_array(f, np.arange(6, dtype=np.float32).reshape(2, 3), version=(version, 0))
    np.save(os.path.join(directory, "scalar.npy"), np.float64(3.5))

    rng = np.random.default_rng(7)
    x = rng.standard_normal((500, 20)).astype(np.float32)
    y = rng.integers(0, 10, 500).astype(np.int64)
    x.astype("<f4").tofile(os.path.join(directory, "random_f4.bin"))
    y.astype("<i8").tofile(os.path.join(directory, "labels_i8.bin"))
    np.save(os.path.join(directory, "random.npy"), x)
    extra = np.zeros(3)
    np.savez(os.path.join(directory, "savez.npz"), extra, x=x, y=y)
    np.savez_compressed(os.path.join(directory, "savez_compressed.npz"), extra, x=x, y=y)

    table = rng.standard_normal((50, 3)) * 1000
    labels = rng.integers(0, 3, 50)
    labels[0] = 2  # so that the largest label, and so the number of classes, is known
    table.astype("<f8").tofile(os.path.join(directory, "table_f8.bin"))
    np.savetxt(os.path.join(directory, "savetxt.csv"), np.column_stack([table, labels]), delimiter=",",
               header="a,b,c,label", comments="", fmt=["%.18e"] * 3 + ["%d"])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="flotilla-numpy-") as directory:
        write(directory)
        env = dict(os.environ, FLOTILLA_NUMPY_FILES=directory)
        run = subprocess.run([sys.argv[1], "--no-skip", "--test-case=" + FILTER], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(run.stdout)
        if run.returncode != 0:
            sys.exit(run.returncode)
        # A renamed case would match nothing and pass: it must have run, once.
        if "test cases: 1 | 1 passed" not in " ".join(run.stdout.split()):
            sys.exit("the test case '%s' did not run" % CASE)


if __name__ == "__main__":
    main()
