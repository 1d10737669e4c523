#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""The cost model's report: fits topology/cost_model.hpp to bench/cluster_cost.sh's measurements
(through flotilla_cost_fit) and writes the tables and the plot of docs/cost_model.md.

    python3 bench/cost_model.py --fit build/rel/bench/flotilla_cost_fit --measurements cost.jsonl \
        [--svg docs/cost_model.svg] [--rate 500mbit] [--alpha-us 20]

Prints markdown: the fitted prices, every measured point against its prediction (and how many lie
within 15%), and the predictions for 64 to 512 workers of a 1 GB model on 10 GbE, with the fitted
price of a message and with --alpha-us (links without delay, as the emulated ones, cannot show a
real network's). The SVG shows
each measured step against its prediction on log axes, with the 15% band.
"""

import argparse
import json
import math
import subprocess
import sys

COLORS = {"ring": "#1f77b4", "hierarchical": "#2ca02c", "parameter_servers": "#d62728"}


def run_fit(fit, measurements, *extra):
    out = subprocess.run([fit, "--measurements", measurements, *extra], check=True, capture_output=True,
                         text=True).stdout
    prices, points, predictions = None, [], []
    for line in out.splitlines():
        r = json.loads(line)
        if "prices" in r:
            prices = r["prices"]
        elif "point" in r:
            points.append(r["point"])
        elif "predict" in r:
            predictions.append(r["predict"])
    return prices, points, predictions


def label(p):
    if p["exchange"] == "parameter_servers":
        return f"{p['servers']} server{'s' if p['servers'] > 1 else ''}"
    if p["exchange"] == "hierarchical":
        return f"hierarchical, {p['ranks_per_host']} a host"
    return "ring"


def svg(points, path):
    w, h, left, right, top, bottom = 640, 480, 70, 20, 40, 60
    xs = [p["measured"] for p in points] + [p["predicted"] for p in points]
    lo, hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))

    def px(v):
        return left + (w - left - right) * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    def py(v):
        return h - bottom - (h - top - bottom) * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Exchange step: predicted against measured</text>']
    decade = lo
    while decade <= hi * 1.0001:
        s.append(f'<line x1="{px(decade):.1f}" y1="{top}" x2="{px(decade):.1f}" y2="{h - bottom}" stroke="#ddd"/>')
        s.append(f'<line x1="{left}" y1="{py(decade):.1f}" x2="{w - right}" y2="{py(decade):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{px(decade):.1f}" y="{h - bottom + 16}" text-anchor="middle">{decade:g} s</text>')
        s.append(f'<text x="{left - 6}" y="{py(decade) + 4:.1f}" text-anchor="end">{decade:g} s</text>')
        decade *= 10
    # y = x and the 15% band around it.
    s.append(f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" stroke="#333"/>')
    for f in (1.15, 0.85):
        s.append(f'<line x1="{px(lo):.1f}" y1="{py(lo * f):.1f}" x2="{px(hi / f):.1f}" y2="{py(hi):.1f}" '
                 f'stroke="#999" stroke-dasharray="4 3"/>' if f > 1 else
                 f'<line x1="{px(lo / f):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi * f):.1f}" '
                 f'stroke="#999" stroke-dasharray="4 3"/>')
    for p in points:
        color = COLORS[p["exchange"]]
        fill = color if p["codec"] == "fp32" else "white"
        s.append(f'<circle cx="{px(p["measured"]):.1f}" cy="{py(p["predicted"]):.1f}" r="4" fill="{fill}" stroke="{color}">'
                 f'<title>{label(p)}, {p["workers"]} workers, {p["mib"]:g} MiB {p["codec"]}: measured '
                 f'{p["measured"]:.4f} s, predicted {p["predicted"]:.4f} s</title></circle>')
    legend = [("ring", "ring"), ("hierarchical", "hierarchical"), ("parameter_servers", "parameter servers")]
    for i, (key, text) in enumerate(legend):
        y = top + 14 + 16 * i
        s.append(f'<circle cx="{left + 14}" cy="{y - 4}" r="4" fill="{COLORS[key]}" stroke="{COLORS[key]}"/>')
        s.append(f'<text x="{left + 24}" y="{y}">{text}</text>')
    y = top + 14 + 16 * len(legend)
    s.append(f'<circle cx="{left + 14}" cy="{y - 4}" r="4" fill="white" stroke="#333"/>')
    s.append(f'<text x="{left + 24}" y="{y}">hollow: fp16 on the wire; dashed: 15% either side</text>')
    s.append(f'<text x="{(left + w - right) / 2}" y="{h - 20}" text-anchor="middle">measured</text>')
    s.append(f'<text x="18" y="{(top + h - bottom) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 18 {(top + h - bottom) / 2})">predicted</text>')
    s.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", required=True, help="flotilla_cost_fit")
    ap.add_argument("--measurements", required=True, help="bench/cluster_cost.sh's JSON lines")
    ap.add_argument("--svg", help="write the plot here")
    ap.add_argument("--rate", default="", help="the links' rate, for the text")
    ap.add_argument("--alpha-us", type=float, default=20, help="a real network's microseconds a message, for the "
                    "second column of predictions")
    args = ap.parse_args()
    prices, points, predictions = run_fit(args.fit, args.measurements)
    if args.svg:
        svg(points, args.svg)
    a, b, g = prices["alpha"], prices["beta"], prices["gamma"]
    print(f"Fitted prices: alpha {a * 1e6:.0f} us a message, beta {b * 1e9:.2f} ns a byte "
          f"({8 / b / 1e6:.0f} Mbit/s{' against links of ' + args.rate if args.rate else ''}), "
          f"gamma {g * 1e9:.3f} ns a byte of memory work.\n")
    within = sum(abs(p["error"]) <= 0.15 for p in points)
    worst = max(points, key=lambda p: abs(p["error"]))
    print(f"{within} of {len(points)} points within 15% of the prediction; the worst {worst['error'] * 100:+.1f}% "
          f"({label(worst)}, {worst['workers']} workers, {worst['mib']:g} MiB {worst['codec']}).\n")
    print("| exchange | workers | codec | " + " | ".join(f"{m:g} MiB" for m in sorted({p['mib'] for p in points})) + " |")
    sizes = sorted({p["mib"] for p in points})
    print("|---|---|---|" + "---|" * len(sizes))
    keys = []
    for p in points:
        k = (label(p), p["workers"], p["codec"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        cells = []
        for m in sizes:
            hit = [p for p in points if (label(p), p["workers"], p["codec"]) == k and p["mib"] == m]
            cells.append("" if not hit else f"{hit[0]['measured']:.3f} / {hit[0]['predicted']:.3f} ({hit[0]['error'] * 100:+.0f}%)")
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    print("\nPredicted exchange of a 1 GB fp32 model on 10 GbE in 25 MiB buckets, seconds a step, with the fitted "
          "prices (alpha as fitted / alpha = %g us):\n" % args.alpha_us)
    _, _, with_alpha = run_fit(args.fit, args.measurements, "--alpha-us", str(args.alpha_us))
    workers = sorted({p["workers"] for p in predictions})
    kinds = []
    for p in predictions:
        k = label(p)
        if k not in kinds:
            kinds.append(k)
    print("| exchange | " + " | ".join(f"{n} workers" for n in workers) + " |")
    print("|---|" + "---|" * len(workers))
    for k in kinds:
        cells = []
        for n in workers:
            hit = [p for p in predictions if label(p) == k and p["workers"] == n]
            other = [p for p in with_alpha if label(p) == k and p["workers"] == n]
            cells.append("" if not hit else f"{hit[0]['seconds']:.1f} / {other[0]['seconds']:.1f}")
        print(f"| {k} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
