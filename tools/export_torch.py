#!/usr/bin/python3
"""Export a PyTorch model to ONNX twice, for `foldcheck accuracy-diff`:

  MODEL.onnx          the model in eval mode with its BatchNorms kept (no constant folding)
  MODEL_folded.onnx   the same model after PyTorch folds every Conv -> BatchNorm pair
                      (torch.nn.utils.fusion.fuse_conv_bn_eval), as PyTorch users fold
  x.npy               a seeded float32 input
  y.npy, y_folded.npy PyTorch's float32 outputs of both models on x

Run with Debian's interpreter (python3-torch, python3-torchvision):

  /usr/bin/python3 tools/export_torch.py --model resnet18 --out DIR [--seed 0] [--batch 1]
      [--size 224] [--corrupt LAYER:CHANNEL:REL]

--model takes a torchvision model name (weights are random: nothing is downloaded; the
BatchNorms get random running statistics, gamma and beta so that the fold is not trivial).
--corrupt scales one output channel of one folded conv (its weights and bias) by (1 + REL),
e.g. layer1.0.conv1:5:60e-6, to produce a folded model foldcheck must reject.
The test suite does not need PyTorch; this script is for users and for the README.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torchvision


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
            m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
            m.weight.data.copy_(0.5 + torch.rand(c, generator=gen))
            m.bias.data.copy_(0.1 * torch.randn(c, generator=gen))


def fold_all(model):
    """Fold every Conv2d followed by a BatchNorm2d in a module's children (torchvision
    ResNet-style naming: convN + bnN, and downsample.0 + downsample.1)."""
    folded = 0
    for parent in model.modules():
        names = dict(parent.named_children())
        for name, child in list(names.items()):
            if not isinstance(child, torch.nn.Conv2d):
                continue
            bn_name = name.replace("conv", "bn") if name.startswith("conv") else None
            if bn_name is None and name.isdigit():
                bn_name = str(int(name) + 1)
            bn = names.get(bn_name)
            if isinstance(bn, torch.nn.BatchNorm2d):
                setattr(parent, name, torch.nn.utils.fusion.fuse_conv_bn_eval(child, bn))
                setattr(parent, bn_name, torch.nn.Identity())
                folded += 1
    return folded


def export(model, x, path):
    # PRESERVE (with the model in eval mode) exports inference BatchNormalization nodes;
    # EVAL would let the exporter fold them into the convs itself.
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--corrupt", help="LAYER:CHANNEL:REL, e.g. layer1.0.conv1:5:60e-6")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gen = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)
    model = getattr(torchvision.models, a.model)(weights=None)
    randomize_bn(model, gen)
    model.eval()
    x = torch.randn(a.batch, 3, a.size, a.size, generator=gen)
    base = os.path.join(a.out, a.model)
    with torch.no_grad():
        y = model(x)
        export(model, x, base + ".onnx")
        folded = fold_all(model)
        if a.corrupt:
            layer, channel, rel = a.corrupt.split(":")
            conv = dict(model.named_modules())[layer]
            conv.weight[int(channel)] *= 1 + float(rel)
            if conv.bias is not None:
                conv.bias[int(channel)] *= 1 + float(rel)
        y_folded = model(x)
        export(model, x, base + "_folded.onnx")
    np.save(os.path.join(a.out, "x.npy"), x.numpy())
    np.save(os.path.join(a.out, "y.npy"), y.numpy())
    np.save(os.path.join(a.out, "y_folded.npy"), y_folded.numpy())
    print(f"{base}.onnx, {base}_folded.onnx ({folded} Conv+BN pairs folded), x.npy, y.npy, y_folded.npy in {a.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
