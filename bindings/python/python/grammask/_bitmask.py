"""Token bitmasks as serving stacks hold them, and applying them to logits.

Layout (XGrammar's, vLLM's and grammask's ``TokenMask``): a bitmask is an int32 array of shape
``[batch, ceil(vocab_size / 32)]``; token ``i`` of row ``b`` is allowed iff bit ``i % 32``
(least significant first) of word ``bitmask[b, i // 32]`` is set.

``apply_token_bitmask_inplace`` sets the logits of forbidden tokens to ``-inf`` on numpy arrays
and torch tensors (any device: the bitmask is moved to the logits' device). MLX arrays are
immutable, so for them use ``apply_token_bitmask``, which returns a new array (and works for
numpy and torch too).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._errors import VocabularyMismatchError

_SHIFTS = np.arange(32, dtype=np.uint32)


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """An int32 bitmask of shape ``[batch_size, ceil(vocab_size / 32)]``, all tokens allowed
    (every bit set, as XGrammar allocates it). Wrap it with ``torch.from_numpy`` for a tensor
    sharing its memory."""
    if batch_size < 0 or vocab_size < 0:
        raise ValueError("batch_size and vocab_size must be >= 0")
    return np.full((batch_size, (vocab_size + 31) // 32), -1, dtype=np.int32)


def _allowed_numpy(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """bool ``[rows, vocab_size]``: the bits of ``bitmask`` unpacked (from the formula)."""
    words = np.ascontiguousarray(bitmask, dtype=np.int32).view(np.uint32)
    bits = (words[..., :, None] >> _SHIFTS) & 1
    return bits.reshape(*words.shape[:-1], -1)[..., :vocab_size].astype(bool)


def _check(vocab_size: int, words: int) -> None:
    if words * 32 < vocab_size:
        raise VocabularyMismatchError(
            f"bitmask rows cover {words * 32} tokens, the logits have {vocab_size}"
        )


def _rows(indices: Sequence[int] | None, n: int) -> Any:
    """The rows to apply: `indices`, or the first `n` (a bitmask allocated for the largest
    batch, as vLLM keeps one, applies to a smaller batch of logits)."""
    return slice(0, n) if indices is None else list(indices)


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: int | None = None,
    indices: Sequence[int] | None = None,
) -> Any:
    """Set ``logits[b, i] = -inf`` wherever bit ``i`` of ``bitmask[b]`` is clear, in place, and
    return ``logits``. ``logits``: ``[batch, vocab]`` or ``[vocab]`` (numpy array or torch
    tensor); ``bitmask``: ``[batch, words]`` or ``[words]`` (numpy or torch). ``vocab_size``
    (XGrammar's argument) masks only the first ``vocab_size`` logits of each row and leaves the
    rest; ``indices`` applies row ``indices[k]`` of the bitmask to row ``indices[k]`` of the
    logits only.

    Raises ``VocabularyMismatchError`` when the bitmask covers fewer tokens than the logits row,
    ``TypeError`` for an MLX array (immutable: use ``apply_token_bitmask``). A bitmask with
    more rows than the logits applies its first rows."""
    module = type(logits).__module__
    if module.startswith("mlx"):
        raise TypeError("MLX arrays are immutable: use grammask.apply_token_bitmask(logits, bitmask)")
    if vocab_size is not None and vocab_size < logits.shape[-1]:
        # A view: writing through it is writing into `logits`.
        apply_token_bitmask_inplace(logits[..., :vocab_size], bitmask, indices=indices)
        return logits
    if module.startswith("torch"):
        return _apply_torch(logits, bitmask, indices)
    if not isinstance(logits, np.ndarray):
        raise TypeError(f"logits must be a numpy array or a torch tensor, not {type(logits)!r}")
    bm = np.asarray(bitmask)
    vocab = logits.shape[-1]
    _check(vocab, bm.shape[-1])
    if logits.ndim == 1:
        allowed = _allowed_numpy(bm.reshape(-1), vocab)
        logits[~allowed] = -np.inf
        return logits
    rows = _rows(indices, logits.shape[0])
    allowed = _allowed_numpy(bm[rows], vocab)
    sub = logits[rows]
    sub[~allowed] = -np.inf
    logits[rows] = sub
    return logits


def _apply_torch(logits: Any, bitmask: Any, indices: Sequence[int] | None) -> Any:
    import torch

    bm = bitmask if isinstance(bitmask, torch.Tensor) else torch.from_numpy(np.asarray(bitmask))
    bm = bm.to(device=logits.device, dtype=torch.int32)
    vocab = logits.shape[-1]
    _check(vocab, bm.shape[-1])
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((bm.unsqueeze(-1) >> shifts) & 1).reshape(*bm.shape[:-1], -1)[..., :vocab].bool()
    if logits.dim() == 1:
        logits.masked_fill_(~allowed.reshape(-1), float("-inf"))
        return logits
    if indices is None:
        logits.masked_fill_(~allowed[: logits.shape[0]], float("-inf"))
    else:
        rows = torch.as_tensor(list(indices), device=logits.device)
        logits[rows] = logits[rows].masked_fill(~allowed[rows], float("-inf"))
    return logits


def apply_token_bitmask(logits: Any, bitmask: Any) -> Any:
    """``logits`` with ``-inf`` wherever the bitmask forbids a token, as a new array: MLX
    arrays (``mx.where``), numpy arrays and torch tensors (a copy)."""
    module = type(logits).__module__
    if module.startswith("mlx"):
        import mlx.core as mx

        bm = np.asarray(bitmask)
        vocab = logits.shape[-1]
        _check(vocab, bm.shape[-1])
        allowed = _allowed_numpy(bm.reshape(-1, bm.shape[-1]) if logits.ndim > 1 else bm.reshape(-1), vocab)
        if logits.ndim > 1 and allowed.shape[0] != logits.shape[0]:
            allowed = allowed[: logits.shape[0]]
        return mx.where(mx.array(allowed), logits, mx.array(float("-inf"), dtype=logits.dtype))
    if module.startswith("torch"):
        return _apply_torch(logits.clone(), bitmask, None)
    return apply_token_bitmask_inplace(np.array(logits, copy=True), bitmask)
