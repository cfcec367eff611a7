"""Structural tags from Python (`grammask.structural_tag`, XGrammar's `from_structural_tag`
shape): a tool call inside free text is accepted exactly when its body validates against the
tag's schema (judged by `jsonschema`, not grammask), the bitmask agrees with `accept_token`
token by token, and the compiled constraint pickles."""

from __future__ import annotations

import json
import pickle

import jsonschema
import numpy as np

import grammask as gm

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}


class Item:
    """XGrammar's `StructuralTagItem` has attributes, not keys."""

    def __init__(self, begin: str, schema: dict, end: str) -> None:
        self.begin, self.schema, self.end = begin, schema, end


def compiled() -> gm.CompiledConstraint:
    vocab = gm.Vocabulary.embedded()
    return gm.structural_tag(
        vocab, [Item("<function=weather>", SCHEMA, "</function>")], ["<function="]
    )


def walk(c: gm.CompiledConstraint, text: str) -> bool:
    """Walk `text` token by token; every token must be in the bitmask iff accepted."""
    vocab = c.vocab
    m = gm.Matcher(c)
    bm = gm.allocate_token_bitmask(1, c.vocab_size)
    for t in vocab.encode(text):
        m.fill_next_token_bitmask(bm, 0)
        allowed = bool((int(bm[0, t // 32]) >> (t % 32)) & 1)
        ok = m.accept_token(t)
        assert allowed == ok, (text, t)
        if not ok:
            return False
    return m.is_accepting()


def test_calls_are_accepted_exactly_when_their_body_is_valid():
    c = compiled()
    assert c.kind == "tagged"
    cases = [
        {"city": "Oslo", "unit": "c"},
        {"city": "Oslo", "unit": "k"},
        {"city": "Oslo"},
        {"city": 3, "unit": "f"},
    ]
    for body in cases:
        valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(body)
        text = f"Let me check. <function=weather>{json.dumps(body)}</function> Done."
        assert walk(c, text) == valid, body
    assert walk(c, "No call at all.")
    # An unclosed call cannot end the output.
    assert not walk(c, '<function=weather>{"city": "Oslo", "unit": "c"}')


def test_a_structural_tag_pickles_and_masks_alike():
    c = compiled()
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.kind == "tagged"
    text = 'x <function=weather>{"city": "A", "unit": "f"}'
    masks = []
    for cc in (c, c2):
        m = gm.Matcher(cc)
        assert m.accept_string(text)
        bm = gm.allocate_token_bitmask(1, cc.vocab_size)
        m.fill_next_token_bitmask(bm, 0)
        masks.append(bm.copy())
    assert np.array_equal(masks[0], masks[1])
