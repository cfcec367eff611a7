"""Bad inputs raise the documented exceptions (docs/python.md, "Errors"), and refusals are
`False` with the state unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import grammask as gm


def test_unsupported_schema_keyword_names_keyword_and_pointer(qwen3):
    schema = {"type": "object", "properties": {"x": {"type": "string", "format": "regex"}}}
    with pytest.raises(gm.CompileError) as e:
        gm.CompiledConstraint.json_schema(qwen3, schema)
    assert e.value.kind == "json_schema"
    assert e.value.keyword == "format"
    assert e.value.pointer == "/properties/x"
    assert isinstance(e.value, ValueError) and isinstance(e.value, gm.GrammaskError)


def test_bad_regex_grammar_and_schema_text_are_compile_errors(qwen3):
    with pytest.raises(gm.CompileError) as e:
        gm.CompiledConstraint.regex(qwen3, "(")
    assert e.value.kind == "regex" and e.value.keyword is None
    with pytest.raises(gm.CompileError) as e:
        gm.CompiledConstraint.gbnf(qwen3, "root ::= undefined_rule")
    assert e.value.kind == "gbnf"
    with pytest.raises(gm.CompileError):
        gm.CompiledConstraint.json_schema(qwen3, "{not json")
    with pytest.raises(TypeError):
        gm.CompiledConstraint.json_schema(qwen3, 42)
    with pytest.raises(TypeError):
        gm.CompiledConstraint.json_object(qwen3, no_such_option=1)
    with pytest.raises(ValueError):
        gm.CompiledConstraint.json_schema(qwen3, {}, property_order="sideways")


def test_token_ids_out_of_range_are_invalid_token_errors(qwen3):
    m = gm.Matcher(gm.CompiledConstraint.json_object(qwen3))
    for bad in (-1, qwen3.vocab_size, 2**40):
        with pytest.raises(gm.InvalidTokenError) as e:
            m.accept_token(bad)
        assert e.value.token_id == bad
    padded = gm.Vocabulary.embedded(vocab_size=qwen3.n_tokens + 64)
    with pytest.raises(gm.InvalidTokenError):
        gm.Matcher(gm.CompiledConstraint.json_object(padded)).accept_token(qwen3.n_tokens + 1)
    with pytest.raises(gm.InvalidTokenError):
        qwen3.token_bytes(-5)


def test_refused_tokens_are_false_and_leave_the_state(qwen3):
    m = gm.Matcher(gm.CompiledConstraint.regex(qwen3, "ab"))
    bm0 = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    m.fill_next_token_bitmask(bm0)
    (b_token,) = qwen3.encode("b")
    assert m.accept_token(b_token) is False
    assert m.accept_token(qwen3.eos_token_ids[0]) is False, "EOS before the end"
    assert m.accept_string("x") is False
    bm1 = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    m.fill_next_token_bitmask(bm1)
    assert np.array_equal(bm0, bm1) and m.accepted_tokens == []
    assert m.accept_string("ab") and m.is_accepting()


def test_bitmask_misuse_raises(qwen3):
    m = gm.Matcher(gm.CompiledConstraint.json_object(qwen3))
    narrow = np.zeros((1, 10), dtype=np.int32)
    with pytest.raises(gm.VocabularyMismatchError):
        m.fill_next_token_bitmask(narrow)
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1, 4740), dtype=np.float64))
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask([0, 1, 2])
    ro = gm.allocate_token_bitmask(1, qwen3.vocab_size)
    ro.setflags(write=False)
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(ro)
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(gm.allocate_token_bitmask(2, qwen3.vocab_size * 2)[:, ::2])
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(gm.allocate_token_bitmask(2, qwen3.vocab_size), 2)
    bm = gm.allocate_token_bitmask(2, qwen3.vocab_size)
    with pytest.raises(ValueError):
        gm.fill_next_token_bitmask_batch([m, gm.Matcher(m.compiled)], bm, 2, [1, 1])
    with pytest.raises(gm.VocabularyMismatchError):
        logits = np.zeros((1, qwen3.vocab_size + 64), dtype=np.float32)
        gm.apply_token_bitmask_inplace(logits, bm[:1])


def test_rollback_past_history_and_missing_files(qwen3, tmp_path):
    m = gm.Matcher(gm.CompiledConstraint.json_object(qwen3, rollback_history=2))
    assert m.accept_string("{")
    with pytest.raises(gm.RollbackError):
        m.rollback(5)
    m.rollback(1)
    assert m.accepted_tokens == []
    with pytest.raises(gm.VocabularyError):
        gm.Vocabulary.from_tokenizer_json(tmp_path / "missing.json")
    with pytest.raises(gm.VocabularyError):
        gm.Vocabulary.embedded(vocab_size=10)
    # A structural tag whose schema does not compile names the keyword.
    with pytest.raises(gm.CompileError):
        gm.structural_tag(
            gm.Vocabulary.embedded(),
            [{"begin": "<tool>", "schema": {"type": "strin"}, "end": "</tool>"}],
            ["<tool>"],
        )
    with pytest.raises(ValueError):
        gm.CompiledConstraint.structural_tag(gm.Vocabulary.embedded(), "{\"tags\": 1}")
