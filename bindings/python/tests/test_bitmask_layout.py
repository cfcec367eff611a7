"""The bitmask layout is XGrammar's documented one: int32 `[batch, ceil(vocab_size / 32)]`,
token `i` allowed iff bit `i % 32` of word `i // 32` is set (LSB first). The reference
unpacking below is written from that formula in plain Python, and the allowed set is checked
against an oracle computed from the token bytes alone (no grammask call decides it)."""

from __future__ import annotations

import numpy as np
import pytest

import grammask as gm


def unpack_xgrammar(row: np.ndarray, vocab_size: int) -> set[int]:
    """XGrammar's formula, verbatim: bit i % 32 of int32 word i // 32."""
    words = [int(w) & 0xFFFFFFFF for w in row.tolist()]
    return {i for i in range(vocab_size) if (words[i // 32] >> (i % 32)) & 1}


def test_shape_dtype_and_initial_value_follow_xgrammar():
    bm = gm.allocate_token_bitmask(3, 151_669)
    assert bm.dtype == np.int32 and bm.shape == (3, (151_669 + 31) // 32)
    assert (bm == -1).all(), "allocated all-allowed, as XGrammar does"


def test_bits_are_lsb_first_words_of_32_tokens(qwen3):
    compiled = gm.CompiledConstraint.regex(qwen3, "[ab]+")
    matcher = gm.Matcher(compiled)
    bm = gm.allocate_token_bitmask(2, qwen3.vocab_size)
    assert matcher.fill_next_token_bitmask(bm, 1) is True
    # Oracle: at the start of `[ab]+` a token is allowed iff its bytes are non-empty and all
    # `a`/`b` (EOS is not: the empty output does not match).
    oracle = {
        t
        for t in range(qwen3.n_tokens)
        if (b := qwen3.token_bytes(t)) and set(b) <= {ord("a"), ord("b")}
    }
    assert len(oracle) >= 4
    assert unpack_xgrammar(bm[1], qwen3.vocab_size) == oracle
    assert (bm[0] == -1).all(), "other rows untouched"


def test_padded_vocab_size_keeps_padding_ids_and_tail_bits_clear():
    vocab = gm.Vocabulary.embedded(vocab_size=151_936)  # Qwen3 models' padded logits width
    assert vocab.vocab_size == 151_936 and vocab.n_tokens == 151_669
    matcher = gm.Matcher(gm.CompiledConstraint.json_object(vocab, any_value=True))
    bm = gm.allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(bm, 0)
    allowed = unpack_xgrammar(bm[0], vocab.vocab_size)
    assert allowed and max(allowed) < vocab.n_tokens, "padding ids are never allowed"
    # A row wider than the vocabulary needs: the extra words are cleared.
    wide = np.full((1, bm.shape[1] + 3), -1, dtype=np.int32)
    matcher.fill_next_token_bitmask(wide, 0)
    assert (wide[0, bm.shape[1]:] == 0).all() and (wide[0, : bm.shape[1]] == bm[0]).all()


def test_apply_sets_forbidden_logits_to_minus_infinity(qwen3):
    matcher = gm.Matcher(gm.CompiledConstraint.regex(qwen3, "[0-9]+"))
    bm = gm.allocate_token_bitmask(2, qwen3.vocab_size)
    matcher.fill_next_token_bitmask(bm, 0)
    logits = np.random.default_rng(0).standard_normal((2, qwen3.vocab_size)).astype(np.float32)
    before = logits.copy()
    gm.apply_token_bitmask_inplace(logits, bm)
    allowed = unpack_xgrammar(bm[0], qwen3.vocab_size)
    finite = set(np.nonzero(np.isfinite(logits[0]))[0].tolist())
    assert finite == allowed
    assert np.array_equal(logits[0, sorted(allowed)], before[0, sorted(allowed)])
    assert np.array_equal(logits[1], before[1]), "row 1's bitmask allows everything"
    one = before[0].copy()
    gm.apply_token_bitmask_inplace(one, bm[0])
    assert set(np.nonzero(np.isfinite(one))[0].tolist()) == allowed
    copy = gm.apply_token_bitmask(before, bm)
    assert np.array_equal(copy, logits, equal_nan=True) and np.isfinite(before).all()


def test_a_bitmask_for_the_largest_batch_applies_to_a_smaller_one(qwen3):
    matcher = gm.Matcher(gm.CompiledConstraint.regex(qwen3, "[0-9]+"))
    bm = gm.allocate_token_bitmask(8, qwen3.vocab_size)  # max_num_seqs rows
    matcher.fill_next_token_bitmask(bm, 1)
    logits = np.zeros((3, qwen3.vocab_size), dtype=np.float32)
    gm.apply_token_bitmask_inplace(logits, bm)
    assert np.isfinite(logits[0]).all() and np.isfinite(logits[2]).all()
    assert set(np.nonzero(np.isfinite(logits[1]))[0].tolist()) == unpack_xgrammar(bm[1], qwen3.vocab_size)
    only = np.zeros((3, qwen3.vocab_size), dtype=np.float32)
    gm.apply_token_bitmask_inplace(only, bm, indices=[1])
    assert np.array_equal(only, logits)


def test_vocab_size_masks_only_the_first_logits(qwen3):
    matcher = gm.Matcher(gm.CompiledConstraint.regex(qwen3, "[0-9]+"))
    bm = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    matcher.fill_next_token_bitmask(bm, 0)
    # Logits 64 wider than the bitmask covers: with vocab_size, the tail is left alone.
    logits = np.zeros((1, bm.shape[1] * 32 + 64), dtype=np.float32)
    gm.apply_token_bitmask_inplace(logits, bm, vocab_size=qwen3.vocab_size)
    assert np.isfinite(logits[0, qwen3.vocab_size:]).all()
    finite = set(np.nonzero(np.isfinite(logits[0, : qwen3.vocab_size]))[0].tolist())
    assert finite == unpack_xgrammar(bm[0], qwen3.vocab_size)


def test_native_apply_matches_the_formula_on_every_host_layout(qwen3):
    """numpy logits go through the native loop when it handles them (float32/64/16, a
    contiguous last axis, rows at any stride) and through numpy otherwise; every case must
    forbid exactly the clear bits and leave every other value as it was."""
    digits = gm.CompiledConstraint.regex(qwen3, "[0-9]+")
    bm = gm.allocate_token_bitmask(3, qwen3.vocab_size)
    gm.Matcher(digits).fill_next_token_bitmask(bm, 0)
    m = gm.Matcher(digits)
    assert m.accept_string("7")
    m.fill_next_token_bitmask(bm, 2)  # row 1 stays all-allowed
    allowed = [unpack_xgrammar(bm[r], qwen3.vocab_size) for r in range(3)]
    rng = np.random.default_rng(5)
    base = rng.standard_normal((3, qwen3.vocab_size + 40))
    cases = {
        "float32": base[:, : qwen3.vocab_size].astype(np.float32),
        "float64": base[:, : qwen3.vocab_size].copy(),
        "float16": base[:, : qwen3.vocab_size].astype(np.float16),
        "row-strided view": base.astype(np.float32)[:, : qwen3.vocab_size],
        "column-strided (numpy path)": np.asfortranarray(base[:, : qwen3.vocab_size].astype(np.float32)),
    }
    for name, logits in cases.items():
        before = logits.copy()
        gm.apply_token_bitmask_inplace(logits, bm)
        for r in range(3):
            finite = set(np.nonzero(np.isfinite(logits[r]))[0].tolist())
            assert finite == allowed[r], (name, r)
            keep = sorted(allowed[r])
            assert np.array_equal(logits[r, keep], before[r, keep]), (name, r)
            assert (logits[r][~np.isfinite(logits[r])] == -np.inf).all(), (name, r)
        only = before.copy()
        gm.apply_token_bitmask_inplace(only, bm, indices=[2])
        assert np.array_equal(only[:2], before[:2]), name
        assert set(np.nonzero(np.isfinite(only[2]))[0].tolist()) == allowed[2], name
    # The row-strided view wrote into its base array, and left the 40 columns past it alone.
    wide = base.astype(np.float32)
    gm.apply_token_bitmask_inplace(wide[:, : qwen3.vocab_size], bm)
    assert np.isfinite(wide[:, qwen3.vocab_size :]).all()
    assert set(np.nonzero(np.isfinite(wide[0, : qwen3.vocab_size]))[0].tolist()) == allowed[0]
    # A bitmask with fewer rows than the logits, or a row index past them, is an error.
    with pytest.raises(ValueError):
        gm.apply_token_bitmask_inplace(np.zeros((4, qwen3.vocab_size), np.float32), bm)
    with pytest.raises(IndexError):
        gm.apply_token_bitmask_inplace(np.zeros((3, qwen3.vocab_size), np.float32), bm, indices=[3])
