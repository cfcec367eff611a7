"""``LogitsProcessor`` for Hugging Face transformers' ``generate(..., logits_processor=[...])``.

One matcher per batch row. The first call sees the prompt; every later call first feeds each
row's newest token to its matcher, then fills the rows' masks on the thread pool (GIL
released) and sets forbidden logits to ``-inf`` (on the scores' device). Rows whose matcher has
accepted EOS are left unmasked, as transformers pads finished rows itself.

Greedy search and sampling are supported; beam search (which reorders rows) is not. Build the
``Vocabulary`` with ``vocab_size=model.config.vocab_size`` when the model pads its logits.
torch is imported only when the processor runs.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import CompiledConstraint, GrammaskError, Matcher, fill_next_token_bitmask_batch
from .._bitmask import allocate_token_bitmask, apply_token_bitmask_inplace


class LogitsProcessor:
    """Constrain every row of a batch to ``compiled`` (one constraint for all rows, or one per
    row). Use a new processor per ``generate`` call."""

    def __init__(
        self,
        compiled: CompiledConstraint | Sequence[CompiledConstraint],
        *,
        n_threads: int | None = None,
    ) -> None:
        self._compiled = compiled
        self._n_threads = n_threads
        self._matchers: list[Matcher] | None = None
        self._bitmask: np.ndarray | None = None

    @property
    def matchers(self) -> list[Matcher]:
        """The per-row matchers (after the first call)."""
        return list(self._matchers or [])

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        batch = int(input_ids.shape[0])
        if self._matchers is None:
            compiled = (
                [self._compiled] * batch
                if isinstance(self._compiled, CompiledConstraint)
                else list(self._compiled)
            )
            if len(compiled) != batch:
                raise ValueError(f"{len(compiled)} constraints for a batch of {batch}")
            self._matchers = [Matcher(c) for c in compiled]
            width = max(m.vocab_size for m in self._matchers)
            self._bitmask = allocate_token_bitmask(batch, max(width, int(scores.shape[-1])))
        else:
            last = input_ids[:, -1].tolist()
            for row, (m, token) in enumerate(zip(self._matchers, last)):
                if not m.is_terminated() and not m.accept_token(int(token)):
                    raise GrammaskError(f"row {row}: token {token} is refused by the constraint")
        assert self._bitmask is not None
        live = [i for i, m in enumerate(self._matchers) if not m.is_terminated()]
        self._bitmask.fill(-1)
        fill_next_token_bitmask_batch(
            [self._matchers[i] for i in live], self._bitmask, self._n_threads, live
        )
        return apply_token_bitmask_inplace(scores, self._bitmask)
