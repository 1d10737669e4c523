#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""A training example on a real full disk: a tmpfs too small for --checkpoint-keep sets.

    test_checkpoint_full_disk.py DISTRIBUTED PIPELINE

DISTRIBUTED and PIPELINE are the built fashion_mnist_distributed and fashion_mnist_pipeline. The test mounts small tmpfs file systems in a mount
namespace of its own (unshare -m), so it needs root (or CAP_SYS_ADMIN); where it cannot mount, it
says why and exits with status 77, which CTest reports as skipped.

With room for two sets and --checkpoint-keep 3, each save past the second must remove the oldest
set first, and the run ends with status 0 and the newest two sets. With room for one set, the
first set stays, every later save fails, training still ends with its report, and the program
then names the sets it could not save and exits with status 1; the set it saved still resumes.
The pipeline, on a disk with room for one set of its two stage files, likewise ends with its report
and status 1, and keeps both files of the set it saved, however many of the small stage-0 files of
later, incomplete sets fit beside them.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from program_kit import environment, write_fashion_mnist

SKIP = 77


failures = []


def expect(condition: bool, what: str, result: subprocess.CompletedProcess) -> None:
    if not condition:
        failures.append(f"{what}\n  exit status {result.returncode}\n  stdout: {result.stdout[-1500:]}\n"
                        f"  stderr: {result.stderr[-3000:]}")


def set_name(step: int, part: str = "worker") -> str:
    return f"step-{step:012d}.{part}.ckpt"


def inside(program: Path, pipeline: Path) -> int:
    """Runs in the private mount namespace."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        write_fashion_mnist(data, 32, 16)
        # One worker, 8 samples a step: 4 updates an epoch, 8 in all, a set every 2 updates.
        run = [str(program), "--data", str(data), "--epochs", "2", "--workers", "1", "--batch", "8",
               "--baseline-steps", "0", "--checkpoint-every", "2"]

        def train(disk: Path, *extra: str) -> subprocess.CompletedProcess:
            return subprocess.run([*run, "--checkpoint-dir", str(disk), *extra], cwd=work, env=environment(),
                                  capture_output=True, text=True, timeout=600)

        sizing = work / "sizing"
        r = train(sizing, "--checkpoint-keep", "0")
        if r.returncode != 0:
            expect(False, "a run on a disk with room must succeed", r)
            return 1
        size = (sizing / set_name(2)).stat().st_size
        page = os.sysconf("SC_PAGE_SIZE")
        pages = -(-size // page)

        def small_disk(name: str, files: int) -> Path:
            disk = work / name
            disk.mkdir()
            # Room for `files` set files and less than one more.
            m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={(files * pages + pages // 2) * page}", "tmpfs",
                                str(disk)], capture_output=True, text=True)
            if m.returncode != 0:
                raise PermissionError(m.stderr.strip())
            return disk

        stages = work / "stages"
        r = subprocess.run([str(pipeline), "--data", str(data), "--epochs", "1", "--batch", "8", "--checkpoint-every", "2",
                            "--checkpoint-dir", str(stages)], cwd=work, env=environment(), capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            expect(False, "a pipeline run on a disk with room must succeed", r)
            return 1
        set_pages = sum(-(-(stages / set_name(2, f"stage-{s}-of-2")).stat().st_size // page) for s in range(2))

        try:
            two = small_disk("two", 2)
            one = small_disk("one", 1)
            pipeline_disk = work / "pipeline"
            pipeline_disk.mkdir()
            m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={(set_pages + set_pages // 2) * page}", "tmpfs",
                                str(pipeline_disk)], capture_output=True, text=True)
            if m.returncode != 0:
                raise PermissionError(m.stderr.strip())
        except PermissionError as e:
            print(f"skipped: cannot mount a tmpfs: {e}")
            return SKIP

        r = train(two, "--checkpoint-keep", "3")
        names = sorted(p.name for p in two.iterdir())
        expect(r.returncode == 0 and "test accuracy" in r.stdout,
               "room for two sets of three kept: expected exit status 0 and the report", r)
        expect(names == [set_name(6), set_name(8)], f"room for two sets: expected the sets of 6 and 8, found {names}", r)
        expect(f"the disk is full; removed {two / set_name(2)}" in r.stderr and
               f"removed {two / set_name(4)}" in r.stderr,
               "room for two sets: expected the oldest sets removed to make room, in the log", r)

        r = train(one, "--checkpoint-keep", "3")
        names = sorted(p.name for p in one.iterdir())
        expect(r.returncode == 1, "room for one set: expected exit status 1", r)
        expect("test accuracy" in r.stdout, "room for one set: expected the report all the same", r)
        expect(f"error: the checkpoint sets of steps 4, 6, 8 could not be saved in {one}" in r.stderr and
               "No space left on device" in r.stderr,
               "room for one set: expected an error naming the unsaved steps, the directory and the reason", r)
        expect(names == [set_name(2)], f"room for one set: expected the set of step 2 alone, found {names}", r)
        r = train(one, "--checkpoint-keep", "3", "--resume")
        expect(f"checkpoint: resuming from step 2" in r.stderr,
               "room for one set: the set saved must still resume", r)
        r = subprocess.run([str(pipeline), "--data", str(data), "--epochs", "2", "--batch", "8", "--checkpoint-every", "2",
                            "--checkpoint-dir", str(pipeline_disk)], cwd=work, env=environment(), capture_output=True,
                           text=True, timeout=600)
        names = sorted(p.name for p in pipeline_disk.iterdir())
        expect(r.returncode == 1 and "per rank, whole run" in r.stdout,
               "pipeline, room for one set: expected the report and exit status 1", r)
        expect(f"error: the checkpoint sets of steps 4, 6, 8 could not be saved in {pipeline_disk}" in r.stderr,
               "pipeline, room for one set: expected an error naming the unsaved steps", r)
        expect(set_name(2, "stage-0-of-2") in names and set_name(2, "stage-1-of-2") in names,
               f"pipeline, room for one set: expected both files of the set of step 2, found {names}", r)
        r = subprocess.run([str(pipeline), "--data", str(data), "--epochs", "2", "--batch", "8", "--checkpoint-every", "2",
                            "--checkpoint-dir", str(pipeline_disk), "--resume"], cwd=work, env=environment(),
                           capture_output=True, text=True, timeout=600)
        expect("checkpoint: resuming from step 2" in r.stderr, "pipeline, room for one set: the set saved must resume", r)
        for disk in (two, one, pipeline_disk):
            subprocess.run(["umount", str(disk)], check=False)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--inside":
        return inside(Path(sys.argv[2]), Path(sys.argv[3]))
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    programs = [str(Path(p).resolve()) for p in sys.argv[1:]]
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        print("skipped: unshare(1) and mount(8) are needed to make a small disk")
        return SKIP
    private = ["unshare", "--mount", "--propagation", "private"]
    probe = subprocess.run([*private, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: cannot make a mount namespace (unshare -m needs root or CAP_SYS_ADMIN): {probe.stderr.strip()}")
        return SKIP
    return subprocess.run([*private, sys.executable, __file__, "--inside", *programs]).returncode


if __name__ == "__main__":
    sys.exit(main())
