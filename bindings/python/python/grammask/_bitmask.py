"""Token bitmasks as serving stacks hold them, and applying them to logits.

Layout (XGrammar's, vLLM's and grammask's ``TokenMask``): a bitmask is an int32 array of shape
``[batch, ceil(vocab_size / 32)]``; token ``i`` of row ``b`` is allowed iff bit ``i % 32``
(least significant first) of word ``bitmask[b, i // 32]`` is set.

``apply_token_bitmask_inplace`` sets the logits of forbidden tokens to ``-inf`` on numpy arrays
and torch tensors (any device: the bitmask is moved to the logits' device; a Triton kernel on
CUDA, see ``_triton.py``). MLX arrays are
immutable, so for them use ``apply_token_bitmask``, which returns a new array (and works for
numpy and torch too).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _triton
from ._errors import VocabularyMismatchError
from ._grammask import apply_bitmask_rows


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """An int32 bitmask of shape ``[batch_size, ceil(vocab_size / 32)]``, all tokens allowed
    (every bit set, as XGrammar allocates it). Wrap it with ``torch.from_numpy`` for a tensor
    sharing its memory."""
    if batch_size < 0 or vocab_size < 0:
        raise ValueError("batch_size and vocab_size must be >= 0")
    return np.full((batch_size, (vocab_size + 31) // 32), -1, dtype=np.int32)


def _forbidden_numpy(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """bool ``[rows, vocab_size]``, True where a token is forbidden: the bits of ``bitmask``
    unpacked from the formula. The words are read as little-endian bytes, so bit ``i % 8`` of
    byte ``i // 8`` of a row is token ``i`` (``unpackbits`` with ``bitorder="little"``)."""
    words = np.ascontiguousarray(bitmask, dtype="<i4")
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")[..., :vocab_size]
    return bits == 0


def _check(vocab_size: int, words: int) -> None:
    if words * 32 < vocab_size:
        raise VocabularyMismatchError(
            f"bitmask rows cover {words * 32} tokens, the logits have {vocab_size}"
        )


def _check_rows(logit_rows: int, bitmask_rows: int, indices: Sequence[int] | None) -> None:
    """A row past either array is an ``IndexError``; without ``indices``, a bitmask with fewer
    rows than the logits a ``ValueError`` (a 1-D bitmask or logits count as one row)."""
    if indices is None:
        if bitmask_rows < logit_rows:
            raise ValueError(f"bitmask has {bitmask_rows} rows, the logits {logit_rows}")
        return
    for i in indices:
        if not 0 <= int(i) < min(logit_rows, bitmask_rows):
            raise IndexError(
                f"row {int(i)} is out of range: the logits have {logit_rows} rows, "
                f"the bitmask {bitmask_rows}"
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
    ``TypeError`` for an MLX array (immutable: use ``apply_token_bitmask``), ``ValueError``
    for a bitmask with fewer rows than the logits and ``IndexError`` for an index past either.
    A bitmask with more rows than the logits applies its first rows.

    numpy float32/float64/float16 logits with a contiguous last axis are masked by a native
    loop (GIL released); CUDA tensors by one Triton kernel when triton is importable
    (``GRAMMASK_TRITON=0`` turns it off), other torch tensors by torch ops on their device."""
    module = type(logits).__module__
    if module.startswith("mlx"):
        raise TypeError(
            "MLX arrays are immutable: use grammask.apply_token_bitmask(logits, bitmask)"
        )
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
    n_rows = logits.shape[0] if logits.ndim == 2 else 1
    _check_rows(n_rows, bm.shape[0] if bm.ndim == 2 else 1, indices)
    if logits.ndim in (1, 2) and bm.ndim in (1, 2) and bm.dtype.itemsize == 4:
        # Native: float32 / float64 / float16 with a contiguous last axis (else False).
        rows = list(range(n_rows)) if indices is None else [int(i) for i in indices]
        if apply_bitmask_rows(logits, np.ascontiguousarray(bm), rows, vocab):
            return logits
    if logits.ndim == 1:
        np.copyto(logits, -np.inf, where=_forbidden_numpy(bm.reshape(-1), vocab))
        return logits
    rows = _rows(indices, logits.shape[0])
    forbidden = _forbidden_numpy(bm[rows], vocab)
    if isinstance(rows, slice):
        np.copyto(logits[rows], -np.inf, where=forbidden)  # a view of `logits`
    else:
        sub = logits[rows]  # a copy (fancy indexing): written back
        np.copyto(sub, -np.inf, where=forbidden)
        logits[rows] = sub
    return logits


_BIT_VALUES: dict[Any, Any] = {}


def _bit_values(torch: Any, device: Any) -> Any:
    """uint8 ``[1, 2, 4, ..., 128]`` on ``device``, made once per device."""
    t = _BIT_VALUES.get(device)
    if t is None:
        t = torch.tensor([1 << i for i in range(8)], dtype=torch.uint8, device=device)
        _BIT_VALUES[device] = t
    return t


def _apply_torch(logits: Any, bitmask: Any, indices: Sequence[int] | None) -> Any:
    import torch

    bm = bitmask if isinstance(bitmask, torch.Tensor) else torch.from_numpy(np.asarray(bitmask))
    bm = bm.to(device=logits.device, dtype=torch.int32).contiguous()
    vocab = logits.shape[-1]
    _check(vocab, bm.shape[-1])
    n_rows = logits.shape[0] if logits.dim() == 2 else 1
    _check_rows(n_rows, bm.shape[0] if bm.dim() == 2 else 1, indices)
    index_tensor = None
    if indices is not None:
        rows = [int(i) for i in indices]
        index_tensor = torch.tensor(rows, dtype=torch.int32, device=logits.device)
    # One Triton kernel on CUDA when triton is there (grammask/_triton.py), else torch ops.
    if _triton.try_apply(logits, bm, index_tensor, torch):
        return logits
    # The words' bytes, least significant first (torch runs on little-endian hosts), tested
    # against the eight bit values: two elementwise kernels, one byte per token.
    octets = bm.view(torch.uint8)
    bits = octets.unsqueeze(-1) & _bit_values(torch, logits.device)
    forbidden = (bits == 0).reshape(*bm.shape[:-1], -1)[..., :vocab]
    if logits.dim() == 1:
        logits.masked_fill_(forbidden.reshape(-1)[:vocab], float("-inf"))
        return logits
    if indices is None:
        logits.masked_fill_(forbidden[: logits.shape[0]], float("-inf"))
    else:
        rows = index_tensor.long()
        logits[rows] = logits[rows].masked_fill(forbidden[rows], float("-inf"))
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
        forbidden = _forbidden_numpy(
            bm.reshape(-1, bm.shape[-1]) if logits.ndim > 1 else bm.reshape(-1), vocab
        )
        if logits.ndim > 1 and forbidden.shape[0] != logits.shape[0]:
            forbidden = forbidden[: logits.shape[0]]
        return mx.where(mx.array(forbidden), mx.array(float("-inf"), dtype=logits.dtype), logits)
    if module.startswith("torch"):
        return _apply_torch(logits.clone(), bitmask, None)
    return apply_token_bitmask_inplace(np.array(logits, copy=True), bitmask)
