#!/usr/bin/env python3
"""Turn the criterion output of `cargo bench --bench rejection` into the markdown tables of
docs/benchmark_results/rejection-sampling-*.md: median time per (config, vocab, batch) for each
algorithm, the speed-up over the sort-based chain, the geometric mean, and every configuration
more than 5% slower than the baseline."""
import json, math, pathlib, sys
from collections import defaultdict

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion/rejection")
t = {}
for bj in root.glob("*/*/new/benchmark.json"):
    b = json.loads(bj.read_text())
    est = json.loads((bj.parent / "estimates.json").read_text())
    name, alg, batch = b["function_id"].rsplit(".", 2)
    t[(name, int(b["value_str"]), int(batch[1:]), alg)] = est["median"]["point_estimate"]

def fmt(ns):
    return f"{ns/1e6:.2f} ms" if ns >= 1e6 else f"{ns/1e3:.0f} µs"

configs = sorted({k[0] for k in t}, key=lambda c: (c.startswith("top_k_32") or c.startswith("top_k32"), c))
vocabs = sorted({k[1] for k in t}); batches = sorted({k[2] for k in t})
ratios = defaultdict(list); slow = []
for c in configs:
    algs = [a for a in ("sort", "rejection", "candidates") if any(k[0] == c and k[3] == a for k in t)]
    print(f"\n#### {c}\n")
    print("| vocab | batch | " + " | ".join(algs) + " | " + " | ".join(f"speed-up {a}" for a in algs[1:]) + " |")
    print("|---|---:|" + "---:|" * (2 * len(algs) - 1))
    for v in vocabs:
        for b in batches:
            if (c, v, b, "sort") not in t:
                continue
            base = t[(c, v, b, "sort")]
            cells = [fmt(t.get((c, v, b, a), float("nan"))) for a in algs]
            sp = []
            for a in algs[1:]:
                r = base / t[(c, v, b, a)]
                ratios[a if a == "candidates" else ("rejection" if not c.startswith("top_k_32") and not c.startswith("top_k32") else "rejection (k=32)")].append(r)
                sp.append(f"{r:.2f}×")
                if r < 1 / 1.05:
                    slow.append(f"{c} {a} vocab {v} batch {b}: {r:.2f}×")
            print(f"| {v} | {b} | " + " | ".join(cells) + " | " + " | ".join(sp) + " |")
print("\n#### Geometric means of the speed-up over `sort`\n")
for a, rs in ratios.items():
    g = math.exp(sum(map(math.log, rs)) / len(rs))
    print(f"* {a}: **{g:.2f}×** over {len(rs)} cells (min {min(rs):.2f}×, max {max(rs):.2f}×)")
print("\n#### More than 5% slower than `sort`\n")
print("\n".join(f"* {s}" for s in slow) if slow else "* none")
