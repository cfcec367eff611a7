"""The exceptions grammask raises (the native module raises these classes).

``GrammaskError`` is the base of all of them; each also derives from the builtin a caller
would otherwise catch (``ValueError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations


class GrammaskError(Exception):
    """Base class of every grammask error."""

    def __init__(self, message: str, **attrs: object) -> None:
        super().__init__(message)
        for key, value in attrs.items():
            setattr(self, key, value)


class CompileError(GrammaskError, ValueError):
    """A constraint that does not compile.

    Attributes:
        kind: ``"json"``, ``"json_schema"``, ``"regex"`` or ``"gbnf"``.
        keyword: for schemas, the keyword refused (``"$ref"`` for a dangling reference), else None.
        pointer: for schemas, the JSON pointer of the subschema (``""`` is the root), else None.
    """

    kind: str | None
    keyword: str | None
    pointer: str | None

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        keyword: str | None = None,
        pointer: str | None = None,
    ) -> None:
        super().__init__(message, kind=kind, keyword=keyword, pointer=pointer)


class InvalidTokenError(GrammaskError, ValueError):
    """A token id outside ``0..vocab_size`` (or a padding id past the tokenizer's tokens).

    Attributes:
        token_id: the id.
    """

    token_id: int | None

    def __init__(self, message: str, *, token_id: int | None = None) -> None:
        super().__init__(message, token_id=token_id)


class VocabularyMismatchError(GrammaskError, ValueError):
    """A bitmask, logits row or matcher that does not fit the vocabulary's width."""


class VocabularyError(GrammaskError, ValueError):
    """A vocabulary that does not load (unreadable file, bad tokenizer.json or config)."""


class RollbackError(GrammaskError, ValueError):
    """``rollback(n)`` past the history the matcher keeps (``rollback_history``)."""


__all__ = [
    "GrammaskError",
    "CompileError",
    "InvalidTokenError",
    "VocabularyMismatchError",
    "VocabularyError",
    "RollbackError",
]
