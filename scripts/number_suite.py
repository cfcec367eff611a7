#!/usr/bin/env python3
"""Write a MaskBench-format suite of bounded-number schemas (issue 23, goal 6).

Numbers under `minimum` / `maximum` / `exclusiveMinimum` / `exclusiveMaximum` / `multipleOf`,
as `number` and `integer`, alone, as object properties and as array items, each combination
of keywords a file, with valid instances at, near and between the bounds and invalid ones just
past them (judged here with exact decimal arithmetic, and by `jsonschema` when it is
importable). Also writes the sidecar that `../shared/peers/llg-bench maskbench --instances`
reads: each instance serialised as Python's `json.dumps` does, the text both engines walk.

    python3 scripts/number_suite.py --out target/number-suite
    target/release/grammask maskbench target/number-suite/files \
        --tokenizer ../shared/tokenizers/llama3.json --jobs 1 --out gm
    ../llg-target/release/llg-bench maskbench --tokenizer ../shared/tokenizers/llama3.json \
        --files target/number-suite/files --instances target/number-suite/instances.jsonl --out llg

Deterministic: the same `--seed` writes the same files.
"""

import argparse
import itertools
import json
import os
import random
from decimal import Decimal, getcontext

getcontext().prec = 60

# (lower, upper) pairs: both, one side, negative, fractional, large.
RANGES = [
    ("0", "1"),
    ("0", "100"),
    ("1", "99"),
    ("0", "10000"),
    ("-90", "90"),
    ("-180", "180"),
    ("-273.15", None),
    ("0", None),
    ("1", None),
    (None, "0"),
    (None, "1.0"),
    ("0.5", "2.5"),
    ("1900", "2100"),
    ("0", "65535"),
    ("-1000000", "1000000"),
    ("0.001", "0.999"),
]
STEPS = [None, "0.01", "0.1", "0.5", "5", "0.25"]


def num(s):
    """A bound as the JSON number a schema author writes (int when it has no point)."""
    return json.loads(s)


def dec(v):
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


def valid(v, c):
    d = dec(v)
    if c["integer"] and d != d.to_integral_value():
        return False
    lo, hi = c["lo"], c["hi"]
    if lo is not None and (d < Decimal(lo) or (c["xlo"] and d == Decimal(lo))):
        return False
    if hi is not None and (d > Decimal(hi) or (c["xhi"] and d == Decimal(hi))):
        return False
    if c["step"] is not None and (d / Decimal(c["step"])) % 1 != 0:
        return False
    return True


def schema_of(c):
    s = {"type": "integer" if c["integer"] else "number"}
    if c["lo"] is not None:
        s["exclusiveMinimum" if c["xlo"] else "minimum"] = num(c["lo"])
    if c["hi"] is not None:
        s["exclusiveMaximum" if c["xhi"] else "maximum"] = num(c["hi"])
    if c["step"] is not None:
        s["multipleOf"] = num(c["step"])
    return s


def candidates(c, rng):
    """Values at, near and between the bounds, and random ones, as Python numbers."""
    lo = Decimal(c["lo"]) if c["lo"] is not None else None
    hi = Decimal(c["hi"]) if c["hi"] is not None else None
    a = lo if lo is not None else (hi - 1000 if hi is not None else Decimal(-1000))
    b = hi if hi is not None else a + 100000
    out = []
    for d in [a, b]:
        for delta in ["0", "1", "-1", "0.01", "-0.01", "0.5", "-0.5"]:
            out.append(d + Decimal(delta))
    for _ in range(12):
        x = a + (b - a) * Decimal(rng.random())
        out.append(x.quantize(Decimal(rng.choice(["1", "0.1", "0.01", "0.001", "0.000001"]))))
    step = Decimal(c["step"]) if c["step"] else None
    if step:
        for _ in range(6):
            k = int((a + (b - a) * Decimal(rng.random())) / step)
            out.append(k * step)
    res = []
    for d in out:
        if c["integer"] or d == d.to_integral_value() and rng.random() < 0.5:
            if d == d.to_integral_value():
                res.append(int(d))
                continue
        res.append(float(d))
    return res


def instances(c, rng, wrap):
    vals = candidates(c, rng)
    good = [v for v in vals if valid(v, c)]
    bad = [v for v in vals if not valid(v, c)]
    rng.shuffle(good)
    rng.shuffle(bad)
    tests = []
    if wrap == "value":
        for v in good[:6]:
            tests.append((v, True))
        for v in bad[:3]:
            tests.append((v, False))
    elif wrap == "object":
        # {"price": <x>, "qty": <integer 1..99>, "label": "..."}
        for i in range(0, min(len(good), 8), 2):
            tests.append(({"price": good[i], "qty": rng.randint(1, 99), "label": "item %d" % i}, True))
        for v in bad[:2]:
            tests.append(({"price": v, "qty": 3, "label": "x"}, False))
    else:  # array of points
        for i in range(0, min(len(good), 9), 3):
            tests.append(([good[j] for j in range(i, min(i + 3, len(good)))], True))
        for v in bad[:2]:
            tests.append(([good[0] if good else v, v], False))
    return tests


def wrap_schema(s, wrap):
    if wrap == "value":
        return s
    if wrap == "object":
        return {
            "type": "object",
            "properties": {
                "price": s,
                "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                "label": {"type": "string"},
            },
            "required": ["price", "qty"],
            "additionalProperties": False,
        }
    return {"type": "array", "items": s, "minItems": 1}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="target/number-suite")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    files = os.path.join(a.out, "files")
    os.makedirs(files, exist_ok=True)
    for f in os.listdir(files):
        os.remove(os.path.join(files, f))
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        jsonschema = None
    side = []
    n = 0
    for (lo, hi), integer, step, (xlo, xhi), wrap in itertools.product(
        RANGES, [False, True], STEPS, [(False, False), (True, True)], ["value", "object", "array"]
    ):
        if integer and step not in (None, "5"):
            continue
        if (xlo and lo is None) and (xhi and hi is None):
            continue
        c = {"lo": lo, "hi": hi, "integer": integer, "step": step, "xlo": xlo, "xhi": xhi}
        s = wrap_schema(schema_of(c), wrap)
        tests = instances(c, rng, wrap)
        if not any(v for _, v in tests):
            continue
        if jsonschema is not None and step is None:
            # (Python's jsonschema checks `multipleOf` in floats: 0.29 is not a multiple of
            # 0.01 there; the exact check above is the judge for steps.)
            for d, v in tests:
                assert jsonschema.Draft202012Validator(s).is_valid(d) == v, (s, d, v)
        name = "num_%s_%s_%s_%s_%s_%s.json" % (
            "int" if integer else "num",
            (lo or "none").replace("-", "m"),
            (hi or "none").replace("-", "m"),
            (step or "any"),
            "x" if xlo else "i",
            wrap,
        )
        body = {
            "description": "bounded-number suite (scripts/number_suite.py)",
            "meta": {"features": sorted(k for k in schema_of(c) if k != "type")},
            "schema": s,
            "tests": [{"description": "generated", "valid": v, "data": d} for d, v in tests],
        }
        with open(os.path.join(files, name), "w") as f:
            json.dump(body, f, indent=1)
        side.append({"id": name, "tests": [[v, json.dumps(d, ensure_ascii=False)] for d, v in tests]})
        n += 1
    with open(os.path.join(a.out, "instances.jsonl"), "w") as f:
        for line in side:
            f.write(json.dumps(line) + "\n")
    print("%d files in %s, sidecar %s" % (n, files, os.path.join(a.out, "instances.jsonl")))


if __name__ == "__main__":
    main()
