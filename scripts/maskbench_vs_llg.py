#!/usr/bin/env python3
"""grammask and llguidance side by side on the MaskBench files both pass (issue 23).

Why: the bar is "ahead of llguidance on every statistic, side by side in the same run", and
the two engines pass different files (llguidance refuses many schemas grammask compiles, and
a few the other way), so pooled statistics over each one's own passes compare different work.
This script runs both once over a folder, keeps the files *both* pass, links them into a
subset folder (with the matching lines of the instances sidecar), then runs the two on that
subset in alternating rounds (the machine drifts ±15 % run to run) and prints mean, p50, p99,
p99.9, max of the per-step mask time and the compile time, per round and as medians.

    python3 scripts/number_suite.py --out target/number-suite
    python3 scripts/maskbench_vs_llg.py --files target/number-suite/files \
        --instances target/number-suite/instances.jsonl --rounds 3
    python3 scripts/maskbench_vs_llg.py --files ../shared/maskbench-dev \
        --instances ../shared/peers/maskbench-dev-instances.jsonl --stride 8 --rounds 2

llguidance's harness (`../shared/peers/llg-bench`) is built first, as its README says:
`cargo build --release --manifest-path ../shared/peers/llg-bench/Cargo.toml --target-dir ../llg-target`.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

STATS = ["mean", "p50", "p99", "p99.9", "max"]


def us(v, unit):
    return float(v) * {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}[unit]


def grammask_run(a, files, out):
    cmd = [a.grammask, "maskbench", files, "--tokenizer", a.tokenizer, "--jobs", "1", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    text = r.stdout + r.stderr
    res = {}
    for what in ["masks", "compile"]:
        m = re.search(rf"{what}:\s+n=(\d+)(.*)", text)
        res[what] = {"n": int(m.group(1))}
        for k, v, unit in re.findall(r"(mean|p50|p90|p99\.9|p99|max) ([\d.]+) (ns|µs|ms|s)\b", m.group(2)):
            res[what][k] = us(v, unit)
    return res


def llg_run(a, files, instances, out):
    cmd = [a.llg, "maskbench", "--tokenizer", a.tokenizer, "--files", files, "--instances", instances,
           "--timeout-s", "10", "--out", out]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    s = json.load(open(out + ".summary.json"))
    c = {k: v * 1e3 for k, v in s["compile_ms"].items() if k != "n" and isinstance(v, (int, float))}
    return {"masks": s["mask_us"], "compile": c}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", required=True)
    ap.add_argument("--instances", required=True)
    ap.add_argument("--tokenizer", default="../shared/tokenizers/llama3.json")
    ap.add_argument("--grammask", default="target/release/grammask")
    ap.add_argument("--llg", default="../llg-target/release/llg-bench")
    ap.add_argument("--work", default="target/vs-llg")
    ap.add_argument("--stride", type=int, default=1, help="every k-th file of the both-pass set")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)

    gm = grammask_run(a, a.files, os.path.join(a.work, "gm-all.jsonl"))
    llg_run(a, a.files, a.instances, os.path.join(a.work, "llg-all"))
    gpass = {json.loads(l)["file"] for l in open(os.path.join(a.work, "gm-all.jsonl"))
             if json.loads(l).get("passed")}
    lpass = {json.loads(l)["id"] for l in open(os.path.join(a.work, "llg-all.jsonl"))
             if json.loads(l).get("status") == "pass" and json.loads(l).get("ref_pass")}
    both = sorted(gpass & lpass)[:: a.stride]
    print(f"files: {len(os.listdir(a.files))}; grammask passes {len(gpass)}, llguidance {len(lpass)}, "
          f"both {len(gpass & lpass)}; compared: {len(both)} (every {a.stride})", file=sys.stderr)
    sub = os.path.join(a.work, "both")
    shutil.rmtree(sub, ignore_errors=True)
    os.makedirs(sub)
    for f in both:
        os.symlink(os.path.abspath(os.path.join(a.files, f)), os.path.join(sub, f))
    want = set(both)
    side = os.path.join(a.work, "both.instances.jsonl")
    with open(side, "w") as out:
        for line in open(a.instances):
            if line.strip() and json.loads(line)["id"] in want:
                out.write(line)
    rounds = []
    for r in range(a.rounds):
        g = grammask_run(a, sub, os.path.join(a.work, f"gm-{r}.jsonl"))
        l = llg_run(a, sub, side, os.path.join(a.work, f"llg-{r}"))
        rounds.append((g, l))
        print(f"round {r + 1}: grammask masks n={g['masks']['n']} mean {g['masks']['mean']:.1f} µs; "
              f"llguidance n={l['masks']['n']} mean {l['masks']['mean']:.1f} µs", file=sys.stderr)
    print(f"| {len(both)} files both pass | grammask | llguidance | ratio |")
    print("|---|---|---|---|")
    for what, unit in [("masks", "µs"), ("compile", "µs")]:
        for k in STATS:
            gs = [g[what][k] for g, _ in rounds if k in g[what]]
            ls = [l[what][k] for _, l in rounds if k in l[what]]
            if not gs or not ls:
                continue
            gm_, lm_ = statistics.median(gs), statistics.median(ls)
            per = " / ".join(f"{x:.1f}" for x in gs), " / ".join(f"{x:.1f}" for x in ls)
            print(f"| {what} {k} ({unit}) | {gm_:.1f} ({per[0]}) | {lm_:.1f} ({per[1]}) | {gm_ / lm_:.2f}× |")


if __name__ == "__main__":
    main()
