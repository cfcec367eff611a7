"""A structured-output backend with the method set of vLLM's V1 engine.

Mirrors ``vllm/v1/structured_output/backend_types.py`` of vLLM v0.10.1.1 (the V1 engine's ABCs;
checked against that release's API page and the source at vllm-project/vllm commit d26c81b6);
later releases keep the methods and add ``find_jump_string``, also provided:

- ``StructuredOutputBackend(vllm_config, tokenizer, vocab_size)``:
  ``compile_grammar(request_type, grammar_spec) -> StructuredOutputGrammar``,
  ``allocate_token_bitmask(max_num_seqs) -> Tensor``, ``destroy()``.
- ``StructuredOutputGrammar``: ``accept_tokens(request_id, tokens) -> bool``,
  ``validate_tokens(tokens) -> list[int]``, ``rollback(num_tokens)``,
  ``fill_bitmask(bitmask, batch_index)``, ``is_terminated()``, ``reset()``,
  ``find_jump_string() -> str | None``.

``request_type`` is vLLM's ``StructuredOutputOptions`` (matched by member name, so vLLM's own
enum works) or the mirror ``StructuredOutputOptions`` here: ``JSON`` (a JSON Schema text),
``JSON_OBJECT``, ``REGEX``, ``GRAMMAR`` (GBNF), ``CHOICE`` (a JSON list of strings),
``STRUCTURAL_TAG`` (the spec vLLM v0.10.1.1 hands its XGrammar backend: ``{"structures":
[{"begin", "schema", "end"}, ...], "triggers": [...]}``, compiled by ``grammask.structural_tag``;
XGrammar's later ``{"type": "structural_tag", "format": ...}`` form raises
``NotImplementedError``). The class does not subclass
vLLM's ABCs, so this module never imports vLLM; registering it in a vLLM build means adding it
to that build's backend switch (``vllm/v1/structured_output/__init__.py``).
"""

from __future__ import annotations

import enum
import json
from typing import Any


from .. import (
    CompiledConstraint,
    Matcher,
    Vocabulary,
    allocate_token_bitmask,
    fill_next_token_bitmask_batch,
    structural_tag,
)


class StructuredOutputOptions(enum.Enum):
    """The request types of vLLM's ``StructuredOutputOptions``, by the same names."""

    JSON = enum.auto()
    JSON_OBJECT = enum.auto()
    REGEX = enum.auto()
    GRAMMAR = enum.auto()
    CHOICE = enum.auto()
    STRUCTURAL_TAG = enum.auto()


_REGEX_META = set(r"\.+*?()|[]{}^$#&-~")


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


class GrammaskGrammar:
    """The request-level object (vLLM's ``StructuredOutputGrammar``) over one ``Matcher``."""

    def __init__(self, matcher: Matcher) -> None:
        self.matcher = matcher
        self.num_processed_tokens = 0

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Feed ``tokens`` in order; ``False`` at the first refused one (those before it stay
        accepted, as in vLLM's XGrammar backend)."""
        for token in tokens:
            if not self.matcher.accept_token(token):
                return False
            self.num_processed_tokens += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest accepted prefix of ``tokens``, without advancing the state."""
        accepted = 0
        for token in tokens:
            if not self.matcher.accept_token(token):
                break
            accepted += 1
        if accepted:
            self.matcher.rollback(accepted)
        return list(tokens[:accepted])

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` tokens (``RollbackError`` past the history kept)."""
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        """Write this request's mask into row ``batch_index`` of ``bitmask`` (int32, CPU)."""
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        """Has the request accepted EOS?"""
        return self.matcher.is_terminated()

    def reset(self) -> None:
        """Back to the start of the output."""
        self.matcher.reset()
        self.num_processed_tokens = 0

    def find_jump_string(self) -> str | None:
        """The text the constraint forces next, or ``None`` when nothing is."""
        return self.matcher.find_jump_forward_string() or None


class GrammaskBackend:
    """The engine-level object (vLLM's ``StructuredOutputBackend``). ``tokenizer`` is a
    transformers fast tokenizer, a ``tokenizers.Tokenizer`` or a ``grammask.Vocabulary``;
    ``vocab_size`` is the model's logits width."""

    def __init__(self, vllm_config: Any, tokenizer: Any, vocab_size: int) -> None:
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        if isinstance(tokenizer, Vocabulary):
            if tokenizer.vocab_size != vocab_size:
                from .._errors import VocabularyMismatchError

                raise VocabularyMismatchError(
                    f"the vocabulary is {tokenizer.vocab_size} wide, the model {vocab_size}"
                )
            self.vocab = tokenizer
        else:
            self.vocab = Vocabulary.from_hf_tokenizer(tokenizer, vocab_size=vocab_size)

    def compile_grammar(self, request_type: Any, grammar_spec: str) -> GrammaskGrammar:
        """Compile ``grammar_spec`` as ``request_type`` (see the module docs). Raises
        ``CompileError`` for a spec that does not compile."""
        kind = getattr(request_type, "name", str(request_type))
        if kind == "JSON":
            # The generation profile (closed objects, plain numbers, canonical whitespace),
            # as XGrammar (vLLM's default backend) generates in strict mode; vLLM's
            # `disable_additional_properties` and `disable_any_whitespace` are honoured.
            closed, compact = self._schema_knobs()
            compiled = CompiledConstraint.json_schema(
                self.vocab,
                grammar_spec,
                profile="generation",
                closed_objects=closed,
                whitespace="compact" if compact else None,
            )
        elif kind == "JSON_OBJECT":
            compiled = CompiledConstraint.json_object(self.vocab)
        elif kind == "REGEX":
            compiled = CompiledConstraint.regex(self.vocab, grammar_spec)
        elif kind == "GRAMMAR":
            compiled = CompiledConstraint.gbnf(self.vocab, grammar_spec)
        elif kind == "CHOICE":
            choices = json.loads(grammar_spec)
            pattern = "|".join(f"(?:{_escape(str(c))})" for c in choices)
            compiled = CompiledConstraint.regex(self.vocab, pattern)
        elif kind == "STRUCTURAL_TAG":
            compiled = self._structural_tag(grammar_spec)
        else:
            raise ValueError(f"unknown structured output request type {request_type!r}")
        return GrammaskGrammar(Matcher(compiled))

    def _schema_knobs(self) -> tuple[bool | None, bool]:
        """vLLM's ``structured_outputs_config`` knobs: ``disable_additional_properties``
        (``True`` closes objects; unset or ``False``: the generation profile's default, closed
        where the schema says nothing) and ``disable_any_whitespace``."""
        config = getattr(self.vllm_config, "structured_outputs_config", None)
        closed = True if getattr(config, "disable_additional_properties", False) is True else None
        compact = getattr(config, "disable_any_whitespace", False) is True
        return closed, compact

    def _structural_tag(self, grammar_spec: str) -> CompiledConstraint:
        """vLLM v0.10.1.1's structural-tag spec, as its XGrammar backend reads it: each of
        ``structures`` becomes a tag (``begin``, ``schema``, ``end``) behind ``triggers``."""
        spec = json.loads(grammar_spec)
        if not isinstance(spec, dict) or "structures" not in spec:
            raise NotImplementedError(
                "structural tag spec without `structures`: only vLLM's "
                '{"structures": [{"begin", "schema", "end"}], "triggers": [...]} form is '
                "supported, not XGrammar's format objects"
            )
        if not isinstance(spec.get("triggers"), list):
            raise ValueError("structural tag spec: `triggers` must be a list of strings")
        return structural_tag(self.vocab, spec["structures"], spec["triggers"])

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """An int32 ``[max_num_seqs, ceil(vocab_size / 32)]`` bitmask, all allowed: a torch
        tensor when torch is importable (what vLLM holds), else a numpy array."""
        bitmask = allocate_token_bitmask(max_num_seqs, self.vocab_size)
        try:
            import torch
        except ImportError:
            return bitmask
        return torch.from_numpy(bitmask)

    def fill_bitmasks(
        self, grammars: list[GrammaskGrammar], bitmask: Any, n_threads: int | None = None
    ) -> None:
        """Fill row ``i`` with ``grammars[i]``'s mask for the whole batch at once, on a thread
        pool with the GIL released (vLLM's batched fill; not part of the ABC)."""
        fill_next_token_bitmask_batch([g.matcher for g in grammars], bitmask, n_threads)

    def destroy(self) -> None:
        """Nothing to release: matchers and pools are freed with their objects."""


__all__ = ["GrammaskBackend", "GrammaskGrammar", "StructuredOutputOptions"]
