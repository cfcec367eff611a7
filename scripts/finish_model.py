#!/usr/bin/env python3
"""Does a greedy small model finish under a schema? `grammask generate --model` (SmolLM2-135M,
greedy) on MaskBench schemas that allow a short document, once per profile / whitespace
variant, judged by Python's `jsonschema` (not our code): how many generations finish
(`finish_reason: stop`) within `--max-tokens` with a valid document, how many finish invalid
(must be 0), how many run into the limit, and how many schemas are refused at compile time.

"Allows a short document": one of the file's valid instances is at most `--short` bytes of
compact JSON. The prompt asks for an example instance and shows the schema (cut at 1,500
characters), as a user of a structured-output API would.

Install the judge once (the same venv as scripts/fuzz_compare.py):

    python3 -m venv target/fuzzvenv
    target/fuzzvenv/bin/pip install "jsonschema[format-nongpl]"

Run (from the repository root, after `cargo build --release`):

    target/fuzzvenv/bin/python scripts/finish_model.py --count 60 --max-tokens 300
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = {
    "exact": ["--profile", "exact"],
    "generation": ["--profile", "generation"],
    "generation+separators": ["--profile", "generation", "--whitespace", "separators"],
    "generation+compact": ["--profile", "generation", "--whitespace", "compact"],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(REPO, "..", "shared", "maskbench-dev"))
    ap.add_argument("--model", default=os.path.join(
        REPO, "..", "shared", "models", "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "grammask"))
    ap.add_argument("--count", type=int, default=60, help="schemas (default 60)")
    ap.add_argument("--offset", type=int, default=7, help="first file of the stride sample")
    ap.add_argument("--short", type=int, default=300,
                    help="a valid instance of at most this many bytes must exist (default 300)")
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--variants", default="exact,generation",
                    help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--jsonl", help="write every generation here")
    args = ap.parse_args()
    try:
        import jsonschema
    except ImportError:
        sys.exit("needs jsonschema: target/fuzzvenv/bin/pip install 'jsonschema[format-nongpl]'")
    variants = args.variants.split(",")
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".json"))
    picked = []
    for name in files[args.offset:] + files[: args.offset]:
        with open(os.path.join(args.dir, name)) as f:
            data = json.load(f)
        shortest = min((len(json.dumps(t["data"], separators=(",", ":")))
                        for t in data["tests"] if t["valid"]), default=None)
        if shortest is None or shortest > args.short:
            continue
        schema = data["schema"]
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except Exception:  # a schema the judge cannot read is not judged
            continue
        picked.append((name, schema, cls(schema, format_checker=cls.FORMAT_CHECKER)))
    step = max(1, len(picked) // args.count)
    picked = picked[::step][: args.count]
    stats = {v: {"runs": 0, "valid": 0, "invalid": [], "length": [], "refused": [],
                 "tokens": 0, "seconds": 0.0} for v in variants}
    out = open(args.jsonl, "w") if args.jsonl else None
    with tempfile.TemporaryDirectory() as tmp:
        for name, schema, validator in picked:
            path = os.path.join(tmp, "schema.json")
            with open(path, "w") as f:
                json.dump(schema, f)
            text = json.dumps(schema, separators=(",", ":"))[:1500]
            prompt = ("Write one short example JSON document that is valid against this JSON "
                      f"Schema. Reply with the JSON only.\n\nSchema: {text}")
            for v in variants:
                cmd = [args.bin, "generate", "--model", args.model, "--schema", path,
                       "--prompt", prompt, "--max-tokens", str(args.max_tokens),
                       "--threads", str(args.threads), "--format", "json", "--quiet",
                       *VARIANTS[v]]
                t0 = time.perf_counter()
                p = subprocess.run(cmd, capture_output=True, text=True)
                s = stats[v]
                s["runs"] += 1
                s["seconds"] += time.perf_counter() - t0
                rec = {"file": name, "variant": v}
                if p.returncode != 0:
                    s["refused"].append((name, p.stderr.strip()[-200:]))
                    rec["refused"] = p.stderr.strip()[-300:]
                else:
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    s["tokens"] += r["n_tokens"]
                    rec.update(finish=r["finish_reason"], tokens=r["n_tokens"],
                               content=r["content"])
                    if r["finish_reason"] != "stop":
                        s["length"].append(name)
                    else:
                        try:
                            doc = json.loads(r["content"])
                            errors = [e.message for e in validator.iter_errors(doc)]
                        except json.JSONDecodeError as e:
                            errors = [f"not JSON: {e}"]
                        if errors:
                            s["invalid"].append((name, errors[0][:200]))
                            rec["errors"] = errors[:3]
                        else:
                            s["valid"] += 1
                if out:
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
    print(f"{len(picked)} schemas with a valid instance of <= {args.short} bytes, greedy, "
          f"--max-tokens {args.max_tokens}")
    print(f"{'variant':22} {'runs':>5} {'valid':>6} {'invalid':>8} {'length':>7} "
          f"{'refused':>8} {'tok/run':>8} {'s/run':>6}")
    for v, s in stats.items():
        n = max(1, s["runs"])
        print(f"{v:22} {s['runs']:5} {s['valid']:6} {len(s['invalid']):8} "
              f"{len(s['length']):7} {len(s['refused']):8} {s['tokens'] / n:8.1f} "
              f"{s['seconds'] / n:6.2f}")
    for v, s in stats.items():
        for name, err in s["invalid"]:
            print(f"INVALID {v} {name}: {err}")
        for name in s["length"]:
            print(f"LENGTH  {v} {name}")
        for name, err in s["refused"]:
            print(f"REFUSED {v} {name}: {err}")
    return 1 if any(s["invalid"] for s in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
