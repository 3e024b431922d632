"""Exact emulations of the arithmetics GPUs and mixed-precision engines compute a conv in, for
the tests of `diagnose --arithmetic` (no GPU here): the operand conversions on float32 bit
patterns as hardware performs them (TF32: cvt.rna / cvt.rn / a tensor core dropping the low 13
bits; bf16: 16 bits; fp16: IEEE binary16), products exact in float32, sums in float32 (torch's
CPU conv, whose order is its own) or, for fp16 accumulation, each partial sum rounded to fp16.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from operand_bits import bf16, conv_numpy, fp16, keep_bits, tf32

__all__ = ["bf16", "conv_numpy", "fp16", "keep_bits", "tf32"]  # the torch-free half, re-exported


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, stride: int = 1, padding: int = 0,
         dilation: int = 1, groups: int = 1) -> np.ndarray:
    """torch's CPU float32 conv (its own summation order)."""
    with torch.no_grad():
        return torch.nn.functional.conv2d(
            torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(w)),
            None if b is None else torch.from_numpy(np.ascontiguousarray(b)),
            stride=stride, padding=padding, dilation=dilation, groups=groups).numpy()


def split_bf16(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hi = bf16(a)
    return hi, bf16((np.asarray(a, np.float32) - hi).astype(np.float32))


def conv_bf16x3(x: np.ndarray, w: np.ndarray, **geometry: int) -> np.ndarray:
    """hi*hi' + hi*lo' + lo*hi', each product's conv in float32, added in float32."""
    xh, xl = split_bf16(x)
    wh, wl = split_bf16(w)
    return (conv(xh, wh, **geometry) + conv(xh, wl, **geometry) + conv(xl, wh, **geometry)).astype(np.float32)


def conv_fp16_accumulate(x: np.ndarray, w: np.ndarray, stride: int = 1, padding: int = 0) -> np.ndarray:
    """fp16 operands, products exact, every partial sum rounded to fp16 (in window order)."""
    xt = torch.from_numpy(fp16(x).astype(np.float64))
    cols = torch.nn.functional.unfold(xt, kernel_size=w.shape[2:], padding=padding, stride=stride).numpy()
    wf = fp16(w).reshape(w.shape[0], -1).astype(np.float64)
    n, k, positions = cols.shape
    acc = np.zeros((n, w.shape[0], positions), dtype=np.float16)
    for j in range(k):
        prod = wf[None, :, j, None] * cols[:, None, j, :]  # exact (11 + 11 bits)
        acc = (acc.astype(np.float64) + prod).astype(np.float16)  # one rounding of an exact sum
    oh = (x.shape[2] + 2 * padding - w.shape[2]) // stride + 1
    return acc.astype(np.float32).reshape(n, w.shape[0], oh, -1)


def image_input(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """An image-like input: smooth positive pixels, normalised as ImageNet's preprocessing does."""
    base = rng.random((n, 3, size // 4 + 1, size // 4 + 1))
    img = np.kron(base, np.ones((1, 1, 4, 4)))[:, :, :size, :size] + 0.1 * rng.random((n, 3, size, size))
    return ((img / 1.1 - 0.45) / 0.225).astype(np.float32)


def conv_fft(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, padding: int = 0, groups: int = 1,
             spectrum_bits: int | None = None, scale_in_kernel: bool = False) -> np.ndarray:
    """A stride-1 conv computed as cuDNN's FFT algorithm does, in float32 (numpy >= 2 transforms
    float32 in float32, pocketfft's accurate twiddles): each padded input plane and each kernel
    transformed at the next powers of two, multiplied pointwise (the kernel's transform
    conjugated: a correlation), summed over the group's channels, transformed back.
    spectrum_bits: the input's transform rounded to that many bits (an FFT one step worse).
    scale_in_kernel: the inverse's 1/n folded into the kernel's spectrum (not applied last)."""
    N, C, H, W = x.shape
    n_out, cg, kh, kw = w.shape
    hp, wp = H + 2 * padding, W + 2 * padding
    n1, n2 = 1 << (hp - 1).bit_length(), 1 << (wp - 1).bit_length()
    xp = np.zeros((N, C, hp, wp), np.float32)
    xp[:, :, padding:padding + H, padding:padding + W] = x
    X = np.fft.fft2(xp, s=(n1, n2))
    if spectrum_bits is not None:
        X = (keep_bits(X.real.astype(np.float32), spectrum_bits)
             + 1j * keep_bits(X.imag.astype(np.float32), spectrum_bits)).astype(np.complex64)
    Wf = np.conj(np.fft.fft2(w.astype(np.float32), s=(n1, n2)))
    if scale_in_kernel:
        Wf = (Wf * np.float32(1.0 / (n1 * n2))).astype(np.complex64)
    assert X.dtype == np.complex64 and Wf.dtype == np.complex64
    og = n_out // groups
    y = np.empty((N, n_out, hp - kh + 1, wp - kw + 1), np.float32)
    for o in range(n_out):
        g = o // og
        z = np.sum(X[:, g * cg:(g + 1) * cg] * Wf[o][None], axis=1, dtype=np.complex64)
        inv = np.fft.ifft2(z, norm="forward" if scale_in_kernel else "backward")
        y[:, o] = inv.real.astype(np.float32)[:, :hp - kh + 1, :wp - kw + 1]
    if b is not None:
        y = (y + b.astype(np.float32)[None, :, None, None]).astype(np.float32)
    return y


def tf32_model(model: torch.nn.Module, mode: str = "nearest-away") -> torch.nn.Module:
    """A copy of `model` that computes every Conv2d and Linear as TF32 tensor cores do: its
    weights and each call's input converted to TF32 (bias and activations stay float32), the
    products exact and summed in float32 by torch's CPU kernels."""
    def cvt(t: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(tf32(t.detach().contiguous().numpy(), mode))

    m = copy.deepcopy(model)
    for mod in m.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            with torch.no_grad():
                mod.weight.copy_(cvt(mod.weight))
            mod.register_forward_pre_hook(lambda _m, args: (cvt(args[0]),) + tuple(args[1:]))
    return m
