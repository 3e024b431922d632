#!/usr/bin/env python3
"""Fold a conv + BatchNorm with real TVM and write what TVM computed.

  tvm_fold.py --weights W.npy [--gamma G.npy --beta B.npy --mean M.npy --var V.npy] [--eps E] OUTDIR
  tvm_fold.py --seed OUTDIR      the TVM forum thread's workload (below)

What TVM does: the PyPI releases the project's machines reach (apache-tvm 0.25-0.27) carry
no Relay; Relax folds inference BatchNorm with FoldBatchnormToConv2D (a rewrite to
s = gamma / sqrt(var + float32(eps)), w' = w * s, b' = beta - mean * s, as ops) and
FoldConstant (TVM compiles and runs those ops on the CPU in float32: the values are TVM's own).
Relay's SimplifyInference + FoldScaleAxis, the thread's pipeline, computed
s = (1 / sqrt(var + eps)) * gamma instead (foldcheck's `tvm` recipe); Relax's division form is
foldcheck's `onnxruntime` recipe. For a fresh BatchNorm (gamma 1, var 1) both give the same
bits: the thread's three weights come out of TVM 0.27 exactly as the thread printed them.

Writes OUTDIR/weights.npy (the conv weights, OIHW float32), OUTDIR/folded_weights.npy and
OUTDIR/folded_bias.npy (TVM's), OUTDIR/bn.json (the BatchNorm's parameters and eps, and TVM's
version and passes). Exit 2 with a message when TVM does not fold the layer.
The seed: the thread's printed weights 2.1122932, 5.5735774, 2.0870073 in one output channel
(a [1, 1, 1, 3] kernel), TVM create_workload's fresh BatchNorm, eps 1e-5; folded at opt_level 3
the thread saw 2.1122828, 5.5735493, 2.0869968.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bisect_layer import FRESH, load, per_channel

PASSES = ("FoldBatchnormToConv2D", "FoldConstant")
SEED_WEIGHTS = [2.1122932, 5.5735774, 2.0870073]


def _tvm():
    """tvm and tvm.relax, loaded on first use (--help and a refused argument answer first)."""
    import tvm  # noqa: PLC0415
    from tvm import relax  # noqa: PLC0415

    return tvm, relax


def conv_bn_module(w, bn, eps, x_shape=None):
    """A Relax function x -> batch_norm(conv2d(x, w))[0] with every parameter a constant; the
    conv pads (K - 1) / 2 on each side (foldcheck's default), x is NCHW float32."""
    _, relax = _tvm()
    o, c, kh, kw = w.shape
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(tuple(x_shape or (1, c, kh + 2, kw + 2)), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=[(kh - 1) // 2, (kw - 1) // 2]))
            n = bb.emit(relax.op.nn.batch_norm(y, *(relax.const(bn[k]) for k in ("gamma", "beta", "mean", "var")),
                                               axis=1, epsilon=eps, training=False))  # Relax defaults to training
            out = bb.emit_output(relax.TupleGetItem(n, 0))
        bb.emit_func_output(out)
    return bb.get()


def tvm_fold(w, bn, eps):
    """TVM's folded weights and bias: the constants of conv2d + add after the passes."""
    tvm, relax = _tvm()
    with tvm.transform.PassContext(opt_level=3):
        folded = tvm.transform.Sequential([getattr(relax.transform, p)() for p in PASSES])(conv_bn_module(w, bn, eps))
    calls = [b.value for b in folded["main"].body.blocks[0].bindings]
    ops = [c.op.name for c in calls]
    if ops != ["relax.nn.conv2d", "relax.add"]:
        sys.exit(f"tvm_fold.py: TVM {tvm.__version__} did not fold the layer into conv2d + add (got {ops})")
    return calls[0].args[1].value.numpy(), calls[1].args[1].value.numpy().reshape(-1)


def parameters(ap, a, o):
    """The BatchNorm's parameters: each a .npy (one value, or one per output channel) or the
    fresh BatchNorm's value."""
    return {k: per_channel(ap, f"--{k} {getattr(a, k)}", load(ap, "--" + k, getattr(a, k)) if getattr(a, k) else v, o)
            for k, v in FRESH.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", action="store_true", help="the TVM forum thread's workload")
    ap.add_argument("--weights", help="conv weights, OIHW .npy")
    for k in ("gamma", "beta", "mean", "var"):
        ap.add_argument("--" + k, help=f"BatchNorm {k}, one per output channel (.npy); default: a fresh BatchNorm's")
    ap.add_argument("--eps", type=float, default=1e-5, help="BatchNorm epsilon (default 1e-5, PyTorch's and TVM's)")
    a = ap.parse_args()
    if a.seed == bool(a.weights):
        ap.error("give --seed or --weights")
    if not np.isfinite(a.eps) or a.eps <= 0:
        ap.error(f"--eps must be finite and > 0, got {a.eps}")
    w = np.array(SEED_WEIGHTS, np.float32).reshape(1, 1, 1, 3) if a.seed else load(ap, "--weights", a.weights, 4)
    bn = parameters(ap, a, w.shape[0])
    fw, fb = tvm_fold(w, bn, a.eps)
    tvm, _ = _tvm()
    os.makedirs(a.outdir, exist_ok=True)
    np.save(os.path.join(a.outdir, "weights.npy"), w)
    np.save(os.path.join(a.outdir, "folded_weights.npy"), fw)
    np.save(os.path.join(a.outdir, "folded_bias.npy"), fb)
    for k, v in bn.items():
        np.save(os.path.join(a.outdir, k + ".npy"), v)
    with open(os.path.join(a.outdir, "bn.json"), "w") as f:
        json.dump({"eps": a.eps, "tvm": tvm.__version__, "passes": list(PASSES), "opt_level": 3}, f, indent=1)
    print(f"TVM {tvm.__version__} ({', '.join(PASSES)}, opt_level 3): folded {fw.size} weights into {a.outdir}")
    if a.seed:
        print("folded: " + ", ".join(f"{v:.8g}" for v in fw.reshape(-1)))


if __name__ == "__main__":
    main()
