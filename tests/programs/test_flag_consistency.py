#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""One flag name, one meaning: the example and benchmark programs' flags agree with each other.

    test_flag_consistency.py PROGRAM [PROGRAM ...]

Each PROGRAM is a built program that parses its flags with flotilla::cli::Flags (empty arguments
are ignored: the build passes one for a program it does not build). Each is run with --help, and
every flag it lists is read: its name, its bound (">= 1") and its help text. A flag's type is asked
of the parser itself, which names it when refusing a value: `--NAME x` is "not a boolean", "not an
integer" or "not a number", or is taken as text; an integer then takes -1 or says it "must not be
negative"; text takes an empty value or says it "is not a path".

Every flag name that two or more programs have must have one type and one bound in all of them,
and one help text, save the names in DIFFERENT_HELP below. The test fails naming the flag and the
programs on each side. Defaults may differ: each program picks its own.
"""
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from program_kit import environment

# Flags whose help may differ between programs, and why. Their types and bounds must still agree.
# Each is a choice among values that the program names in its help, and the programs offer
# different choices: the flag's meaning (which one to use) is the same.
DIFFERENT_HELP = {
    "policy": "the update policies a program offers (the Fashion-MNIST CNN's, the CTR model's)",
    "codec": "the wire formats a program offers",
    "model": "the networks a benchmark offers",
    "mode": "what a benchmark measures: each has its own list",
    "methods": "the allreduce or socket methods a benchmark times",
}

FLAG_LINE = re.compile(r"^  --(\S+) \(default (.*)\)(?: \[env (\S+)\])?$")
BOUND = re.compile(r"^(.*); (>=?) (\S+)$")

failures = []


def run(program: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *args], env=environment(), capture_output=True, text=True, timeout=120)


def read_help(program: Path) -> dict:
    """{name: {"bound": text, "help": text}} from PROGRAM --help."""
    r = run(program, "--help")
    if r.returncode != 0:
        failures.append(f"{program.name} --help: exit status {r.returncode}\n  stderr: {r.stderr[-800:]}")
        return {}
    flags = {}
    name = None
    for line in r.stdout.splitlines():
        m = FLAG_LINE.match(line)
        if m:
            name = m.group(1)
            bound = BOUND.match(m.group(2))
            flags[name] = {"bound": f"{bound.group(2)} {bound.group(3)}" if bound else "", "help": []}
        elif name and line.startswith("      "):
            flags[name]["help"].append(line.strip())
        else:
            name = None
    for f in flags.values():
        f["help"] = " ".join(f["help"])
    if not flags:
        failures.append(f"{program.name} --help: no flags read from\n{r.stdout[-800:]}")
    return flags


def flag_type(program: Path, name: str) -> str:
    """The type that the parser gives --NAME, from what it says of values it refuses."""
    said = run(program, f"--{name}", "x", "--help")
    if said.returncode == 0:
        said = run(program, f"--{name}=", "--help")
        return "text" if said.returncode == 0 else "path" if "is not a path" in said.stderr else "unknown"
    if "is not a boolean" in said.stderr:
        return "boolean"
    if "is not a number" in said.stderr:
        return "number"
    if "is not an integer" in said.stderr:
        said = run(program, f"--{name}", "-1", "--help")
        return "unsigned integer" if "must not be negative" in said.stderr else "integer"
    return "unknown (" + said.stderr.strip()[-200:] + ")"


def disagreements(name: str, what: str, values: dict) -> None:
    """values: {value: [program names]}; a failure when there are two or more."""
    if len(values) > 1:
        sides = "\n".join(f"    {value!r}: {', '.join(sorted(programs))}" for value, programs in values.items())
        failures.append(f"--{name} has {len(values)} {what}s:\n{sides}")


def main() -> int:
    programs = [Path(p).resolve() for p in sys.argv[1:] if p]
    if len(programs) < 2:
        print(__doc__)
        return 2
    helps = {p: read_help(p) for p in programs}
    owners = defaultdict(list)
    for program, flags in helps.items():
        for name in flags:
            owners[name].append(program)
    shared = {name: ps for name, ps in owners.items() if len(ps) > 1}
    for name, ps in sorted(shared.items()):
        types, bounds, texts = defaultdict(list), defaultdict(list), defaultdict(list)
        for p in ps:
            types[flag_type(p, name)].append(p.name)
            bounds[helps[p][name]["bound"] or "no bound"].append(p.name)
            texts[helps[p][name]["help"]].append(p.name)
        disagreements(name, "type", types)
        disagreements(name, "bound", bounds)
        if name not in DIFFERENT_HELP:
            disagreements(name, "help text", texts)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    print(f"{len(failures)} failures; {len(shared)} flag names shared among {len(programs)} programs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
