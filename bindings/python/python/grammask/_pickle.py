"""Unpickling helpers: a ``Vocabulary`` pickles as its *recipe* (how it was loaded) and a
``CompiledConstraint`` as its source, options and vocabulary; unpickling loads and compiles
again. Vocabularies are cached per recipe, so a worker that receives many constraints over one
tokenizer loads it once.

A recipe that names a file (``tokenizer_json``, ``gguf``) needs that file at the same path
where it is unpickled (the usual case on a serving cluster with one image or a shared volume);
``from_hf_tokenizer`` recipes carry the tokenizer's JSON itself.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_vocabularies: dict[tuple, Any] = {}


def vocabulary_from_recipe(recipe: tuple) -> Any:
    """The vocabulary ``recipe`` describes, loaded once per process."""
    from ._grammask import Vocabulary

    key = tuple(tuple(x) if isinstance(x, list) else x for x in recipe)
    with _lock:
        cached = _vocabularies.get(key)
    if cached is not None:
        return cached
    kind = recipe[0]
    if kind == "tokenizer_json":
        _, path, config_path, vocab_size, eos, *cache = recipe
        vocab = Vocabulary.from_tokenizer_json(
            path,
            config_path=config_path,
            vocab_size=vocab_size,
            eos_token_ids=eos,
            cache=cache[0] if cache else None,
        )
    elif kind == "gguf":
        _, path, vocab_size = recipe
        vocab = Vocabulary.from_gguf(path, vocab_size=vocab_size)
    elif kind == "hf_tokenizer":
        _, json_text, config, vocab_size, eos = recipe
        vocab = _from_json_text(json_text, config, vocab_size, eos)
    elif kind == "embedded":
        _, vocab_size, *cache = recipe
        vocab = Vocabulary.embedded(vocab_size=vocab_size, cache=cache[0] if cache else None)
    else:
        raise ValueError(f"unknown vocabulary recipe {kind!r}")
    with _lock:
        return _vocabularies.setdefault(key, vocab)


class _JsonTokenizer:
    """Stands in for a ``tokenizers.Tokenizer`` whose JSON is already at hand."""

    def __init__(self, text: str) -> None:
        self._text = text

    def to_str(self) -> str:
        return self._text


def _from_json_text(text: str, config: str | None, vocab_size: int | None, eos: list[int]) -> Any:
    from ._grammask import Vocabulary

    return Vocabulary.from_hf_tokenizer(
        _JsonTokenizer(text), config=config, vocab_size=vocab_size, eos_token_ids=eos
    )


def constraint_from_source(ctor: str, vocab: Any, source: str | None, options: dict) -> Any:
    """Compile again what ``CompiledConstraint.__reduce__`` stored."""
    from ._grammask import CompiledConstraint

    make = getattr(CompiledConstraint, ctor)
    if source is None:
        return make(vocab, **options)
    return make(vocab, source, **options)
