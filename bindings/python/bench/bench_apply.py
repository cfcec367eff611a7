"""What `apply_token_bitmask_inplace` costs per decode step: numpy arrays (the native loop),
torch tensors on the CPU (torch ops), and torch tensors on a CUDA device when there is one (the
transformers processor's path): the Triton kernel of `grammask/_triton.py` beside the torch-ops
version (`GRAMMASK_TRITON=0`), which must give the same logits, and XGrammar's
`apply_token_bitmask_inplace` on the same tensors where xgrammar is importable.

Rows: batch 1, 16 and 64 at Qwen3's padded width (151,936 logits) and Gemma 3's (262,144; the
same Qwen3 vocabulary, padded), in float32 and bfloat16 (torch). The bitmask is a real one
(`[0-9]+` after `1`, alternating with free-form JSON inside a string), handed over as numpy
(what `fill_next_token_bitmask` fills: the call copies it to the device), on CUDA as a pinned
host tensor (what the transformers processor fills when its scores are on the GPU), and as a
tensor already on the device. On CUDA every call is followed by a synchronize (what a decode
loop that reads the token back pays); the floor beside it is one `masked_fill_` with a
precomputed bool mask on the same tensor: the masking without unpacking any bits. Not run by
CI.

usage: python bindings/python/bench/bench_apply.py [--iterations N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import grammask as gm
from grammask import _triton


def bitmask(batch: int, vocab_size: int) -> np.ndarray:
    vocab = gm.Vocabulary.embedded(vocab_size=vocab_size)
    bm = gm.allocate_token_bitmask(batch, vocab_size)
    digits = gm.Matcher(gm.CompiledConstraint.regex(vocab, "[0-9]+"))
    assert digits.accept_string("1")
    free = gm.Matcher(gm.CompiledConstraint.json_object(vocab))
    assert free.accept_string('{"a": "x')
    for r in range(batch):
        (digits if r % 2 == 0 else free).fill_next_token_bitmask(bm, r)
    return bm


def timed(f, iterations: int, sync=lambda: None) -> tuple[float, float]:
    """Median and minimum per call in µs, each call followed by `sync`."""
    for _ in range(5):
        f()
    sync()
    xs = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        f()
        sync()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1e6, min(xs) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=300)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import xgrammar as xgr  # side by side on CUDA, where installed
    except ImportError:
        xgr = None
    devices = ["cpu"] + (["cuda"] if torch is not None and torch.cuda.is_available() else [])
    if torch is not None and "cuda" in devices:
        print(f"# device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("| logits | width | batch | bitmask from | median µs | min µs | masked_fill_ µs |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for width in (151_936, 262_144):
        for batch in (1, 16, 64):
            bm = bitmask(batch, width)
            base = np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32)
            logits = base.copy()
            med, lo = timed(lambda: gm.apply_token_bitmask_inplace(logits, bm), args.iterations)
            print(f"| numpy float32 | {width} | {batch} | numpy | {med:.1f} | {lo:.1f} | |")
            if torch is None:
                continue
            for device in devices:
                sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
                for dtype in (torch.float32, torch.bfloat16):
                    t = torch.from_numpy(base).to(dtype).to(device)
                    bits = np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little")
                    forbid = ~torch.from_numpy(bits[:, :width].astype(bool)).to(device)
                    fill = lambda: t.masked_fill_(forbid, float("-inf"))  # noqa: E731
                    floor, _ = timed(fill, args.iterations, sync)
                    on_device = torch.from_numpy(bm).to(device)

                    def row(label, source, f) -> None:
                        med, lo = timed(f, args.iterations, sync)
                        dt = str(dtype).removeprefix("torch.")
                        print(
                            f"| torch {dt} on {device}, {label} | {width} | {batch} | {source} | "
                            f"{med:.1f} | {lo:.1f} | {floor:.1f} |"
                        )

                    kinds = [("numpy", bm), (device, on_device)]
                    if device == "cuda":
                        kinds.insert(1, ("pinned", torch.from_numpy(bm).pin_memory()))
                    paths = ["triton", "torch ops"] if device == "cuda" else ["torch ops"]
                    results = {}
                    for path in paths:
                        _triton.DISABLED = path != "triton"
                        a = t.clone()
                        launched = _triton.LAUNCHES
                        gm.apply_token_bitmask_inplace(a, on_device)
                        if path == "triton" and _triton.LAUNCHES == launched:
                            print("# triton kernel unavailable here: torch ops only")
                            continue
                        results[path] = a
                        for name, b in kinds:
                            row(f"{path}", name, lambda: gm.apply_token_bitmask_inplace(t, b))
                    if device == "cuda" and xgr is not None:
                        a = t.clone()
                        xgr.apply_token_bitmask_inplace(a, on_device)
                        same = torch.equal(a, results.get("triton", results["torch ops"]))
                        row(
                            f"xgrammar (same logits: {same})",
                            "cuda",
                            lambda: xgr.apply_token_bitmask_inplace(t, on_device),
                        )
                    if len(results) == 2:
                        same = torch.equal(results["triton"], results["torch ops"])
                        print(f"# triton and torch ops give the same logits: {same}")
                        assert same
                    _triton.DISABLED = False


if __name__ == "__main__":
    main()
