#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Checks that flotilla's headers include only their own layer and the layers below it, and that
each has its own include guard (guard_of, after `#pragma once`): the single header
keeps the guards, so that the separate headers may follow it in one translation unit.

    python3 scripts/check_layers.py               # exit 1, naming every include that runs up
    python3 scripts/check_layers.py --self-test   # plants an upward include in a copy: must be caught

The layers, lowest first (docs/architecture.md explains them). A header may include headers of
its own layer and of any layer below; including one above is what this check refuses, with the
file, the line and both layers named.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

# Folder (or top-level header) -> layer. Folders of one layer may include each other.
LAYERS: list[tuple[str, list[str]]] = [
    ("core", ["core", "version.hpp"]),
    ("concepts", ["concepts"]),
    ("model parts", ["nn", "loss", "optim", "data", "codec", "cli"]),
    ("model", ["model.hpp", "interop"]),
    ("transport", ["transport"]),
    ("collectives", ["collective"]),
    ("topologies", ["topology"]),
    ("exchanges", ["exchange"]),
    ("policies", ["policy"]),
    ("training", ["train", "testing"]),
    ("pipelines", ["pipeline"]),
    ("sparse models", ["sparse"]),
    ("devices", ["cuda"]),
    ("umbrella", ["flotilla.hpp", "pipeline.hpp", "src.hpp"]),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]flotilla/([^">]+)[">]')


def layer_of(path_in_flotilla: str) -> tuple[int, str] | None:
    first = path_in_flotilla.split("/", 1)[0]
    for rank, (name, parts) in enumerate(LAYERS):
        if first in parts:
            return rank, name
    return None


def guard_of(path: str) -> str:
    """A header's include guard: its path's parts, underscores dropped, joined by underscores
    (flotilla/transport/tcp_launch.hpp: FLOTILLA_TRANSPORT_TCPLAUNCH_HPP_INCLUDED, apart from
    flotilla/transport/tcp/launch.hpp's FLOTILLA_TRANSPORT_TCP_LAUNCH_HPP_INCLUDED)."""
    return "_".join(re.sub(r"[^A-Za-z0-9]", "", part) for part in re.split(r"[/.]", path)).upper() + "_INCLUDED"


def check(include_root: Path) -> list[str]:
    """Every upward or unknown include under include_root/flotilla, as a message."""
    problems = []
    guards: dict[str, str] = {}
    base = include_root / "flotilla"
    for header in sorted(base.rglob("*.hpp")):
        rel = header.relative_to(base).as_posix()
        own = layer_of(rel)
        if own is None:
            problems.append(f"{rel}: in no layer (add its folder to scripts/check_layers.py's LAYERS)")
            continue
        text = header.read_text(encoding="utf-8")
        guard = guard_of("flotilla/" + rel)
        if guard in guards:
            problems.append(f"{rel}: its include guard {guard} is also {guards[guard]}'s: rename one of the two")
        guards[guard] = rel
        if not re.search(rf"^#ifndef {guard}\n#define {guard}\n", text, re.M) or not text.rstrip().endswith(f"#endif  // {guard}"):
            problems.append(f"{rel}: no include guard {guard} (#ifndef/#define after #pragma once, #endif  // {guard} last)")
        for number, line in enumerate(text.splitlines(), start=1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = layer_of(m.group(1))
            if target is None:
                problems.append(f"{rel}:{number}: includes flotilla/{m.group(1)}, which is in no layer")
            elif target[0] > own[0]:
                problems.append(
                    f"{rel}:{number}: includes flotilla/{m.group(1)} ({target[1]}), a layer above its own ({own[1]})")
    return problems


def self_test(include_root: Path) -> int:
    """The check must pass on the tree and catch an include planted to run up the layers."""
    if check(include_root):
        print("check_layers.py --self-test: the tree itself has upward includes; run without --self-test",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "include"
        shutil.copytree(include_root, copy)
        victim = copy / "flotilla" / "core" / "error.hpp"
        text = victim.read_text(encoding="utf-8")
        victim.write_text(text.replace("#pragma once", '#pragma once\n#include "flotilla/train/trainer.hpp"', 1),
                          encoding="utf-8")
        found = check(copy)
    line = text.splitlines().index("#pragma once") + 2  # the line after it
    planted = [p for p in found if p.startswith(f"core/error.hpp:{line}: includes flotilla/train/trainer.hpp")]
    if len(found) != 1 or not planted:
        print(f"check_layers.py --self-test: the planted include was not reported alone: {found}", file=sys.stderr)
        return 1
    print(f"check_layers.py --self-test: caught the planted include: {planted[0]}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--include-dir", type=Path, default=Path(__file__).resolve().parent.parent / "include")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.include_dir)
    problems = check(args.include_dir)
    for p in problems:
        print(f"check_layers.py: {p}", file=sys.stderr)
    if problems:
        print(f"check_layers.py: {len(problems)} include(s) against the layers", file=sys.stderr)
        return 1
    headers = sum(1 for _ in (args.include_dir / "flotilla").rglob("*.hpp"))
    print(f"check_layers.py: {headers} headers, every include within its layer or below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
