#!/usr/bin/env python3
"""Record what mlx-lm's sampling filters and logits processors do, as golden data for
`tests/it/sampler_mlx_golden.rs`.

Why: the sampler promises parity with mlx-lm (`mlx_lm.sample_utils`), and parity is checked
against the real reference, not our reading of it. The tests read only the committed JSON;
this script only regenerates it.

    python3 -m venv /tmp/mlxvenv
    /tmp/mlxvenv/bin/pip install mlx-cpu mlx mlx-lm
    /tmp/mlxvenv/bin/python scripts/mlx_lm_golden.py > tests/data/mlx_lm_golden/filters.json

What is comparable: mlx-lm filters work on temperature-1 log-probabilities and apply the
temperature only in the final categorical draw, while our pipeline (the spec) applies the
temperature before the filters. At temperature 1 the two coincide, so every case here is at
temperature 1. The filters receive `probs = exp(logprobs)` computed by mlx itself, so the Rust
side filters bit-identical inputs; the softmax is compared separately (within 1e-6).

Every number is written as the shortest decimal that round-trips its float32.
"""

import json
import math
import sys

import mlx.core as mx
import numpy as np
import mlx_lm
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p, make_logits_processors

SEED = 20261129
rng = np.random.default_rng(SEED)


def f32s(a):
    """A float32 array as shortest round-trip decimals (inf as strings)."""
    out = []
    for x in np.asarray(a, dtype=np.float32).tolist():
        x = np.float32(x)
        if np.isinf(x):
            out.append("-inf" if x < 0 else "inf")
        else:
            out.append(float(str(x)))
    return out


def f32(x):
    """A Python float that is exactly a float32 (so mlx and Rust see the same parameter)."""
    return float(np.float32(x))


def make_logits(kind, n):
    if kind == "normal":
        x = rng.normal(0.0, 2.0, n)
    elif kind == "peaked":
        x = rng.normal(0.0, 1.0, n)
        x[rng.integers(n)] += 15.0
    elif kind == "flat":
        x = rng.normal(0.0, 0.01, n)
    elif kind == "ties":
        # A coarse grid makes many exact ties, some at every cut.
        x = np.round(rng.normal(0.0, 1.5, n) * 2.0) / 2.0
    elif kind == "large":
        x = rng.normal(0.0, 200.0, n)
    elif kind == "two_level":
        x = np.where(rng.random(n) < 0.1, 3.0, 0.0)
    else:
        raise ValueError(kind)
    return x.astype(np.float32)


def kept_and_probs(filtered_logprobs):
    lp = np.array(filtered_logprobs, dtype=np.float32).reshape(-1)
    kept = [int(i) for i in np.nonzero(np.isfinite(lp))[0]]
    probs = np.array(mx.softmax(filtered_logprobs, axis=-1)).reshape(-1)
    return kept, f32s(probs[kept])


def tie_at_cut(probs, k):
    s = np.sort(np.asarray(probs))[::-1]
    return bool(k < len(s) and s[k - 1] == s[k])


cases = []
shapes = [(32, k) for k in ("normal", "peaked", "flat", "ties", "large", "two_level")]
shapes += [(100, "normal"), (257, "ties"), (257, "peaked"), (512, "large"), (1024, "normal")]
shapes += [(256, "flat"), (4096, "ties")]

for n, kind in shapes:
    logits_np = make_logits(kind, n)
    logits = mx.array(logits_np)[None, :]
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    probs = mx.exp(logprobs)
    case = {
        "name": f"{kind}_{n}",
        "logits": f32s(logits_np),
        "probs": f32s(np.array(probs).reshape(-1)),
        "filters": [],
    }
    # The softmax and log-softmax references only for rows up to 1024 (keeps the file small).
    if n <= 1024:
        case["softmax"] = f32s(np.array(mx.softmax(logits, axis=-1)).reshape(-1))
        case["logprobs"] = f32s(np.array(logprobs).reshape(-1))
    for top_p in (0.1, 0.5, 0.9, 0.95):
        kept, p = kept_and_probs(apply_top_p(logprobs, f32(top_p)))
        case["filters"].append({"op": "top_p", "param": f32(top_p), "kept": kept, "probs": p})
    for min_p in (0.05, 0.1, 0.5, 0.9):
        kept, p = kept_and_probs(apply_min_p(logprobs, f32(min_p)))
        case["filters"].append({"op": "min_p", "param": f32(min_p), "kept": kept, "probs": p})
    for top_k in (1, 5, 20, 40):
        if top_k >= n:
            continue
        kept, p = kept_and_probs(apply_top_k(logprobs, top_k))
        case["filters"].append(
            {
                "op": "top_k",
                "param": top_k,
                "kept": kept,
                "probs": p,
                "tie_at_cut": tie_at_cut(np.array(probs).reshape(-1), top_k),
            }
        )
    # The whole make_sampler chain at temperature 1: top_p -> min_p -> top_k.
    for top_p, min_p, top_k in ((0.9, 0.05, 40), (0.5, 0.1, 5)):
        if top_k >= n:
            continue
        out = apply_top_k(apply_min_p(apply_top_p(logprobs, f32(top_p)), f32(min_p)), top_k)
        kept, p = kept_and_probs(out)
        case["filters"].append(
            {
                "op": "chain",
                "top_p": f32(top_p),
                "min_p": f32(min_p),
                "top_k": top_k,
                "kept": kept,
                "probs": p,
                "tie_at_cut": tie_at_cut(np.array(probs).reshape(-1), top_k),
            }
        )
    cases.append(case)

# Logits processors, on small rows: a history of 30 tokens (only the last 20 count) with repeats,
# and rows with negative, zero and positive logits at the penalised ids.
processors = []
for n in (32, 64, 257):
    logits_np = np.round(rng.normal(0.0, 3.0, n) * 8.0).astype(np.float32) / 8.0
    logits_np[rng.integers(n)] = 0.0
    history = [int(t) for t in rng.integers(0, min(n, 12), 30)]
    bias_ids = [int(t) for t in rng.choice(n, 4, replace=False)]
    bias = {i: f32(b) for i, b in zip(bias_ids, (-100.0, 2.5, -0.75, 5.0))}
    configs = [
        {"repetition_penalty": f32(1.3)},
        {"repetition_penalty": f32(0.8)},
        {"presence_penalty": f32(0.5)},
        {"frequency_penalty": f32(0.25)},
        {"logit_bias": bias},
        {
            "logit_bias": bias,
            "repetition_penalty": f32(1.1),
            "presence_penalty": f32(0.4),
            "frequency_penalty": f32(0.3),
        },
    ]
    for cfg in configs:
        procs = make_logits_processors(**cfg)
        tokens = mx.array(history)
        out = mx.array(logits_np)[None, :]
        for p in procs:
            out = p(tokens, out)
        rec = dict(cfg)
        if "logit_bias" in rec:
            rec["logit_bias"] = [[i, b] for i, b in rec["logit_bias"].items()]
        processors.append(
            {
                "config": rec,
                "history": history,
                "logits": f32s(logits_np),
                "out": f32s(np.array(out).reshape(-1)),
            }
        )

json.dump(
    {
        "generator": "scripts/mlx_lm_golden.py",
        "mlx_lm_version": mlx_lm.__version__,
        "mlx_version": mx.__version__,
        "seed": SEED,
        "cases": cases,
        "processors": processors,
    },
    sys.stdout,
    separators=(",", ":"),
)
sys.stdout.write("\n")
