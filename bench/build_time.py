#!/usr/bin/python3
"""Build cost of one translation unit that includes the single header <flotilla.hpp> and trains the
CNN (bench/build/single_header_cnn.cpp): wall time, CPU time and peak memory of g++ under
/usr/bin/time -v, at -O2 and at -O3 -march=native, alternated, several runs each.

    /usr/bin/python3 bench/build_time.py [--runs 3] [--cxx g++] [--json out.json]

Run from anywhere; it compiles into a temporary directory. Like the other drivers it waits for a
quiet machine before each compile and repeats a compile that others disturbed.
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
SOURCE = os.path.join(ROOT, "bench", "build", "single_header_cnn.cpp")
FLAGS = {"-O2": ["-O2"], "-O3 -march=native": ["-O3", "-march=native"]}


def compile_once(cxx, flags, out):
    argv = ["/usr/bin/time", "-v", cxx, "-std=c++20"] + flags + [
        "-DNDEBUG", "-I", os.path.join(ROOT, "single_include"), "-isystem", "/usr/include/eigen3", "-pthread", SOURCE,
        "-o", out]
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
            "max_rss_mib": int(field("Maximum resident set size (kbytes)")) / 1024, "argv": argv[2:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--quiet", type=float, default=0.10)
    ap.add_argument("--disturbance", type=float, default=0.10)
    ap.add_argument("--json")
    args = ap.parse_args()
    version = subprocess.run([args.cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results = {k: [] for k in FLAGS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for name, flags in (list(FLAGS.items()) if i % 2 == 0 else list(FLAGS.items())[::-1]):
                for attempt in range(6):
                    benchlib.wait_quiet(args.quiet)
                    with benchlib.Disturbance(lambda: [os.getpid()]) as d:
                        r = compile_once(args.cxx, flags, os.path.join(tmp, "a.out"))
                    r["foreign"] = d.foreign
                    if d.foreign <= args.disturbance:
                        break
                    print("  compile disturbed (others used %.0f%%), again" % (100 * d.foreign), file=sys.stderr)
                results[name].append(r)
                print("  %s: %.1f s, %.0f MiB" % (name, r["wall_s"], r["max_rss_mib"]), file=sys.stderr)
    size = os.path.getsize(os.path.join(ROOT, "single_include", "flotilla.hpp"))
    print("\nBuild of bench/build/single_header_cnn.cpp (single header, %d KiB; trains the CNN), %s, %d runs each; %s"
          % (size // 1024, version, args.runs, started))
    print("| flags | wall s: median (min-max) | CPU s (user+sys): median | peak memory MiB: median (min-max) |")
    print("|---|---|---|---|")
    for name, rs in results.items():
        print("| %s | %s | %.1f | %s |" % (name, benchlib.fmt_spread([r["wall_s"] for r in rs], 1),
                                          benchlib.median([r["user_s"] + r["sys_s"] for r in rs]),
                                          benchlib.fmt_spread([r["max_rss_mib"] for r in rs], 0)))
    print("\ncommand: %s" % " ".join(results["-O2"][0]["argv"]))
    benchlib.emit_json(args.json, {"started": started, "compiler": version, "results": results})


if __name__ == "__main__":
    main()
