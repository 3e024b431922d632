#!/usr/bin/env python3
"""PyTorch's torch.compile (Inductor) as the compiler of `foldcheck bisect --cmd`.

  torch_compile_bisect.py --enabled {enabled} --disabled {disabled} -o {out} --input X.npy
                          --weights W.npy [--bn BN.npz] [--inject-bad-eps]

Builds one layer in eval mode — Conv2d (no bias, padding (K - 1) / 2) then BatchNorm2d with
gamma, beta, mean, var, eps from BN.npz (a fresh BatchNorm's for a key left out) — compiles
it with torch.compile under torch.no_grad() and writes its float32 output on X to OUT. The
"passes" are Inductor's own switches (torch._inductor.config), each set True when named in
`{enabled}` and False when named in `{disabled}`:

  freezing                         constant-folds the frozen parameters: the conv + BN fold
  pattern_matcher                  Inductor's pattern rewrites (the freezing fold's patterns)
  efficient_conv_bn_eval_fx_passes the eval conv + BN rewrite of the FX graph
  joint_graph_constant_folding     constant folding of the joint graph

--inject-bad-eps adds the pass BadEpsilon: a pre-grad custom pass (Inductor's own hook,
config.pre_grad_custom_pass) that sets every batch_norm's eps to 1e-3 (Keras' default), so
that a bisect has a real, broken pass to name.
"""
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bisect_layer import layer, names, parser, refuse_unknown

SWITCHES = ["freezing", "pattern_matcher", "efficient_conv_bn_eval_fx_passes", "joint_graph_constant_folding"]


def bad_epsilon_pass(custom_graph_pass):
    """BadEpsilon: every batch_norm call's eps set to 1e-3 (its last positional argument, or `eps=`)."""

    class BadEpsilon(custom_graph_pass):  # type: ignore[valid-type,misc]  # the class given
        def __call__(self, graph):
            for n in graph.nodes:
                if n.op == "call_function" and "batch_norm" in str(n.target):
                    if "eps" in n.kwargs:
                        n.kwargs = {**n.kwargs, "eps": 1e-3}
                    else:
                        n.args = (*n.args[:-1], 1e-3)

        def uuid(self):
            return hashlib.sha256(b"foldcheck BadEpsilon 1e-3").hexdigest()

    return BadEpsilon()


def eval_layer(torch, w, bn, eps):
    o, c, kh, kw = w.shape
    conv = torch.nn.Conv2d(c, o, (kh, kw), padding=((kh - 1) // 2, (kw - 1) // 2), bias=False)
    norm = torch.nn.BatchNorm2d(o, eps=eps)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(w))
        for k, p in (("gamma", norm.weight), ("beta", norm.bias), ("mean", norm.running_mean),
                     ("var", norm.running_var)):
            p.copy_(torch.from_numpy(bn[k]))
    return torch.nn.Sequential(conv, norm).eval()


def main():
    ap = parser(__doc__)
    a = ap.parse_args()
    refuse_unknown(ap, a, SWITCHES + (["BadEpsilon"] if a.inject_bad_eps else []))
    x, w, bn, eps = layer(a, ap)
    import torch  # noqa: PLC0415 (torch loads once the arguments are read)
    import torch._inductor.config as inductor  # noqa: PLC0415
    from torch._inductor.custom_graph_pass import CustomGraphPass  # noqa: PLC0415

    model = eval_layer(torch, w, bn, eps)
    for s in SWITCHES:
        if s in names(a.enabled) or s in names(a.disabled):
            setattr(inductor, s, s in names(a.enabled))
    if "BadEpsilon" in names(a.enabled):
        inductor.pre_grad_custom_pass = bad_epsilon_pass(CustomGraphPass)
    with torch.no_grad():
        y = torch.compile(model)(torch.from_numpy(x))
    np.save(a.out, y.numpy().astype(np.float32))


if __name__ == "__main__":
    main()
