"""The operand conversions of arithmetic_emulation.py on float32 bit patterns, as hardware
performs them, a numpy float32 conv and Winograd F(m x m, 3 x 3): the half that needs no torch
(a fake compiler run once per bisect step, or a numpy engine of the engines tests, imports it
and starts in a fraction of a second)."""
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


def winograd_matrices(m: int, points: str = "lavin") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """B^T, G, A^T of F(m x m, 3 x 3), exact in float64: the matrices NNPACK and cuDNN use
    (points 0, +-1, +-2, +-1/2), or points="onednn": oneDNN's F(4x4,3x3) (0, +-5/8, +-3/2; benchdnn's
    ref_wino.cpp trans_I/W/O_4x4_3x3 as matrices)."""
    if points == "onednn":
        bt = [[0.87890625, 0, -2.640625, 0, 1, 0], [0, -1.40625, -2.25, 0.625, 1, 0],
              [0, 1.40625, -2.25, -0.625, 1, 0], [0, -0.5859375, -0.390625, 1.5, 1, 0],
              [0, 0.5859375, -0.390625, -1.5, 1, 0], [0, 0.87890625, 0, -2.640625, 0, 1]]
        g = [[256 / 225, 0, 0], [-2048 / 2975, -256 / 595, -32 / 119], [-2048 / 2975, 256 / 595, -32 / 119],
             [128 / 1071, 64 / 357, 32 / 119], [128 / 1071, -64 / 357, 32 / 119], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 0], [0, .625, -.625, 1.5, -1.5, 0], [0, .390625, .390625, 2.25, 2.25, 0],
              [0, .244140625, -.244140625, 3.375, -3.375, 1]]
        return np.array(bt, np.float64), np.array(g, np.float64), np.array(at, np.float64)
    if m == 2:
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        g = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
    elif m == 4:
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
              [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
             [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
    else:
        a, b = 21 / 4, 17 / 4
        bt = [[1, 0, -a, 0, a, 0, -1, 0], [0, 1, 1, -b, -b, 1, 1, 0], [0, -1, 1, b, -b, -1, 1, 0],
              [0, .5, .25, -2.5, -1.25, 2, 1, 0], [0, -.5, .25, 2.5, -1.25, -2, 1, 0], [0, 2, 4, -2.5, -5, .5, 1, 0],
              [0, -2, 4, 2.5, -5, -.5, 1, 0], [0, -1, 0, a, 0, -a, 0, 1]]
        g = [[1, 0, 0], [-2 / 9, -2 / 9, -2 / 9], [-2 / 9, 2 / 9, -2 / 9], [1 / 90, 1 / 45, 2 / 45],
             [1 / 90, -1 / 45, 2 / 45], [32 / 45, 16 / 45, 8 / 45], [32 / 45, -16 / 45, 8 / 45], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, .5, -.5, 0], [0, 1, 1, 4, 4, .25, .25, 0],
              [0, 1, -1, 8, -8, 1 / 8, -1 / 8, 0], [0, 1, 1, 16, 16, 1 / 16, 1 / 16, 0],
              [0, 1, -1, 32, -32, 1 / 32, -1 / 32, 1]]
    return np.array(bt, np.float64), np.array(g, np.float64), np.array(at, np.float64)


def conv_winograd(x: np.ndarray, w: np.ndarray, m: int, padding: int = 1, dtype: type = np.float32,
                  points: str = "lavin") -> np.ndarray:
    """Winograd F(m x m, 3 x 3) of a stride-1 3x3 conv, every stage in `dtype` (float32: as an
    engine computes it; float64: to check the matrices give the conv)."""
    bt, g, at = (a.astype(dtype) for a in winograd_matrices(m, points))
    n = m + 2
    N, C, H, W = x.shape
    oh, ow = H + 2 * padding - 2, W + 2 * padding - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((N, C, th * m + 2, tw * m + 2), dtype)
    xp[:, :, padding:padding + H, padding:padding + W] = x
    d = np.lib.stride_tricks.sliding_window_view(xp, (n, n), axis=(2, 3))[:, :, ::m, ::m]  # N C th tw n n
    v = np.matmul(np.matmul(bt, d.astype(dtype)), bt.T)                                      # B^T d B
    u = np.matmul(np.matmul(g, w.astype(dtype)), g.T)                                        # O C n n
    mm = np.einsum("ocij,ncabij->noabij", u, v).astype(dtype)                                 # sum over c
    y = np.matmul(np.matmul(at, mm), at.T)                                                   # N O th tw m m
    y = y.transpose(0, 1, 2, 4, 3, 5).reshape(N, w.shape[0], th * m, tw * m)
    return np.ascontiguousarray(y[:, :, :oh, :ow]).astype(np.float32)
