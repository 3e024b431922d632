#!/usr/bin/env python3
"""Export a PyTorch model to ONNX twice, for `foldcheck accuracy-diff` and `foldcheck engines`:

  NAME.onnx           the model in eval mode with its BatchNorms kept (no constant folding)
  NAME_folded.onnx    the same model after a PyTorch fuser folds every Conv -> BatchNorm pair
  x.npy               a seeded float32 input
  y.npy, y_folded.npy PyTorch's float32 outputs of both models on x

Run with the project's environment (after `tools/bootstrap.sh test`; torch and torchvision are
pinned there):

  .venv/bin/python tools/export_torch.py --model resnet18 --out DIR [--seed 0] [--batch 1]
      [--size 224] [--fuser fuse_conv_bn_eval] [--corrupt LAYER:CHANNEL:REL]
  .venv/bin/python tools/export_torch.py --model mypackage.nets:TinyNet --kwargs '{"width": 16}' \\
      --input-shape 1,3,32,32 --out DIR [--state-dict weights.pt]

--model takes a torchvision model name, or any nn.Module by import path, MODULE:ATTRIBUTE (a class
or a function returning the module, called with --kwargs; MODULE is imported from the current
directory or PYTHONPATH). Weights are the model's own (random for torchvision: nothing is
downloaded) or --state-dict's; without --state-dict the BatchNorms get random running
statistics, gamma and beta (--keep-bn leaves them), so that the fold is not trivial.
--fuser: fuse_conv_bn_eval (default), fuse_modules, fx, jit.freeze or torch.compile
(foldcheck.torch reads the last two's folded constants back into the model). --corrupt scales
one output channel of one folded conv (weights and bias) by (1 + REL), e.g.
layer1.0.conv1:5:60e-6, to produce a folded model foldcheck must reject.
"""
import argparse
import copy
import importlib
import json
import os
import sys

import numpy as np
import torch

import foldcheck.torch as fct


def load_model(spec, kwargs):
    """A torchvision name, or MODULE:ATTRIBUTE called with kwargs."""
    if ":" in spec:
        module, _, attr = spec.partition(":")
        sys.path.insert(0, os.getcwd())
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        model = obj(**kwargs) if callable(obj) and not isinstance(obj, torch.nn.Module) else obj
    else:
        import torchvision  # noqa: PLC0415

        model = getattr(torchvision.models, spec)(weights=None, **kwargs)
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"export_torch: {spec} gave a {type(model).__name__}, not a torch.nn.Module")
    return model


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)) and m.affine \
                and m.track_running_stats:
            c = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))  # type: ignore[union-attr]  # tracked: not None
            m.running_var.copy_(0.5 + torch.rand(c, generator=gen))  # type: ignore[union-attr]
            m.weight.data.copy_(0.5 + torch.rand(c, generator=gen))
            m.bias.data.copy_(0.1 * torch.randn(c, generator=gen))


def fold(model, x, fuser):
    """The model after `fuser`, as an nn.Module with the folded parameters (exportable)."""
    pairs = fct.conv_bn_pairs(model, x)
    if fuser == "fuse_modules":
        return torch.ao.quantization.fuse_modules(copy.deepcopy(model), pairs), len(pairs)
    if fuser == "fx":
        import torch.fx.experimental.optimization as fx  # noqa: PLC0415

        return fx.fuse(copy.deepcopy(model)), len(pairs)
    if fuser in ("jit.freeze", "torch.compile"):
        fused = torch.jit.freeze(torch.jit.script(copy.deepcopy(model))) if fuser == "jit.freeze" \
            else torch.compile(copy.deepcopy(model))
        return fct._fused_module(model, fused, x)[0], len(pairs)
    fused = copy.deepcopy(model)
    mods = dict(fused.named_modules())
    for conv, bn in pairs:
        for name, new in ((conv, torch.nn.utils.fusion.fuse_conv_bn_eval(mods[conv], mods[bn])),
                          (bn, torch.nn.Identity())):
            parent, _, attr = name.rpartition(".")
            setattr(mods[parent] if parent else fused, attr, new)
    return fused, len(pairs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18", help="torchvision name, or MODULE:ATTRIBUTE")
    ap.add_argument("--kwargs", default="{}", help="JSON object of arguments for the model's constructor")
    ap.add_argument("--state-dict", help="load these weights (torch.save of a state_dict)")
    ap.add_argument("--keep-bn", action="store_true", help="keep the BatchNorms' statistics as built")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--input-shape", help="N,C,H,W (default: BATCH,3,SIZE,SIZE)")
    ap.add_argument("--fuser", default="fuse_conv_bn_eval",
                    choices=["fuse_conv_bn_eval", "fuse_modules", "fx", "jit.freeze", "torch.compile"])
    ap.add_argument("--corrupt", help="LAYER:CHANNEL:REL, e.g. layer1.0.conv1:5:60e-6")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)
    model = load_model(a.model, json.loads(a.kwargs))
    if a.state_dict:
        model.load_state_dict(torch.load(a.state_dict, map_location="cpu"))
    elif not a.keep_bn:
        with torch.no_grad():
            randomize_bn(model, gen)
    model.eval()
    shape = [int(v) for v in a.input_shape.split(",")] if a.input_shape else [a.batch, 3, a.size, a.size]
    x = torch.randn(*shape, generator=gen)
    base = os.path.join(a.out, a.model.rpartition(":")[2].rpartition(".")[2] or a.model)
    with torch.no_grad():
        y = model(x)
        fct.export_onnx(model, x, base + ".onnx")
        folded, pairs = fold(model, x, a.fuser)
        if a.corrupt:
            layer, channel, rel = a.corrupt.split(":")
            conv = folded.get_submodule(layer)
            conv.weight[int(channel)] *= 1 + float(rel)
            if conv.bias is not None:
                conv.bias[int(channel)] *= 1 + float(rel)
        y_folded = folded(x)
        fct.export_onnx(folded, x, base + "_folded.onnx")
    np.save(os.path.join(a.out, "x.npy"), x.numpy())
    np.save(os.path.join(a.out, "y.npy"), y.numpy())
    np.save(os.path.join(a.out, "y_folded.npy"), y_folded.numpy())
    print(f"{base}.onnx, {base}_folded.onnx ({pairs} Conv+BN pairs folded by {a.fuser}), x.npy, y.npy, y_folded.npy "
          f"in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
