"""grammask: exact per-step token masks for grammar-constrained decoding.

A ``Vocabulary`` (a tokenizer's tokens as bytes, its EOS ids, the logits width) → a
``CompiledConstraint`` (free-form JSON, JSON Schema, regex or GBNF; compiled once, shared by
threads and picklable) → one ``Matcher`` per request, whose ``fill_next_token_bitmask`` writes
the allowed tokens into an int32 bitmask in XGrammar's layout (bit ``i % 32`` of word
``i // 32``, LSB first). ``fill_next_token_bitmask_batch`` fills many rows on a thread pool
with the GIL released. Framework adapters live in ``grammask.contrib`` (transformers, mlx-lm,
a vLLM-style backend). The manual is ``docs/python.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._bitmask import allocate_token_bitmask, apply_token_bitmask, apply_token_bitmask_inplace
from ._errors import (
    CompileError,
    GrammaskError,
    InvalidTokenError,
    RollbackError,
    VocabularyError,
    VocabularyMismatchError,
)
from ._grammask import (
    CompiledConstraint,
    Matcher,
    Vocabulary,
    __version__,
    fill_next_token_bitmask_batch,
)


def structural_tag(
    vocab: Vocabulary,
    tags: Sequence[Any],
    triggers: Sequence[str],
    **options: Any,
) -> CompiledConstraint:
    """Structural tags, the shape of XGrammar's ``Grammar.from_structural_tag(tags, triggers)``:
    free text in which completing a trigger commits the output to one of ``tags`` whose
    ``begin`` starts with it; its content must validate against the tag's JSON Schema, then its
    ``end`` follows, then free text again.

    Each tag is a mapping or an object (XGrammar's ``StructuralTagItem``) with ``begin``,
    ``schema`` (a JSON Schema as ``dict``, ``bool`` or JSON text) and ``end``. ``options``:
    ``at_least_one``, ``stop_after_first``, ``max_tags``, ``rollback_history``, ``mask_cache``.
    Raises ``CompileError`` for a schema that does not compile or tags that conflict (a
    ``begin`` no trigger starts, two triggers one a prefix of the other).
    """
    items = []
    for t in tags:
        get = t.get if isinstance(t, Mapping) else (lambda k, t=t: getattr(t, k))
        schema = get("schema")
        if isinstance(schema, str):
            schema = json.loads(schema)
        items.append({"begin": get("begin"), "schema": schema, "end": get("end")})
    spec = json.dumps({"tags": items, "triggers": list(triggers)})
    return CompiledConstraint.structural_tag(vocab, spec, **options)


__all__ = [
    "Vocabulary",
    "CompiledConstraint",
    "Matcher",
    "allocate_token_bitmask",
    "apply_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmask_batch",
    "structural_tag",
    "GrammaskError",
    "CompileError",
    "InvalidTokenError",
    "VocabularyMismatchError",
    "VocabularyError",
    "RollbackError",
    "__version__",
]
