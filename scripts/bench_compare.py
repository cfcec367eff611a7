#!/usr/bin/env python3
"""Side-by-side criterion results of two builds (before/after a change), from runs that
alternated on a shared, noisy machine.

Why: criterion compares a run with the previous one in the same directory; on a machine that
other builds share (±15 % noise), a fair before/after needs several alternating runs of the two
executables, each in its own `CRITERION_HOME`, pooled per build. This script pools the
per-sample times (`new/sample.json`: time per iteration of each sample) of every run of a build
and prints mean, p50 and p99 per benchmark, side by side.

    CRITERION_HOME=/tmp/crit/base-1 ./base-bench --bench ...   # then new-1, base-2, new-2
    python3 scripts/bench_compare.py /tmp/crit base new > table.md
"""

import glob
import json
import os
import statistics
import sys


def samples(root, build):
    """{bench id: [seconds per iteration, ...]} pooled over every run directory of a build."""
    out = {}
    for run in sorted(glob.glob(os.path.join(root, f"{build}-*"))):
        for path in glob.glob(os.path.join(run, "**", "new", "sample.json"), recursive=True):
            bench = os.path.relpath(os.path.dirname(os.path.dirname(path)), run)
            with open(path) as f:
                s = json.load(f)
            out.setdefault(bench, []).extend(t / i for t, i in zip(s["times"], s["iters"]))
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def fmt(ns):
    return f"{ns / 1e3:.1f}" if ns >= 1e3 else f"{ns:.0f}ns"


def main():
    root, a, b = sys.argv[1:4]
    sa, sb = samples(root, a), samples(root, b)
    print(f"| benchmark (µs) | {a} mean | {a} p50 | {a} p99 | {b} mean | {b} p50 | {b} p99 | Δ mean |")
    print("|---|---|---|---|---|---|---|---|")
    for bench in sorted(set(sa) & set(sb), key=lambda k: (k.split("/")[0], k)):
        x, y = sa[bench], sb[bench]
        mx, my = statistics.fmean(x), statistics.fmean(y)
        print(
            f"| {bench} | {fmt(mx)} | {fmt(pct(x, .5))} | {fmt(pct(x, .99))} "
            f"| {fmt(my)} | {fmt(pct(y, .5))} | {fmt(pct(y, .99))} | {100 * (my / mx - 1):+.1f} % |"
        )


if __name__ == "__main__":
    main()
