"""Masks from Python equal masks from Rust, token by token: each case walks a document through
a constraint with the Rust CLI (`grammask walk --dump-masks`, the engine's own `TokenMask`
words) and through `Matcher.fill_next_token_bitmask` / `accept_token`, and compares every
step's row word for word — several constraints, several tokenizers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import grammask as gm
from conftest import REPO, rust_walk, vocabulary

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["name", "age"],
}

# (id, CLI flags, how Python compiles the same constraint, document)
CASES = [
    ("json", ["--json"], lambda v: gm.CompiledConstraint.json_object(v),
     '{"name": "Café", "n": [1, 2.5e3, true, null], "o": {"x": "y"}}'),
    ("schema", ["--schema", "SCHEMA"], lambda v: gm.CompiledConstraint.json_schema(v, SCHEMA),
     '{"name": "Ada", "age": 36, "tags": ["a", "b"]}'),
    ("regex", ["--regex", r"[0-9]{3}-[0-9]{4}( ext\. [0-9]+)?"],
     lambda v: gm.CompiledConstraint.regex(v, r"[0-9]{3}-[0-9]{4}( ext\. [0-9]+)?"),
     "555-0199 ext. 42"),
    ("gbnf", ["--grammar", str(REPO / "grammars" / "arithmetic.gbnf")],
     lambda v: gm.CompiledConstraint.gbnf(v, (REPO / "grammars" / "arithmetic.gbnf").read_text()),
     "(1+2)*3-4/5"),
]


@pytest.mark.parametrize("tokenizer", ["qwen3-embedded", "llama3", "gemma3", "llama2"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_masks_equal_the_rust_masks_step_by_step(tokenizer, case, tmp_path):
    name, flags, compile_py, document = case
    if "SCHEMA" in flags:
        path = tmp_path / "schema.json"
        path.write_text(json.dumps(SCHEMA))
        flags = [str(path) if f == "SCHEMA" else f for f in flags]
    tokens, rust_masks, report = rust_walk(tokenizer, flags, document)
    assert report["accepted"], f"{name}: the document is valid ({report})"
    vocab = vocabulary(tokenizer)
    matcher = gm.Matcher(compile_py(vocab))
    bitmask = gm.allocate_token_bitmask(3, vocab.vocab_size)
    assert rust_masks.shape == (len(tokens) + 1, bitmask.shape[1])
    for step, token in enumerate(tokens + [None]):
        row = step % 3  # different rows of one bitmask, as a batch would use them
        matcher.fill_next_token_bitmask(bitmask, row)
        got = bitmask[row].view(np.uint32)
        if not np.array_equal(got, rust_masks[step]):
            diff = np.nonzero(got != rust_masks[step])[0][:5]
            pytest.fail(f"{tokenizer}/{name} step {step}: words {diff.tolist()} differ")
        if token is not None:
            assert matcher.accept_token(token), f"step {step}: token {token} accepted"
    assert matcher.is_accepting()
    eos = vocab.eos_token_ids[0]
    final = bitmask[len(tokens) % 3].view(np.uint32)
    assert (final[eos // 32] >> (eos % 32)) & 1 == 1, "EOS is allowed at the end"
