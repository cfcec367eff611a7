#!/usr/bin/env python3
"""CLI start-to-exit times on a cached vocabulary and without the cache (issue 23, goal 4).

Runs `grammask generate --json --max-tokens 50` and `grammask walk --json` of a text document
(the first line of benches/data/json_docs.jsonl) for each tokenizer named, N times each, with
the vocabulary cache in a scratch directory (one untimed run first stores it) and with
`--no-vocab-cache`, and prints min / median milliseconds per command as a Markdown table.

    cargo build --release --features cli
    python3 scripts/cli_startup.py --tokenizers ../shared/tokenizers/{qwen3,llama3,gemma3}.json
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd, env, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/grammask")
    ap.add_argument("--tokenizers", nargs="+", required=True)
    ap.add_argument("--doc", default="benches/data/json_docs.jsonl", help="first line is walked")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    doc_dir = tempfile.mkdtemp(prefix="grammask-startup-")
    doc = Path(doc_dir) / "doc.json"
    doc.write_text(Path(args.doc).read_text().splitlines()[0])
    env = dict(os.environ, GRAMMASK_CACHE_DIR=str(Path(doc_dir) / "cache"))
    commands = {
        "`generate --json --max-tokens 50`": ["generate", "--json", "--max-tokens", "50"],
        "`walk --json` (a text document)": ["walk", "--json", "--input", str(doc)],
    }
    names = [Path(t).stem for t in args.tokenizers]
    print("| command | " + " | ".join(f"{n} cached | {n} `--no-vocab-cache`" for n in names) + " |")
    print("|---|" + "---:|" * (2 * len(names)))
    for label, sub in commands.items():
        cells = []
        for tok in args.tokenizers:
            cmd = [args.bin, *sub[:1], "--tokenizer", tok, *sub[1:]]
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)  # store the cache
            for extra in ([], ["--no-vocab-cache"]):
                lo, med = timed(cmd + extra, env, args.runs)
                cells.append(f"{lo:.0f} / {med:.0f} ms")
        print(f"| {label} | " + " | ".join(cells) + " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
