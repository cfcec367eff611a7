#!/usr/bin/env python3
"""Held-out reference data for the sampler's fidelity (issue 22), read by
`tests/it/sampler_fidelity.rs`.

Why: the sampler offers two temperature placements and claims, for each, the set of tokens a
reference implementation keeps. This script records those sets on rows the crate's own tests
never tuned against:

* `after`  — mlx-lm 0.32's real `make_sampler` chain (`apply_top_p` → `apply_min_p` →
  `apply_top_k` on the temperature-1 log-probabilities, then `categorical_sampling`'s
  `logits * (1/temp)`), run by mlx itself (CPU build);
* `before` — a float64 reference of the temperature-first order (HF transformers' and vLLM's
  `TemperatureLogitsWarper` first) with the seed's composition: top-p, min-p and top-k each
  cut the tempered distribution of the whole row, a top-p tie group survives together, top-k
  ties go to the lower id;
* `hf`     — HF transformers' literal warper chain in float64 (temperature → top-k → top-p on
  the top-k-renormalised row, HF's `cumsum <= 1 - top_p` with a stable ascending sort → min-p),
  recorded only as a set, to count where HF's composition differs from the seed's.

Rows are not stored: both sides generate them from integers (a SplitMix64 hash of `(seed,
index)`), and every logit is an integer times a power of two, exact in `f32`, so Python and
Rust see bit-identical rows. Only the parameters and the reference sets are written: per case
the kept count, the sum and the sum of squares of the kept ids (a set fingerprint), and the
reference probabilities of the eight most likely tokens.

    python3 -m venv /tmp/mlxvenv
    /tmp/mlxvenv/bin/pip install mlx-cpu mlx mlx-lm
    /tmp/mlxvenv/bin/python scripts/sampler_fidelity.py | gzip -9n > tests/data/sampler_fidelity/cases.json.gz
"""

import json
import sys

import mlx.core as mx
import mlx_lm
import numpy as np
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

M64 = (1 << 64) - 1
VOCABS = [2, 3, 10, 32, 100, 257, 1000, 4096, 32000, 65536, 152064, 262144]
KINDS = ["llm", "flat", "ties", "large", "peaked", "two_level", "llm_wide"]
BIG = 32000


def splitmix64(z):
    """SplitMix64 on numpy uint64 arrays (wrapping arithmetic)."""
    z = (z + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(M64)
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(M64)
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(M64)
    return z ^ (z >> np.uint64(31))


def sm1(z):
    """SplitMix64 of one Python int."""
    return int(splitmix64(np.array([z & M64], dtype=np.uint64))[0])


def row(seed, n, kind, mask, bf16):
    """The row of `tests/it/sampler_fidelity.rs::row`, as float32 (masked ids are -inf)."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        h = splitmix64((np.uint64(seed) << np.uint64(32)) + i)
        h2 = splitmix64(h)
    f = [((h >> np.uint64(s)) & np.uint64(0xFFFF)).astype(np.int64) for s in (0, 16, 32, 48)]
    s = f[0] + f[1] + f[2] + f[3] - 131070
    if kind in ("llm", "llm_wide"):
        # Integer numerator over 2^14 (2^13 for the wide body): a Gaussian-like body (σ ≈ 2.3,
        # or 4.6), a positive tail on 1/64 of the tokens and eight strong tokens.
        tail = np.where((h2 >> np.uint64(58)) == 0, 2 * ((h2 >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.int64), 0)
        num = s + tail
        for j in range(8):
            num[sm1(seed * 31 + j) % n] += (12 - j) << 14
        x = num.astype(np.float64) / (2.0**14 if kind == "llm" else 2.0**13)
    elif kind == "flat":
        x = s.astype(np.float64) / 2.0**22
    elif kind == "ties":
        x = (s >> 14).astype(np.float64) * 0.5
    elif kind == "large":
        x = s.astype(np.float64) / 2.0**8
    elif kind == "peaked":
        num = s.copy()
        num[sm1(seed) % n] += 15 << 15
        x = num.astype(np.float64) / 2.0**15
    elif kind == "two_level":
        x = np.where((h >> np.uint64(61)) == 0, 3.0, 0.0)
    else:
        raise ValueError(kind)
    x = x.astype(np.float32)
    if bf16:
        b = x.view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
        x = (b << np.uint64(16)).astype(np.uint32).view(np.float32)
    if mask:
        masked = (h2 & np.uint64(3)).astype(np.int64) < mask
        masked[sm1(seed ^ 0x5A5A) % n] = False
        x = np.where(masked, np.float32(-np.inf), x).astype(np.float32)
    return x


def f32(v):
    return float(np.float32(v))


def fingerprint(kept_ids, probs):
    ids = [int(i) for i in kept_ids]
    order = sorted(ids, key=lambda i: (-float(probs[i]), i))[:8]
    return {
        "count": len(ids),
        "sum": str(sum(ids)),
        "sumsq": str(sum(i * i for i in ids)),
        "top": [[i, float(np.float32(probs[i]))] for i in order],
    }


def mlx_after(x, temp, top_p, min_p, top_k):
    logits = mx.array(x)[None, :]
    lp = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    if 0 < top_p < 1.0:
        lp = apply_top_p(lp, top_p)
    if min_p != 0.0:
        lp = apply_min_p(lp, min_p, 1)
    if top_k > 0:
        lp = apply_top_k(lp, top_k)
    filt = np.array(lp).reshape(-1)
    probs = np.array(mx.softmax(lp * (1.0 / temp), axis=-1)).reshape(-1)
    # The support compared: kept by the filters with a probability that is a normal f32
    # (>= 2^-126; below it both sides are at f32's underflow boundary). `drawable` also counts
    # subnormal probabilities, `raw` the filter set itself (finite log-probabilities).
    out = fingerprint(np.nonzero(np.isfinite(filt) & (probs >= 2.0**-126))[0], probs)
    out["drawable"] = int((np.isfinite(filt) & (probs > 0)).sum())
    out["raw"] = int(np.isfinite(filt).sum())
    return out


def order_desc(p):
    """Ids by probability descending, then id ascending."""
    return np.lexsort((np.arange(len(p)), -p))


def f64_probs(x, temp):
    z = x.astype(np.float64) / float(np.float32(temp))
    z = z - np.max(z)
    e = np.exp(z)
    return e / e.sum()


def before_sets(x, temp, top_p, min_p, top_k):
    """(seed composition, HF literal composition) kept id sets and the probabilities."""
    p = f64_probs(x, temp)
    n = len(p)
    order = order_desc(p)
    ps = p[order]
    keep = p > 0
    if 0 < top_p < 1.0:
        tp = float(np.float32(top_p))
        above = np.concatenate(([0.0], np.cumsum(ps)[:-1]))
        # Mass strictly above a tie group: the exclusive cumsum at the group's first member.
        first = np.concatenate(([True], ps[1:] != ps[:-1]))
        group_above = np.maximum.accumulate(np.where(first, above, 0.0))
        kp = np.zeros(n, dtype=bool)
        kp[order] = group_above < tp * p.sum()
        keep &= kp
    if min_p > 0:
        keep &= p >= float(np.float32(min_p)) * p.max()
    if 0 < top_k < n:
        kk = np.zeros(n, dtype=bool)
        kk[order[:top_k]] = True
        keep &= kk
    # The support compared: kept, with a probability that is a normal f32 (>= 2^-126);
    # `drawable` also counts those an exactly rounded f32 keeps as subnormals (>= 2^-150),
    # `raw` the float64 set itself.
    q = np.where(keep, p, 0.0)
    q = q / q.sum()
    seed_set = np.nonzero(keep & (q >= 2.0**-126))[0]
    drawable = int((keep & (q >= 2.0**-150)).sum())
    raw = int(keep.sum())

    # HF literal: TopK → TopP (on the renormalised top-k row) → MinP.
    hk = p > 0
    if 0 < top_k < n:
        # TopKLogitsWarper: `scores < topk(scores)[-1]` is removed, so ties at the k-th value
        # all survive.
        hk &= p >= ps[top_k - 1]
    if 0 < top_p < 1.0:
        r = np.where(hk, p, 0.0)
        r = r / r.sum()
        asc = np.argsort(r, kind="stable")
        cum = np.cumsum(r[asc])
        remove = cum <= 1.0 - float(np.float32(top_p))
        remove[-1] = False
        hk[asc[remove]] = False
    if min_p > 0:
        r = np.where(hk, p, 0.0)
        hk &= r >= float(np.float32(min_p)) * r.max()
    hf_ids = np.nonzero(hk)[0]
    fp = fingerprint(seed_set, q)
    fp["raw"] = raw
    fp["drawable"] = drawable
    return fp, {"count": len(hf_ids), "sum": str(int(hf_ids.sum())), "sumsq": str(int((hf_ids.astype(object) ** 2).sum()))}


def configs(n):
    if n >= BIG:
        temps = [0.7, 1.5]
        filters = [(0.9, 0.0, 0), (0.95, 0.0, 0), (1.0, 0.05, 0), (1.0, 0.0, 40), (0.9, 0.05, 40), (0.95, 0.0, 50)]
    else:
        temps = [0.5, 0.7, 1.0, 1.5]
        filters = [(p, 0.0, 0) for p in (0.5, 0.9, 0.95, 0.99)]
        filters += [(1.0, m, 0) for m in (0.02, 0.1)]
        filters += [(1.0, 0.0, k) for k in (1, 5, 40, 1000)]
        filters += [(0.9, 0.05, 40), (0.95, 0.0, 50), (0.9, 0.02, 0), (1.0, 0.05, 20)]
    for t in temps:
        for top_p, min_p, top_k in filters:
            if top_k >= n:
                continue
            yield f32(t), f32(top_p), f32(min_p), top_k


def main():
    cases = []
    rows = []
    r = 0
    for n in VOCABS:
        for kind in KINDS:
            seed = 1000 + r  # held out: no test or script used these seeds before
            mask = [0, 1, 3][r % 3]
            bf16 = r % 4 == 1
            r += 1
            x = row(seed, n, kind, mask, bf16)
            rows.append({"seed": seed, "n": n, "kind": kind, "mask": mask, "bf16": bf16,
                         "checksum": float(np.sum(np.where(np.isfinite(x), x, 0.0).astype(np.float64)))})
            for temp, top_p, min_p, top_k in configs(n):
                after = mlx_after(x, temp, top_p, min_p, top_k)
                before, hf = before_sets(x, temp, top_p, min_p, top_k)
                cases.append({"row": len(rows) - 1, "temperature": temp, "top_p": top_p,
                              "min_p": min_p, "top_k": top_k, "after": after,
                              "before": before, "hf": hf})
            print(f"{n} {kind}: {len(cases)} cases", file=sys.stderr)
    json.dump({"generator": "scripts/sampler_fidelity.py", "mlx_lm_version": mlx_lm.__version__,
               "mlx_version": mx.__version__, "numpy_version": np.__version__,
               "rows": rows, "cases": cases}, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
