#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Build cost of one translation unit that includes the single header <flotilla.hpp> and trains the
CNN (bench/compile/single_header_cnn.cpp), header-only and with separate compilation
(FLOTILLA_SEPARATE_COMPILATION: the model-independent code declared only; include/flotilla/core/
linkage.hpp), at -O2 and at -O3 -march=native: wall time, CPU time, peak memory of g++ under
/usr/bin/time -v, and the object's size. The four variants alternate, several runs each. The
definitions' own translation unit (bench/compile/flotilla_src.cpp), which a program built that way
compiles once whatever its number of translation units, is timed once per flag set.

    /usr/bin/python3 bench/build_time.py [--runs 3] [--cxx g++] [--json out.json]
    /usr/bin/python3 bench/build_time.py --examples [--runs 3]

--examples compiles two examples instead, at -O2, header-only (include/): the residual network's
translation unit (examples/fashion_mnist_resnet.cpp: blocks, branches, BatchNorm) against the
CNN's (examples/fashion_mnist_cnn.cpp), alternated, and prints the ratio of their times.

Run from anywhere; it compiles (-c) into a temporary directory. Like the other drivers it waits for
a quiet machine before each compile and repeats a compile that others disturbed.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "bench", "compile", "single_header_cnn.cpp")
DEFINITIONS = os.path.join(ROOT, "bench", "compile", "flotilla_src.cpp")
FLAGS = {"-O2": ["-O2"], "-O3 -march=native": ["-O3", "-march=native"]}
MODES = {"header-only": [], "separate": ["-DFLOTILLA_SEPARATE_COMPILATION"]}


def compile_once(cxx, flags, source, out, include="single_include"):
    argv = ["/usr/bin/time", "-v", cxx, "-std=c++20"] + flags + [
        "-DNDEBUG", "-I", os.path.join(ROOT, include), "-isystem", "/usr/include/eigen3", "-pthread", "-c",
        source, "-o", out]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("compile failed: %s\n%s" % (" ".join(argv), r.stderr[-3000:]))

    def field(name):
        m = re.search(re.escape(name) + r":\s*(\S+)", r.stderr)
        return m.group(1) if m else None

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(x) for x in wall.split(":")]
    seconds = parts[-1] + 60 * parts[-2] + (3600 * parts[-3] if len(parts) > 2 else 0)
    return {"wall_s": seconds, "user_s": float(field("User time (seconds)")), "sys_s": float(field("System time (seconds)")),
            "max_rss_mib": int(field("Maximum resident set size (kbytes)")) / 1024, "object_kib": os.path.getsize(out) / 1024,
            "argv": argv[2:]}


def timed(args, flags, source, out, include="single_include"):
    """One undisturbed compile (up to six tries)."""
    for _ in range(6):
        benchlib.wait_quiet(args.quiet)
        with benchlib.Disturbance(lambda: [os.getpid()]) as d:
            r = compile_once(args.cxx, flags, source, out, include)
        r["foreign"] = d.foreign
        if d.foreign <= args.disturbance:
            return r
        print("  compile disturbed (others used %.0f%%), again" % (100 * d.foreign), file=sys.stderr)
    return r


EXAMPLES = {"CNN (fashion_mnist_cnn.cpp)": os.path.join(ROOT, "examples", "fashion_mnist_cnn.cpp"),
            "ResNet (fashion_mnist_resnet.cpp)": os.path.join(ROOT, "examples", "fashion_mnist_resnet.cpp")}


def compare_examples(args, version, started):
    results = {name: [] for name in EXAMPLES}
    names = list(EXAMPLES)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for name in (names if i % 2 == 0 else names[::-1]):
                r = timed(args, ["-O2"], EXAMPLES[name], os.path.join(tmp, "a.o"), include="include")
                results[name].append(r)
                print("  %s: %.1f s, %.0f MiB" % (name, r["wall_s"], r["max_rss_mib"]), file=sys.stderr)
    print("\nCompile (-c, -O2, header-only) of two examples' translation units, %s, %d runs each, alternated; %s"
          % (version, args.runs, started))
    print("| translation unit | wall s: median (min-max) | CPU s (user+sys): median | peak memory MiB: median | object KiB |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        print("| %s | %s | %.1f | %.0f | %.0f |" % (
            name, benchlib.fmt_spread([r["wall_s"] for r in rs], 1), benchlib.median([r["user_s"] + r["sys_s"] for r in rs]),
            benchlib.median([r["max_rss_mib"] for r in rs]), benchlib.median([r["object_kib"] for r in rs])))
    cnn, resnet = (benchlib.median([r["wall_s"] for r in results[n]]) for n in names)
    print("\nResNet / CNN = %.2f (median wall times)" % (resnet / cnn))
    benchlib.emit_json(args.json, {"started": started, "compiler": version, "examples": results})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", action="store_true", help="the ResNet example's translation unit against the CNN's")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--quiet", type=float, default=0.10)
    ap.add_argument("--disturbance", type=float, default=0.10)
    ap.add_argument("--json")
    args = ap.parse_args()
    version = subprocess.run([args.cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if args.examples:
        compare_examples(args, version, started)
        return
    variants = [(f, m) for f in FLAGS for m in MODES]
    results = {"%s, %s" % v: [] for v in variants}
    definitions = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for flag_name, mode in (variants if i % 2 == 0 else variants[::-1]):
                r = timed(args, FLAGS[flag_name] + MODES[mode], SOURCE, os.path.join(tmp, "a.o"))
                results["%s, %s" % (flag_name, mode)].append(r)
                print("  %s, %s: %.1f s, %.0f MiB" % (flag_name, mode, r["wall_s"], r["max_rss_mib"]), file=sys.stderr)
        for flag_name, flags in FLAGS.items():
            definitions[flag_name] = timed(args, flags + MODES["separate"], DEFINITIONS, os.path.join(tmp, "src.o"))
    size = os.path.getsize(os.path.join(ROOT, "single_include", "flotilla.hpp"))
    print("\nCompile (-c) of bench/compile/single_header_cnn.cpp (single header, %d KiB; trains the CNN), %s, "
          "%d runs each, alternated; %s" % (size // 1024, version, args.runs, started))
    print("| flags | form | wall s: median (min-max) | CPU s (user+sys): median | peak memory MiB: median | object KiB |")
    print("|---|---|---|---|---|---|")
    for name, rs in results.items():
        flag_name, mode = name.split(", ")
        print("| %s | %s | %s | %.1f | %.0f | %.0f |" % (
            flag_name, mode, benchlib.fmt_spread([r["wall_s"] for r in rs], 1),
            benchlib.median([r["user_s"] + r["sys_s"] for r in rs]), benchlib.median([r["max_rss_mib"] for r in rs]),
            benchlib.median([r["object_kib"] for r in rs])))
    for flag_name, r in definitions.items():
        print("| %s | the definitions (flotilla_src.cpp), once per program | %.1f | %.1f | %.0f | %.0f |" % (
            flag_name, r["wall_s"], r["user_s"] + r["sys_s"], r["max_rss_mib"], r["object_kib"]))
    print()
    for flag_name in FLAGS:
        ho = benchlib.median([r["wall_s"] for r in results[flag_name + ", header-only"]])
        sep = benchlib.median([r["wall_s"] for r in results[flag_name + ", separate"]])
        print("%s: separate / header-only = %.2f (median wall times)" % (flag_name, sep / ho))
    print("\ncommand: %s" % " ".join(results["-O2, header-only"][0]["argv"]))
    benchlib.emit_json(args.json, {"started": started, "compiler": version, "results": results,
                                   "definitions": definitions})


if __name__ == "__main__":
    main()
