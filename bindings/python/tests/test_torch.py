"""torch tensors, on the CPU and on a CUDA device when there is one: `apply_token_bitmask_inplace`
/ `apply_token_bitmask` on every dtype a model emits, the bitmask given as a numpy array, a CPU
tensor or a tensor already on the logits' device, and the transformers processor driving a
decode loop whose scores live on that device. On CUDA the default path is the Triton kernel
(when triton is importable) and the torch-ops path is run beside it (`_triton.DISABLED`).

The allowed set of every row is read back from the bitmask with XGrammar's documented formula
(`unpack_xgrammar`, written in plain Python in `test_bitmask_layout.py`), not by a grammask
call. CI installs no torch (the PyPI build is the multi-GB CUDA one) and has no GPU: these tests
say why they are skipped there; they run on a machine with torch (and CUDA)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import grammask as gm
from grammask import _triton
from test_bitmask_layout import unpack_xgrammar


def torch_on(device: str):
    try:
        import torch
    except ImportError:
        print("SKIP reason: torch is not importable (the PyPI build is the multi-GB CUDA one)")
        pytest.skip("torch is not importable: torch tensors are not exercised")
    if device == "cuda" and not torch.cuda.is_available():
        print("SKIP reason: torch sees no CUDA device")
        pytest.skip("no CUDA device: tensors on the GPU are not exercised")
    return torch


def filled_rows(vocab: gm.Vocabulary) -> np.ndarray:
    """Four rows: `[0-9]+` at its start (digits only), after `12` (digits or EOS), a JSON
    object after `{"a": ` (values), and an untouched all-allowed row."""
    bm = gm.allocate_token_bitmask(4, vocab.vocab_size)
    digits = gm.CompiledConstraint.regex(vocab, "[0-9]+")
    gm.Matcher(digits).fill_next_token_bitmask(bm, 0)
    m = gm.Matcher(digits)
    assert m.accept_string("12")
    m.fill_next_token_bitmask(bm, 1)
    j = gm.Matcher(gm.CompiledConstraint.json_object(vocab))
    assert j.accept_string('{"a": ')
    j.fill_next_token_bitmask(bm, 2)
    return bm


def triton_importable() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("bitmask_kind", ["numpy", "cpu_tensor", "device_tensor"])
@pytest.mark.parametrize("path", ["default", "torch_ops"])
def test_apply_on_torch_tensors(qwen3, device, dtype, bitmask_kind, path, monkeypatch):
    torch = torch_on(device)
    if path == "torch_ops":
        monkeypatch.setattr(_triton, "DISABLED", True)
    launches = _triton.LAUNCHES
    bm = filled_rows(qwen3)
    allowed = [unpack_xgrammar(bm[r], qwen3.vocab_size) for r in range(4)]
    assert allowed[0] < allowed[1] and len(allowed[3]) == qwen3.vocab_size
    bitmask = {
        "numpy": bm,
        "cpu_tensor": torch.from_numpy(bm),
        "device_tensor": torch.from_numpy(bm).to(device),
    }[bitmask_kind]

    g = torch.Generator().manual_seed(1)
    before = torch.randn(4, qwen3.vocab_size, generator=g).to(getattr(torch, dtype)).to(device)
    logits = before.clone()
    out = gm.apply_token_bitmask_inplace(logits, bitmask)
    assert out is logits, "in place: the same tensor comes back"
    # On CUDA with triton importable, the default path is the kernel (it fell back otherwise).
    kernel = device == "cuda" and path == "default" and triton_importable()
    assert (_triton.LAUNCHES > launches) == kernel and not (kernel and _triton.DISABLED)
    assert logits.dtype == before.dtype and logits.device == before.device
    host, ref = logits.float().cpu(), before.float().cpu()
    for r in range(4):
        finite = set(torch.isfinite(host[r]).nonzero().flatten().tolist())
        assert finite == allowed[r], f"row {r}"
        keep = sorted(allowed[r])
        assert torch.equal(host[r, keep], ref[r, keep]), "allowed logits keep their values"
        assert bool((host[r][~torch.isfinite(host[r])] == float("-inf")).all())

    # `indices`: only row 1 of the bitmask, onto row 1 of the logits.
    only = before.clone()
    gm.apply_token_bitmask_inplace(only, bitmask, indices=[1])
    only = only.float().cpu()
    assert torch.equal(only[0], ref[0]) and torch.equal(only[2], ref[2])
    assert set(torch.isfinite(only[1]).nonzero().flatten().tolist()) == allowed[1]

    # One row, and the copying variant (which leaves its input alone).
    one = before[0].clone()
    gm.apply_token_bitmask_inplace(one, bitmask[0])
    assert set(torch.isfinite(one.float().cpu()).nonzero().flatten().tolist()) == allowed[0]
    copy = gm.apply_token_bitmask(before, bitmask)
    assert torch.equal(copy.float().cpu(), host) and bool(torch.isfinite(before).all())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_apply_leaves_padded_logits_past_vocab_size(qwen3, device):
    torch = torch_on(device)
    bm = filled_rows(qwen3)
    width = bm.shape[1] * 32 + 64  # a model's padded head, wider than the bitmask covers
    logits = torch.zeros(4, width, device=device)
    with pytest.raises(gm.VocabularyMismatchError):
        gm.apply_token_bitmask_inplace(logits.clone(), bm)
    gm.apply_token_bitmask_inplace(logits, bm, vocab_size=qwen3.vocab_size)
    host = logits.cpu()
    assert bool(torch.isfinite(host[:, qwen3.vocab_size :]).all()), "the tail is left alone"
    finite = set(torch.isfinite(host[0, : qwen3.vocab_size]).nonzero().flatten().tolist())
    assert finite == unpack_xgrammar(bm[0], qwen3.vocab_size)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_transformers_processor_decodes_on_the_scores_device(qwen3, device):
    torch = torch_on(device)
    import jsonschema

    from grammask.contrib.transformers import LogitsProcessor

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 3, "maximum": 999},
            "s": {"enum": ["x", "yz"]},
        },
        "required": ["n", "s"],
        "additionalProperties": False,
    }
    batch = 3
    proc = LogitsProcessor(gm.CompiledConstraint.json_schema(qwen3, schema))
    prompt = qwen3.encode("JSON:")
    ids = torch.tensor([prompt] * batch, device=device)
    eos = set(qwen3.eos_token_ids)
    g = torch.Generator().manual_seed(3)
    done = [False] * batch
    for _ in range(120):
        scores = torch.randn(batch, qwen3.vocab_size, generator=g).to(device)
        scores = proc(ids, scores)
        assert scores.device == ids.device
        nxt = scores.argmax(-1, keepdim=True)
        # transformers pads rows that have finished; do the same with the first EOS id.
        for r in range(batch):
            if done[r]:
                nxt[r, 0] = qwen3.eos_token_ids[0]
        ids = torch.cat([ids, nxt], dim=1)
        done = [d or int(t) in eos for d, t in zip(done, nxt[:, 0].tolist())]
        if all(done):
            break
    assert all(done), "every row reaches EOS within 120 steps"
    for row in ids[:, len(prompt) :].tolist():
        body = row[: min(i for i, t in enumerate(row) if t in eos)]
        jsonschema.validate(json.loads(b"".join(qwen3.token_bytes(t) for t in body)), schema)
