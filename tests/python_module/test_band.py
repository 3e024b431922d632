"""`diagnose`'s calibrated band beside the rigorous bound (issue 42): a change of one channel's
scale far below the per-element bound (5 ppm: the bound is crossed near 1e-3) is seen as a common
factor of the channel's outputs, against what honest computations of the layer reach; honest
outputs of other kernels (PyTorch fused and unfused, channels-last, one thread, a float32 im2col
product) are not flagged; a change of every channel (another eps) is reported as such.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch
from torch_models import trained_like

import foldcheck


def layer(seed, channels=64, size=28):
    """A padded 3x3 conv + BatchNorm of `channels` filters (trained-like statistics) on an input
    after a ReLU (half zeros), as in a ResNet's body."""
    torch.manual_seed(seed)
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1).eval()
    bn = trained_like(torch.nn.BatchNorm2d(channels), seed)
    x = torch.relu(torch.randn(1, channels, size, size))
    return conv, bn, x


def arrays(conv, bn):
    return dict(weight=conv.weight.detach().numpy(), bias=conv.bias.detach().numpy(),
                gamma=bn.weight.detach().numpy(), beta=bn.bias.detach().numpy(), mean=bn.running_mean.numpy(),
                var=bn.running_var.numpy(), eps=np.float32(bn.eps))


def im2col_fused(conv, bn, x):
    """The fused layer as one float32 matrix product over im2col columns (another engine's order)."""
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    cols = torch.nn.functional.unfold(x, 3, padding=1)[0]  # (C*9, H*W)
    w = fused.weight.detach().reshape(fused.out_channels, -1)
    y = (w @ cols + fused.bias.detach()[:, None]).reshape(1, -1, x.shape[2], x.shape[3])
    return y


def honest_outputs(conv, bn, x):
    with torch.no_grad():
        fused = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
        out = {"fused": fused(x), "unfused": bn(conv(x)), "im2col": im2col_fused(conv, bn, x),
               "channels_last": fused.to(memory_format=torch.channels_last)(x.to(memory_format=torch.channels_last))}
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        out["one thread"] = bn(conv(x))
        torch.set_num_threads(threads)
    return {k: v.contiguous().numpy() for k, v in out.items()}


def scaled_channel(conv, bn, x, channel, by):
    with torch.no_grad():
        fused = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
        fused.weight[channel] *= 1 + by
        return fused(x).numpy()


@pytest.mark.parametrize("seed", [0, 1])
def test_honest_outputs_of_other_kernels_stay_within_the_band(seed):
    conv, bn, x = layer(seed)
    for kernel, y in honest_outputs(conv, bn, x).items():
        r = foldcheck.diagnose(x.numpy(), y, **arrays(conv, bn))
        band = r.band
        assert band["computed"] and band["tested"] == 64, kernel
        assert r.verdict == "EXPECTED" and band["beyond_count"] == 0, (kernel, band["worst"])
        # Honest kernels sit well inside: the band is a few times the largest honest rho.
        assert band["worst"]["ratio_to_band"] < 0.7, (kernel, band["worst"])
        assert "would have been seen here" in r.summary


@pytest.mark.parametrize("seed,channel", [(0, 5), (1, 0), (1, 63)])
def test_a_5ppm_change_of_one_channel_is_suspicious_and_named(seed, channel):
    conv, bn, x = layer(seed)
    y = scaled_channel(conv, bn, x, channel, 5e-6)
    r = foldcheck.diagnose(x.numpy(), y, **arrays(conv, bn))
    assert r.get("as_given")["verdict"] == "EXPECTED"  # far inside the per-element bound
    assert r.verdict == "SUSPICIOUS"
    assert [c["channel"] for c in r.band["beyond"]] == [channel]
    assert r.band["beyond"][0]["rho_ppm"] == pytest.approx(5, abs=0.3)
    assert f"channel {channel}'s outputs share a common factor" in r.summary


def test_an_eps_change_moves_every_channel_and_is_reported_as_such():
    conv, bn, x = layer(2)
    other = torch.nn.BatchNorm2d(64, eps=3e-5).eval()
    other.load_state_dict(bn.state_dict())
    with torch.no_grad():
        y = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, other)(x).numpy()
    r = foldcheck.diagnose(x.numpy(), y, **arrays(conv, bn))
    assert r.get("as_given")["verdict"] == "EXPECTED"
    assert r.verdict == "SUSPICIOUS"
    assert r.band["beyond_count"] > 32
    assert "moves every channel" in r.summary


def test_the_command_line_exits_1_naming_the_channel(foldcheck_bin, tmp_path):
    conv, bn, x = layer(0)
    a = arrays(conv, bn)
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "w.npy", a["weight"])
    np.save(tmp_path / "b.npy", a["bias"])
    np.savez(tmp_path / "bn.npz", **{k: a[k] for k in ("gamma", "beta", "mean", "var", "eps")})
    runs = {}
    for name, y in {"honest": honest_outputs(conv, bn, x)["unfused"],
                    "changed": scaled_channel(conv, bn, x, 17, 5e-6)}.items():
        np.save(tmp_path / f"{name}.npy", y)
        runs[name] = subprocess.run([foldcheck_bin, "diagnose", "--input", str(tmp_path / "x.npy"), "--weights",
                                     str(tmp_path / "w.npy"), "--bias", str(tmp_path / "b.npy"), "--bn",
                                     str(tmp_path / "bn.npz"), "--observed", str(tmp_path / f"{name}.npy"), "-q"],
                                    capture_output=True, text=True)
    assert runs["honest"].returncode == 0, runs["honest"].stdout
    assert runs["changed"].returncode == 1
    assert "verdict: SUSPICIOUS — channel 17's outputs share a common factor 1 + 5" in runs["changed"].stdout


def test_the_band_is_not_computed_where_its_honest_computations_do_not_apply():
    conv, bn, x = layer(0, channels=8, size=8)
    a = arrays(conv, bn)
    with torch.no_grad():
        y = bn(conv(x)).numpy()
    for kw, why in [(dict(arithmetic="tf32"), "tf32"), (dict(algorithm="winograd4"), "winograd4")]:
        r = foldcheck.diagnose(x.numpy(), y, **a, **kw)
        assert not r.band["computed"] and why in r.band["not_computed"]
    r = foldcheck.diagnose(x.numpy(), y.astype(np.float16), **a)
    assert not r.band["computed"] and "float16" in r.band["not_computed"]
    with torch.no_grad():
        c = conv(x).numpy()
    r = foldcheck.diagnose(x.numpy(), c, weight=a["weight"], bias=a["bias"])  # a plain conv: its own band
    assert r.band["computed"] and r.verdict == "EXPECTED"
    c[0, 3] *= 1 + 5e-6
    r = foldcheck.diagnose(x.numpy(), c, weight=a["weight"], bias=a["bias"])
    assert r.verdict == "SUSPICIOUS" and r.band["beyond"][0]["channel"] == 3
