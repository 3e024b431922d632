"""What the PyTorch tests of tests/python_module share: trained-like BatchNorm statistics, a
conv + BatchNorm layer, a two-layer model, a fused conv rebuilt with another geometry, and
PyTorch's fusers as functions of (model, x).

Imported by the test files after `torch = pytest.importorskip("torch")` (pytest puts this
directory on sys.path: it has no __init__.py); not a test file itself.
"""
import copy

import pytest
import torch
import torch.fx.experimental.optimization

import foldcheck.torch as fct

REL = 20e-6  # a channel scaled by 1 + REL: a corruption torch.testing.assert_close's defaults pass
CONVS = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}
BNS = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d, 3: torch.nn.BatchNorm3d}


def trained_like(module, seed):
    """Every BatchNorm in `module` (itself, if it is one) given statistics and affine
    parameters like a trained network's (from a generator seeded `seed`, in module order);
    the module in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, tuple(BNS.values())):
                c = m.num_features
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
    return module.eval()


def trained_like_on(module, seed, x):
    """`module` with BatchNorm statistics of its own activations on the batch `x` (the population
    statistics training leaves, so every channel's activations are centred and scaled as in a
    trained network: with trained_like's random statistics about half of a randomly initialised
    MobileNetV2's channels are zero everywhere after their ReLU6), then trained_like's affine
    parameters (a generator seeded `seed`); the module in eval mode."""
    bns = [m for m in module.modules() if isinstance(m, tuple(BNS.values()))]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: the batch's own statistics
    module.train()
    with torch.no_grad():
        module(x)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in bns:
            m.momentum = 0.1
            m.weight.copy_(0.5 + torch.rand(m.num_features, generator=g))
            m.bias.copy_(0.1 * torch.randn(m.num_features, generator=g))
    return module.eval()


def layer(seed=0, *, rank=2, dtype=torch.float32, out_channels=6, **kw):
    """A conv of 4 input channels (kernel 3, padding 1 unless kw says otherwise) and its
    trained-like BatchNorm, in eval mode and `dtype` (torch seeded `seed` first)."""
    torch.manual_seed(seed)
    conv = CONVS[rank](4, out_channels, **{"kernel_size": 3, "padding": 1, **kw}).eval()
    return conv.to(dtype), trained_like(BNS[rank](out_channels), seed).to(dtype)


class Small(torch.nn.Module):
    """a -> a_bn -> relu -> b -> b_bn, of convs of `rank` spatial dimensions."""

    def __init__(self, rank=2):
        super().__init__()
        self.a, self.a_bn = CONVS[rank](3, 4, 3, padding=1), BNS[rank](4)
        self.b, self.b_bn = CONVS[rank](4, 6, 3, padding=1), BNS[rank](6)

    def forward(self, x):
        return self.b_bn(self.b(torch.relu(self.a_bn(self.a(x)))))


def rebuilt(conv, bn, **geometry):
    """What a hand-written fuser makes when it rebuilds the conv with other attributes: the
    honest fold's weight and bias values in a conv of another geometry."""
    fold = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    kw = dict(in_channels=conv.in_channels, out_channels=conv.out_channels, kernel_size=conv.kernel_size,
              stride=conv.stride, padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
              padding_mode=conv.padding_mode)
    kw.update(geometry)
    f = type(conv)(**kw).eval()
    with torch.no_grad():
        f.weight.copy_(fold.weight)
        f.bias.copy_(fold.bias)
    return f


# PyTorch's fusers, each on a copy of the model (x: what a fuser that runs the model needs).

def by_fuse_modules(model, x=None):
    return torch.ao.quantization.fuse_modules(copy.deepcopy(model), fct.conv_bn_pairs(model))


def by_fx(model, x=None):
    return torch.fx.experimental.optimization.fuse(copy.deepcopy(model))


def by_jit_freeze(model, x=None):
    with pytest.warns(FutureWarning):
        return torch.jit.freeze(torch.jit.script(copy.deepcopy(model)))


def by_compile(model, x=None):
    return torch.compile(copy.deepcopy(model))
