#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Licence lines: every source, build and script file of flotilla starts with

    // SPDX-License-Identifier: MIT                (C++, CUDA)
    // SPDX-FileCopyrightText: 2026 The flotilla authors

(`#` comments in Python, shell, CMake and pkg-config files, after a `#!` line). Files that cannot
carry a comment (documentation, data, the fuzzers' corpus) are declared in REUSE.toml.

    python3 scripts/spdx.py            # add the lines where they are missing
    python3 scripts/spdx.py --check    # exit 1, naming each file without them

Files are those git tracks (the working tree's files, less build/, where there is no git).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LICENSE_LINE = "SPDX-License-Identifier: MIT"
COPYRIGHT_LINE = "SPDX-FileCopyrightText: 2026 The flotilla authors"
SLASH_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}
HASH_SUFFIXES = {".py", ".sh", ".cmake", ".in"}
HASH_NAMES = {"CMakeLists.txt", ".gitignore"}
# Declared in REUSE.toml: prose, data and inputs that must stay byte for byte as they are.
DECLARED_SUFFIXES = {".md", ".svg", ".json", ".jsonl", ".gz", ".idx", ".tsv", ".svm", ".flck", ".deflate"}
DECLARED_DIRS = ("docs/", "tests/fuzz/corpus/", "tests/data/")  # as REUSE.toml says
DECLARED_NAMES = {"LICENSE", "REUSE.toml"}


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not any(part.startswith(("build", ".git")) for part in p.relative_to(ROOT).parts)]


def comment_of(path: str, first_line: str) -> str | None:
    """The comment leader the file's lines take, or None for a file REUSE.toml covers."""
    p = Path(path)
    if p.suffix in SLASH_SUFFIXES:
        return "//"
    if p.suffix in HASH_SUFFIXES or p.name in HASH_NAMES or first_line.startswith("#!"):
        return "#"
    return None


def declared(path: str) -> bool:
    return Path(path).suffix in DECLARED_SUFFIXES or path.startswith(DECLARED_DIRS) or path in DECLARED_NAMES


def has_lines(text: str) -> bool:
    head = text.splitlines()[:4]
    return any(LICENSE_LINE in line for line in head) and any(COPYRIGHT_LINE in line for line in head)


def with_lines(text: str, leader: str) -> str:
    lines = text.splitlines(keepends=True)
    at = 1 if lines and lines[0].startswith("#!") else 0
    block = [f"{leader} {LICENSE_LINE}\n", f"{leader} {COPYRIGHT_LINE}\n"]
    return "".join(lines[:at] + block + lines[at:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report files without the lines; change nothing")
    args = parser.parse_args()
    missing, unknown, changed = [], [], 0
    for rel in tracked_files():
        path = ROOT / rel
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            text = None
        leader = comment_of(rel, text.splitlines()[0] if text else "") if text is not None else None
        if leader is None:
            if not declared(rel):
                unknown.append(rel)
            continue
        if has_lines(text):
            continue
        if args.check:
            missing.append(rel)
        else:
            path.write_text(with_lines(text, leader), encoding="utf-8")
            changed += 1
    if not (ROOT / "LICENSE").is_file():
        missing.append("LICENSE (the licence text itself)")
    for rel in missing:
        print(f"spdx.py: {rel}: no '{LICENSE_LINE}' and '{COPYRIGHT_LINE}' in its first lines", file=sys.stderr)
    for rel in unknown:
        print(f"spdx.py: {rel}: a file of a kind neither commented here nor declared in REUSE.toml", file=sys.stderr)
    if not args.check and changed:
        print(f"spdx.py: added the licence lines to {changed} files")
    return 1 if missing or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
