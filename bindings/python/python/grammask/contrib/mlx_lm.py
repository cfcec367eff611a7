"""``logits_processor(compiled)``: the ``(tokens, logits) -> logits`` callable mlx-lm's
``generate(..., logits_processors=[...])`` (and ``stream_generate``) takes.

mlx-lm passes ``tokens``, every token so far (the prompt, then one more per step), and the
last position's logits ``[1, vocab]``. The first call takes the tokens it sees as the prompt;
each later call feeds the tokens added since to the matcher, fills the mask and returns the
logits with forbidden tokens at ``-inf`` (``mx.where``: MLX arrays are immutable). After EOS the
logits are returned unchanged. Use a new processor per generation.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import CompiledConstraint, GrammaskError, Matcher
from .._bitmask import allocate_token_bitmask, apply_token_bitmask


def logits_processor(compiled: CompiledConstraint) -> Callable[[Any, Any], Any]:
    """A fresh mlx-lm logits processor constraining the generation to ``compiled``. The
    matcher is reachable as the callable's ``matcher`` attribute."""
    matcher = Matcher(compiled)
    state = {"seen": None}

    def process(tokens: Any, logits: Any) -> Any:
        n = int(tokens.shape[-1]) if hasattr(tokens, "shape") else len(tokens)
        if state["seen"] is None:
            state["seen"] = n
        else:
            new = tokens.reshape(-1)[state["seen"] :].tolist() if n > state["seen"] else []
            for token in new:
                if not matcher.is_terminated() and not matcher.accept_token(int(token)):
                    raise GrammaskError(f"token {token} is refused by the constraint")
            state["seen"] = n
        if matcher.is_terminated():
            return logits
        bitmask = allocate_token_bitmask(1, max(matcher.vocab_size, int(logits.shape[-1])))
        matcher.fill_next_token_bitmask(bitmask, 0)
        return apply_token_bitmask(logits, bitmask)

    process.matcher = matcher  # type: ignore[attr-defined]
    return process


def json_schema_logits_processor(
    vocab: Any, schema: Any, *, profile: str = "generation", **options: Any
) -> Callable[[Any, Any], Any]:
    """A logits processor for a JSON Schema, compiled under the generation profile by default
    (the subset a model finishes, every output valid; ``profile="exact"`` for the schema's
    whole language). ``options`` are ``CompiledConstraint.json_schema``'s."""
    return logits_processor(
        CompiledConstraint.json_schema(vocab, schema, profile=profile, **options)
    )
