#!/usr/bin/env python3
"""`grammask generate` with the random-logit model on MaskBench schemas, with and without
`--finish-after N`: how many generations finish (`finish_reason: stop`) within `--max-tokens`,
and how many of the finished documents Python's `jsonschema` accepts (out of CI).

Why: issue 20 measured the random-logit model on 120 MaskBench schemas with
`generate --max-tokens 2000` and found 101 of 234 generations never finished (strings and arrays
keep growing, recursive schemas never close). `--finish-after N` steers the model past N tokens
to the nearest end the fuzzer's completion search finds (`grammask::fuzz::Finisher`); this
script is the before/after on the same schemas and seeds, judged by a validator that is not
ours. A `stop` must mean an accepted document: a finished document the validator refuses is
listed.

Install the judge once (the same venv as scripts/fuzz_compare.py):

    python3 -m venv target/fuzzvenv
    target/fuzzvenv/bin/pip install "jsonschema[format-nongpl]"

Run (from the repository root, after `cargo build --release`):

    target/fuzzvenv/bin/python scripts/generate_finish.py --count 120 --seeds 2 \\
        --max-tokens 2000 --finish-after 500
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(REPO, "..", "shared", "maskbench-dev"))
    ap.add_argument("--tokenizer",
                    default=os.path.join(REPO, "..", "shared", "tokenizers", "llama3.json"))
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "grammask"))
    ap.add_argument("--count", type=int, default=120,
                    help="schemas, evenly spaced over the sorted files (default 120)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per schema (default 2)")
    ap.add_argument("--max-tokens", type=int, default=2000)
    ap.add_argument("--finish-after", type=int, default=500)
    args = ap.parse_args()
    try:
        import jsonschema
    except ImportError:
        sys.exit("needs jsonschema: target/fuzzvenv/bin/pip install 'jsonschema[format-nongpl]'")

    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".json"))
    step = max(1, len(files) // args.count)
    files = files[::step][: args.count]
    modes = {"plain": [], f"--finish-after {args.finish_after}":
             ["--finish-after", str(args.finish_after)]}
    stats = {m: {"runs": 0, "stop": 0, "length": 0, "error": 0, "valid": 0, "invalid": [],
                 "tokens": 0, "seconds": 0.0} for m in modes}
    compiled = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in files:
            with open(os.path.join(args.dir, name)) as f:
                schema = json.load(f)["schema"]
            path = os.path.join(tmp, "schema.json")
            with open(path, "w") as f:
                json.dump(schema, f)
            cls = jsonschema.validators.validator_for(schema)
            try:
                cls.check_schema(schema)
                validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
            except Exception:  # a schema the validator cannot read: not judged
                continue
            first = True
            for seed in range(args.seeds):
                for mode, extra in modes.items():
                    cmd = [args.bin, "generate", "--schema", path, "--tokenizer", args.tokenizer,
                           "--max-tokens", str(args.max_tokens), "--seed", str(seed),
                           "--format", "json", *extra]
                    t0 = time.perf_counter()
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    secs = time.perf_counter() - t0
                    if p.returncode != 0 and first and "error" in p.stderr.lower():
                        break  # the schema does not compile: not counted
                    s = stats[mode]
                    if first:
                        compiled += 1
                        first = False
                    s["runs"] += 1
                    s["seconds"] += secs
                    if p.returncode != 0:
                        s["error"] += 1
                        s["invalid"].append((name, seed, p.stderr.strip()[-200:]))
                        continue
                    out = json.loads(p.stdout)
                    s["tokens"] += out["n_tokens"]
                    if out["finish_reason"] != "stop":
                        s["length"] += 1
                        continue
                    s["stop"] += 1
                    try:
                        ok = validator.is_valid(json.loads(out["content"]))
                    except ValueError:
                        ok = False
                    if ok:
                        s["valid"] += 1
                    else:
                        s["invalid"].append((name, seed, out["content"][:200]))
                else:
                    continue
                break
    print(f"{len(files)} schemas taken, {compiled} compiled; {args.seeds} seeds each; "
          f"--max-tokens {args.max_tokens}; tokenizer {os.path.basename(args.tokenizer)}\n")
    print("| mode | generations | finished (`stop`) | `length` | errors | finished and valid "
          "(Python jsonschema) | mean tokens | mean s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode, s in stats.items():
        n = max(s["runs"], 1)
        print(f"| {mode} | {s['runs']} | {s['stop']} | {s['length']} | {s['error']} | "
              f"{s['valid']} / {s['stop']} | {s['tokens'] / n:.0f} | {s['seconds'] / n:.2f} |")
    for mode, s in stats.items():
        for name, seed, what in s["invalid"][:20]:
            print(f"  {mode}: {name} seed {seed}: {what}")


if __name__ == "__main__":
    main()
