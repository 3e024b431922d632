"""A conv + BatchNorm folded in 16 bits by PyTorch itself, judged on its outputs (issue 40, finding 5).

What it guards: torch.nn.utils.fusion.fuse_conv_bn_eval on a .half() or .bfloat16() conv and
BatchNorm computes the fold in that dtype (rv + eps, rsqrt, gamma * r, w * t and the bias
chain each rounded to it); the fused conv's outputs, run in that dtype, are EXPECTED by
foldcheck.torch.diagnose and pass foldcheck.testing.assert_fold_close(outputs, expected,
conv=, bn=, input=) for every seed (before the fix: UNEXPECTED at 1.1-2x the bound in 9 of 10),
while a channel of the fused conv scaled by 1 + 24 u, or a fold made with eps 1e-3 on a
BatchNorm with a small running variance, is UNEXPECTED and fails the assertion.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch.nn.utils.fusion import fuse_conv_bn_eval  # noqa: E402

import foldcheck  # noqa: E402
import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402

DTYPES = {"float16": (torch.float16, 2.0**-11), "bfloat16": (torch.bfloat16, 2.0**-8)}
SEEDS = range(5)


def layer(seed, dtype):
    """A small conv + BatchNorm with trained-like statistics (channel 0: running variance
    0.002), in dtype, and an input."""
    torch.manual_seed(seed)
    conv = torch.nn.Conv2d(8, 6, 3, padding=1, bias=seed % 2 == 0)
    bn = torch.nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.05, 2)
        bn.running_var[0] = 0.002
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    x = torch.randn(2, 8, 8, 8)
    if seed % 2:
        x = x.relu()
    return conv.eval().to(dtype), bn.eval().to(dtype), x.to(dtype)


def outputs(module, x):
    with torch.no_grad():
        return module(x)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", DTYPES)
def test_an_honest_16_bit_fold_is_expected_on_its_outputs(name, seed):
    dtype, _ = DTYPES[name]
    conv, bn, x = layer(seed, dtype)
    fused = fuse_conv_bn_eval(conv, bn)
    assert fused.weight.dtype == dtype
    y = outputs(fused, x)
    r = fct.diagnose(bn, x, y, conv=conv)
    assert r.verdict == foldcheck.Verdict.EXPECTED, r["summary"]
    assert "16-bit" in r["bound"]["formula"]
    assert_fold_close(y, outputs(torch.nn.Sequential(conv, bn), x), conv=conv, bn=bn, input=x)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", DTYPES)
def test_a_corrupted_16_bit_fold_fails_on_its_outputs(name, seed):
    dtype, u = DTYPES[name]
    conv, bn, x = layer(seed, dtype)
    scaled = fuse_conv_bn_eval(conv, bn)
    with torch.no_grad():
        scaled.weight[5] = (scaled.weight[5].double() * (1 + 24 * u)).to(dtype)
    wrong = copy.deepcopy(bn)
    wrong.eps = 1e-3  # Keras's default: channel 0's scale changes by ~20%
    for bad in (scaled, fuse_conv_bn_eval(conv, wrong)):
        y = outputs(bad, x)
        assert fct.diagnose(bn, x, y, conv=conv).verdict == foldcheck.Verdict.UNEXPECTED
        with pytest.raises(AssertionError):
            assert_fold_close(y, None, conv=conv, bn=bn, input=x)
