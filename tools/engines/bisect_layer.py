"""What the compiler adapters of `foldcheck bisect --cmd` share (tvm_bisect.py,
torch_compile_bisect.py): their command line and the layer it names.

The command line: --enabled {enabled} --disabled {disabled} -o {out} (foldcheck's
placeholders: comma-separated pass names, possibly empty, and the output .npy), the layer
(--input X.npy NCHW, --weights W.npy OIHW, --bn BN.npz with gamma, beta, mean, var, eps: a
key left out takes a fresh BatchNorm's value, as foldcheck's own --bn does) and
--inject-bad-eps (the adapter's deliberately broken pass, BadEpsilon).
"""
import argparse

import numpy as np

FRESH = {"gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 1.0}


def parser(doc):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--enabled", default="", help="passes to run, comma-separated ({enabled})")
    ap.add_argument("--disabled", default="", help="passes to leave out, comma-separated ({disabled})")
    ap.add_argument("-o", "--out", required=True, help="the layer's output on the input, .npy ({out})")
    ap.add_argument("--input", required=True, help="the layer's input, NCHW float32 .npy")
    ap.add_argument("--weights", required=True, help="conv weights, OIHW .npy")
    ap.add_argument("--bn", help=".npz with gamma, beta, mean, var, eps (a key left out: a fresh BatchNorm's)")
    ap.add_argument("--inject-bad-eps", action="store_true",
                    help="add BadEpsilon, a pass that sets batch_norm's eps to 1e-3 (for a bisect to find)")
    return ap


def names(text):
    """A placeholder's pass names ('' for none)."""
    return [n for n in (text or "").split(",") if n]


def batchnorm(path, out_channels, default_eps):
    """The BatchNorm's parameters (float32, one per output channel) and eps from an .npz."""
    z = dict(np.load(path)) if path else {}
    bn = {k: np.asarray(z.get(k, np.full(out_channels, v)), np.float32).reshape(out_channels) for k, v in FRESH.items()}
    return bn, float(z.get("eps", default_eps))


def layer(a, default_eps=1e-5):
    """x, w (float32) and the BatchNorm (parameters, eps) the command line names."""
    x, w = np.load(a.input).astype(np.float32), np.load(a.weights).astype(np.float32)
    bn, eps = batchnorm(a.bn, w.shape[0], default_eps)
    return x, w, bn, eps
