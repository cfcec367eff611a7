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

from typing import Any, NoReturn

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


def structural_tag(*args: Any, **kwargs: Any) -> NoReturn:
    """Structural tags (tool-call tags around JSON bodies) are not in this release: they come
    with the Rust structural-tag constraint (issue 17). Raises ``NotImplementedError``."""
    raise NotImplementedError(
        "grammask.structural_tag is not available yet: it lands with the structural-tag "
        "constraint (issue 17); use json_schema, regex or gbnf meanwhile"
    )


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
