"""``LogitsProcessor`` for Hugging Face transformers' ``generate(..., logits_processor=[...])``.

One matcher per batch row. The first call sees the prompt; every later call first feeds each
row's newest token to its matcher, then fills the rows' masks on the thread pool (GIL
released) and sets forbidden logits to ``-inf`` (on the scores' device). Rows whose matcher has
accepted EOS are left unmasked, as transformers pads finished rows itself.

When the scores are on a CUDA device, the bitmask is filled in page-locked (pinned) host
memory and copied to a device-resident bitmask asynchronously, as vLLM does; the next call
waits for that copy (a CUDA event) before it fills the host rows again.

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
        # CUDA scores: the pinned host tensor `_bitmask` views, its device copy, and the event
        # recorded after the copy was queued.
        self._pinned: Any = None
        self._device_bitmask: Any = None
        self._copied: Any = None

    @classmethod
    def from_json_schema(
        cls,
        vocab: Any,
        schema: Any,
        *,
        profile: str = "generation",
        n_threads: int | None = None,
        **options: Any,
    ) -> "LogitsProcessor":
        """A processor for a JSON Schema, compiled under the generation profile by default
        (the subset a model finishes, every output valid; ``profile="exact"`` for the schema's
        whole language). ``options`` are ``CompiledConstraint.json_schema``'s."""
        compiled = CompiledConstraint.json_schema(vocab, schema, profile=profile, **options)
        return cls(compiled, n_threads=n_threads)

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
            width = max(max(m.vocab_size for m in self._matchers), int(scores.shape[-1]))
            self._bitmask = self._allocate(batch, width, scores)
        else:
            last = input_ids[:, -1].tolist()
            for row, (m, token) in enumerate(zip(self._matchers, last)):
                if not m.is_terminated() and not m.accept_token(int(token)):
                    raise GrammaskError(f"row {row}: token {token} is refused by the constraint")
        assert self._bitmask is not None
        live = [i for i, m in enumerate(self._matchers) if not m.is_terminated()]
        if self._copied is not None:
            self._copied.synchronize()  # the last step's copy has read the pinned rows
        self._bitmask.fill(-1)
        fill_next_token_bitmask_batch(
            [self._matchers[i] for i in live], self._bitmask, self._n_threads, live
        )
        if self._device_bitmask is None:
            return apply_token_bitmask_inplace(scores, self._bitmask)
        import torch

        self._device_bitmask.copy_(self._pinned, non_blocking=True)
        self._copied.record(torch.cuda.current_stream(scores.device))
        return apply_token_bitmask_inplace(scores, self._device_bitmask)

    def _allocate(self, batch: int, width: int, scores: Any) -> np.ndarray:
        """The host bitmask the rows are filled into: pinned memory viewed as numpy when the
        scores are on a CUDA device, else a plain numpy array."""
        device = getattr(scores, "device", None)
        if getattr(device, "type", None) != "cuda":
            return allocate_token_bitmask(batch, width)
        import torch

        words = (width + 31) // 32
        self._pinned = torch.full((batch, words), -1, dtype=torch.int32, pin_memory=True)
        self._device_bitmask = torch.empty((batch, words), dtype=torch.int32, device=device)
        self._copied = torch.cuda.Event()
        return self._pinned.numpy()
