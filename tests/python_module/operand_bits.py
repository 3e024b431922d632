"""The operand conversions of arithmetic_emulation.py on float32 bit patterns, as hardware
performs them, and a numpy float32 conv: the half that needs no torch (a fake compiler run once
per bisect step imports it and starts in a fraction of a second)."""
from __future__ import annotations

import numpy as np


def _drop_bits(a: np.ndarray, drop: int, mode: str) -> np.ndarray:
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    mask = np.uint64((1 << drop) - 1)
    low, base = b & mask, b & ~mask
    half = np.uint64(1 << (drop - 1))
    step = np.uint64(1 << drop)
    if mode == "truncate":
        r = base
    elif mode == "nearest-away":
        r = np.where(low >= half, base + step, base)
    else:  # nearest-even
        odd = (base >> np.uint64(drop)) & np.uint64(1)
        r = np.where((low > half) | ((low == half) & (odd == 1)), base + step, base)
    return r.astype(np.uint32).view(np.float32)


def tf32(a: np.ndarray, mode: str = "nearest-away") -> np.ndarray:
    return _drop_bits(a, 13, mode)


def bf16(a: np.ndarray, mode: str = "nearest-even") -> np.ndarray:
    return _drop_bits(a, 16, mode)


def keep_bits(a: np.ndarray, bits: int) -> np.ndarray:
    """float32 rounded (nearest-even) to `bits` significand bits: a conversion one step worse."""
    return _drop_bits(a, 24 - bits, "nearest-even")


def fp16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def conv_numpy(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    """A float32 conv without padding in numpy alone (its sums in float32 through sgemm, in
    BLAS's order): for a fake compiler that starts fast."""
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.tensordot(win, w.astype(np.float32), axes=([1, 4, 5], [1, 2, 3]))  # N OH OW O
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)).astype(np.float32)
