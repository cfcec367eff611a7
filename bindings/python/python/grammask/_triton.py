"""One Triton kernel for ``apply_token_bitmask_inplace`` on CUDA tensors: each program reads a
block of a row's bitmask words and stores ``-inf`` where a token's bit is clear.

The torch-ops version (unpack the bytes against the eight bit values, compare, ``masked_fill_``)
is three kernels and their launches; on an H200 it took 43-101 µs a call (medians, synchronised)
where this one took 28-73 µs and XGrammar 0.2.9's own kernel 34-85 µs, batch 1 to 64 at 151,936
and 262,144 logits, float32 and bfloat16 (docs/python.md). XGrammar applies its bitmasks on CUDA
the same way.

Used when triton is importable, the logits are on a CUDA device with a contiguous last axis
and one of float32 / float16 / bfloat16, and ``GRAMMASK_TRITON`` is not ``0``. If the kernel
cannot be compiled or launched (no compiler for the device, say), the failure is remembered
and the torch-ops version is used from then on.
"""

from __future__ import annotations

import os
from typing import Any

# Set when the kernel failed once (or GRAMMASK_TRITON=0): the torch-ops path is used.
DISABLED = os.environ.get("GRAMMASK_TRITON", "1") == "0"
# Kernel launches so far (the tests check that CUDA tensors went through the kernel).
LAUNCHES = 0
_KERNEL: Any = None
BLOCK = 4096


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def apply_bitmask(
            logits_ptr,
            bitmask_ptr,
            indices_ptr,
            vocab,
            logits_stride,
            words_stride,
            HAS_INDICES: tl.constexpr,
            BLOCK: tl.constexpr,
        ):
            pid = tl.program_id(0)
            row = tl.load(indices_ptr + pid) if HAS_INDICES else pid
            offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            inside = offs < vocab
            words = tl.load(bitmask_ptr + row * words_stride + offs // 32, mask=inside, other=-1)
            clear = ((words >> (offs % 32)) & 1) == 0
            neg = tl.full([BLOCK], float("-inf"), logits_ptr.dtype.element_ty)
            tl.store(logits_ptr + row * logits_stride + offs, neg, mask=inside & clear)

        _KERNEL = (triton, apply_bitmask)
    return _KERNEL


def try_apply(logits: Any, bitmask: Any, indices: Any, torch: Any) -> bool:
    """Apply ``bitmask`` (int32, on the logits' device, ``[rows, words]``) to ``logits``
    (``[rows, vocab]`` or ``[vocab]``) with the kernel; ``indices`` an int32 device tensor of
    rows or None for the first ``logits.shape[0]``. False (nothing written) where the kernel
    does not apply or cannot run; the caller then uses torch ops."""
    global DISABLED, LAUNCHES
    if DISABLED or logits.device.type != "cuda" or logits.stride(-1) != 1:
        return False
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return False
    try:
        triton, kernel = _kernel()
    except Exception:  # noqa: BLE001 - triton missing or broken: the torch path is exact too
        DISABLED = True
        return False
    rows2d = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bm = bitmask.reshape(1, -1) if bitmask.dim() == 1 else bitmask
    vocab = rows2d.shape[-1]
    n = rows2d.shape[0] if indices is None else int(indices.numel())
    if n == 0:
        return True
    grid = (n, triton.cdiv(vocab, BLOCK))
    try:
        kernel[grid](
            rows2d,
            bm,
            indices if indices is not None else bm,
            vocab,
            rows2d.stride(0),
            bm.stride(0),
            HAS_INDICES=indices is not None,
            BLOCK=BLOCK,
        )
    except Exception:  # noqa: BLE001 - no compiler for this device, say: remember, fall back
        DISABLED = True
        return False
    LAUNCHES += 1
    return True
