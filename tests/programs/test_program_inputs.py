#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""The shipped example programs, run as a user runs them, on inputs a user can get wrong.

    test_program_inputs.py [--launcher FLOTILLA_LAUNCH] PROGRAM [PROGRAM ...]

Each PROGRAM is the path of a built Fashion-MNIST example (fashion_mnist_distributed,
fashion_mnist_tcp, fashion_mnist_mlp, ...). Every program must refuse a zero batch, a negative
learning rate and one that is not a number, and --resume without the checkpoint flag it reads
(--checkpoint, or --checkpoint-dir), with exit status 1 and a message naming the flags (not a
signal, not a run that trains to nothing). A program whose name ends in _tcp is also run by hand,
without the launcher, on a small made-up data set: it must print its final report, also with the
TCP flags of docs/transports.md given, and refuse their bad values by name. With --launcher, it is
also run as a 3-rank job that loses a rank mid-run and goes on (--on-worker-loss continue). A
program whose name ends in _mpi must refuse a bad FLOTILLA_TIMEOUT_MS by name and report without it.
"""
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from program_kit import environment, write_fashion_mnist


failures = []


def expect(condition: bool, what: str, result: subprocess.CompletedProcess) -> None:
    if not condition:
        failures.append(f"{what}\n  exit status {result.returncode}\n  stdout: {result.stdout[-800:]}\n"
                        f"  stderr: {result.stderr[-800:]}")


def run(command: list, work: Path, env: dict = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], cwd=work, env=env or environment(), capture_output=True, text=True,
                          timeout=300)


def write_secret(path: Path, mode: int) -> Path:
    path.write_text(secrets.token_hex(16))  # 32 bytes
    path.chmod(mode)
    return path


# Every flag the TCP settings table of docs/transports.md names, and the programs' own for recovery.
TCP_FLAGS = ["--rank", "--world-size", "--coordinator", "--bind", "--timeout-ms", "--connect-timeout-ms",
             "--socket-buffer", "--secret-file", "--heartbeat-ms", "--checksum-data", "--shared-memory", "--spin-us",
             "--rejoin", "--on-worker-loss"]


def check_tcp_flags(program: Path, work: Path, common: list) -> None:
    name = program.name
    r = run([program, "--help"], work)
    missing = [f for f in TCP_FLAGS if f + " " not in r.stdout]
    expect(r.returncode == 0 and not missing, f"{name} --help: expected every TCP flag, missing {missing}", r)

    # The failure reported: the documented flags answered "unknown flag".
    secret = write_secret(work / "secret", 0o600)
    r = run([program, "--heartbeat-ms", "200", "--timeout-ms", "5000", "--connect-timeout-ms", "5000",
             "--secret-file", secret, *common, "--batch", "16"], work)
    expect(r.returncode == 0 and "test accuracy" in r.stdout,
           f"{name} with --heartbeat-ms, --timeout-ms, --connect-timeout-ms and --secret-file: expected the final "
           "report", r)

    shared = write_secret(work / "shared-secret", 0o644)
    cases = [
        (["--secret-file", shared], [f"--secret-file (FLOTILLA_SECRET_FILE): '{shared}' may be read by others"]),
        (["--on-worker-loss", "bogus"], ["--on-worker-loss: 'bogus' is not one of by-policy, stop, continue"]),
        (["--heartbeat-ms", "0"], ["--heartbeat-ms (FLOTILLA_HEARTBEAT_MS): '0'"]),
        (["--timeout-ms", "soon"], ["--timeout-ms (FLOTILLA_TIMEOUT_MS): 'soon'"]),
        (["--rejoin", "server3"], ["--rejoin (FLOTILLA_REJOIN): 'server3' is not host:port"]),
    ]
    for flags, messages in cases:
        r = run([program, *flags, *common, "--batch", "16"], work)
        expect(r.returncode == 1 and all(m in r.stderr for m in messages),
               f"{name} {' '.join(map(str, flags))}: expected exit status 1 and {messages}", r)


def environ_of(pid: int) -> dict:
    items = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    return dict(i.decode(errors="replace").split("=", 1) for i in items if b"=" in i)


def pid_of_rank(program: Path, job: str, rank: int):
    """The process of `program` that is rank `rank` of the job whose environment holds `job`."""
    exe = str(program)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") != exe:
                continue
            env = environ_of(int(entry.name))
        except OSError:  # gone, or not ours
            continue
        if env.get("PROGRAM_INPUTS_JOB") == job and env.get("FLOTILLA_RANK") == str(rank):
            return int(entry.name)
    return None


# Each rank's exit status, which the launcher does not print, from a shell around it.
REPORT_STATUS = '"$@"; status=$?; echo "rank $FLOTILLA_RANK exited with status $status"; exit $status'


class Job:
    """flotilla-launch -n RANKS --keep-going -- PROGRAM ARGS, its output read line by line."""

    def __init__(self, launcher: Path, ranks: int, program: Path, args: list, work: Path):
        self.id = secrets.token_hex(8)
        env = environment()
        env["PROGRAM_INPUTS_JOB"] = self.id
        self.command = [str(c) for c in [launcher, "-n", ranks, "--keep-going", "--timeout", "120", "--", "sh", "-c",
                                         REPORT_STATUS, "sh", program, *args]]
        self.proc = subprocess.Popen(self.command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []

    def until(self, predicate) -> bool:
        """Reads lines until one satisfies `predicate` (True) or the output ends (False)."""
        for line in self.proc.stdout:
            self.lines.append(line)
            if predicate(line):
                return True
        return False

    def finish(self) -> subprocess.CompletedProcess:
        self.until(lambda line: False)
        self.proc.wait(timeout=60)
        return subprocess.CompletedProcess(self.command, self.proc.returncode, "".join(self.lines), "")


def check_survivors_go_on(launcher: Path, program: Path, work: Path, data: Path) -> None:
    """flotilla-launch -n 3 --keep-going -- PROGRAM --policy sync --on-worker-loss continue, rank 2 killed
    with SIGKILL once rank 0 has started epoch 2 (of 3): ranks 0 and 1 finish and exit 0, and rank 0's
    report counts 2 workers."""
    secret = write_secret(work / "job-secret", 0o600)
    job = Job(launcher, 3, program, ["--data", data, "--epochs", "3", "--batch", "8", "--baseline-steps", "0",
                                     "--policy", "sync", "--on-worker-loss", "continue", "--heartbeat-ms", "200",
                                     "--secret-file", secret], work)
    killed = job.until(lambda line: line.startswith("[rank 0] epoch 2 ")) and pid_of_rank(program, job.id, 2)
    if killed:
        os.kill(killed, signal.SIGKILL)
    r = job.finish()
    what = f"{program.name} under flotilla-launch, --on-worker-loss continue, rank 2 killed in epoch 2"
    if not killed:
        expect(False, f"{what}: expected rank 0 to start epoch 2 while rank 2 ran", r)
        return
    expect("[rank 2] rank 2 exited with status 137" in r.stdout and r.returncode == 137,
           f"{what}: expected rank 2 to die of the kill, and the launcher to exit with its status", r)
    for rank in (0, 1):
        expect(f"[rank {rank}] rank {rank} exited with status 0" in r.stdout, f"{what}: expected rank {rank} to exit 0", r)
        expect(re.search(rf"^\[rank {rank}\] .*\bworker 2 .* lost during .* continuing with 2 workers", r.stdout, re.M),
               f"{what}: expected rank {rank} to log that it goes on with 2 workers", r)
    expect("[rank 0] tcp, 2 workers, policy sync: test accuracy" in r.stdout and "after 3 epochs" in r.stdout,
           f"{what}: expected rank 0's final report, over 2 workers, after 3 epochs", r)


def check_worker_rejoins(launcher: Path, program: Path, work: Path, data: Path) -> None:
    """flotilla-launch -n 4 --keep-going -- PROGRAM --policy async --servers 1; rank 2 (a worker) killed
    once rank 0 has trained a step (of 120), and started again by hand with --rank 2 --world-size 4
    --coordinator ... --rejoin <the address the server printed> once the server dropped it: it
    rejoins, and every rank exits 0."""
    secret = write_secret(work / "rejoin-secret", 0o600)
    # 30 epochs of 4 steps: time enough, on a loaded machine too, for the restarted process to start
    # and rejoin before the others finish (a rejoiner that comes after the end is told so, and the
    # others never count it).
    args = ["--data", data, "--epochs", "30", "--batch", "8", "--baseline-steps", "0", "--policy", "async",
            "--servers", "1", "--heartbeat-ms", "200", "--secret-file", secret]
    job = Job(launcher, 4, program, args, work)
    address = []

    def rejoin_address(line: str) -> bool:
        m = re.search(r"parameter server 3: a lost worker can rejoin at (\S+)", line)
        if m:
            address.append(m.group(1))
        return bool(address) and line.startswith("[rank 0] epoch 1 ")

    what = f"{program.name} under flotilla-launch, --policy async --servers 1, rank 2 killed and restarted with --rejoin"
    victim = job.until(rejoin_address) and pid_of_rank(program, job.id, 2)
    coordinator = environ_of(victim).get("FLOTILLA_COORDINATOR") if victim else None
    if not victim or not coordinator:
        expect(False, f"{what}: expected the server's rejoin address and rank 2 running in epoch 1", job.finish())
        return
    os.kill(victim, signal.SIGKILL)
    if not job.until(lambda line: "parameter server 3: dropped worker 2" in line):
        expect(False, f"{what}: expected the server to drop worker 2", job.finish())
        return
    # Its output to files, so that the job's, read meanwhile, never waits on a full pipe.
    command = [str(c) for c in [program, *args, "--rank", "2", "--world-size", "4", "--coordinator", coordinator,
                                "--rejoin", address[0]]]
    with open(work / "rejoiner.out", "w+") as out, open(work / "rejoiner.err", "w+") as err:
        restarted = subprocess.Popen(command, cwd=work, env=environment(), stdout=out, stderr=err)
        r = job.finish()
        restarted.wait(timeout=120)
        out.seek(0)
        err.seek(0)
        rejoiner = subprocess.CompletedProcess(command, restarted.returncode, out.read(), err.read())
    expect(rejoiner.returncode == 0 and "flotilla: worker 2 rejoined the job at epoch" in rejoiner.stderr,
           f"{what}: expected the restarted rank 2 to rejoin and exit 0", rejoiner)
    for rank in (0, 1, 3):
        expect(f"[rank {rank}] rank {rank} exited with status 0" in r.stdout, f"{what}: expected rank {rank} to exit 0", r)
    expect(re.search(r"^\[rank 0\] .*worker 2 rejoined; training goes on with 3 of 3 workers", r.stdout, re.M)
           and "[rank 0] tcp, 3 workers, policy async: test accuracy" in r.stdout,
           f"{what}: expected rank 0 to log the rejoin and report over 3 workers", r)


def check_mpi_settings(program: Path, work: Path, common: list) -> None:
    name = program.name
    env = environment()
    env["FLOTILLA_TIMEOUT_MS"] = "abc"
    r = run([program, *common, "--batch", "16"], work, env)
    expect(r.returncode == 1 and 'FLOTILLA_TIMEOUT_MS="abc"' in r.stderr,
           f"{name} with FLOTILLA_TIMEOUT_MS=abc: expected exit status 1 and a message naming the variable", r)
    env["FLOTILLA_TIMEOUT_MS"] = "5000"
    r = run([program, *common, "--batch", "16"], work, env)
    expect(r.returncode == 0 and "test accuracy" in r.stdout,
           f"{name} with FLOTILLA_TIMEOUT_MS=5000, started by hand: expected the final report", r)
    r = run([program, "--help"], work)
    expect(r.returncode == 0 and "--policy" in r.stdout and "--secret-file" not in r.stdout,
           f"{name} --help: expected the program's flags, without TCP's", r)


def main() -> int:
    args = sys.argv[1:]
    launcher = None
    if args[:1] == ["--launcher"]:
        launcher, args = Path(args[1]).resolve(), args[2:]
    programs = [Path(p).resolve() for p in args]
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
            extra = ["--baseline-steps", "0"] if "distributed" in name or name.endswith(("_tcp", "_mpi")) else []
            # --resume continues from the checkpoint the program writes: a file of --checkpoint, or
            # the sets of --checkpoint-dir; without it there is nothing to continue from.
            sets = "distributed" in name or "pipeline" in name or name.endswith(("_tcp", "_mpi"))
            cases = [
                (["--batch", "0"], "--batch: '0' must be at least 1"),
                (["--lr", "-1"], "--lr: '-1' must be above 0"),
                (["--lr", "nan"], "--lr: 'nan' is not a finite number"),
                (["--lr", "inf"], "--lr: 'inf' is not a finite number"),
                (["--resume"], "--resume need --checkpoint-dir" if sets else "--resume needs --checkpoint"),
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
                check_tcp_flags(program, work, [*common, *extra])
                if launcher:
                    check_survivors_go_on(launcher, program, work, data)
                    check_worker_rejoins(launcher, program, work, data)
            if name.endswith("_mpi"):
                check_mpi_settings(program, work, [*common, *extra])
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    print(f"{len(failures)} failures over {len(programs)} programs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
