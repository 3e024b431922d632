"""What the compiler adapters of `foldcheck bisect --cmd` share (tvm_bisect.py,
torch_compile_bisect.py, tflite_bisect.py) and the fold tools (tvm_fold.py, tflite_fold.py):
their command line, the layer it names, and refusing what they cannot read (exit 2 with the
flag and the file, never a traceback). Nothing here imports a compiler: --help and a refused
argument answer before TVM, torch or TensorFlow load.

The command line: --enabled {enabled} --disabled {disabled} -o {out} (foldcheck's
placeholders: comma-separated pass names, possibly empty, and the output .npy), the layer
(--input X.npy NCHW, --weights W.npy OIHW, --bn BN.npz with gamma, beta, mean, var, eps: a
key left out takes a fresh BatchNorm's value, as foldcheck's own --bn does) and
--inject-bad-eps (the adapter's deliberately broken pass, BadEpsilon). Every adapter builds
the same layer: stride 1, dilation 1, padding (K - 1) / 2 on each side, no conv bias — run
the bisect with foldcheck's defaults for those.
"""
import argparse

import numpy as np

FRESH = {"gamma": 1.0, "beta": 0.0, "mean": 0.0, "var": 1.0}
LAYER = ("The layer: stride 1, dilation 1, padding (K - 1) / 2 on each side, no conv bias (foldcheck bisect's "
         "defaults for --stride, --dilation, --padding; leave out --bias).")


def parser(doc):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], epilog=LAYER)
    ap.add_argument("--enabled", default="", help="passes to run, comma-separated ({enabled})")
    ap.add_argument("--disabled", default="", help="passes to leave out, comma-separated ({disabled})")
    ap.add_argument("-o", "--out", required=True, help="the layer's output on the input, .npy ({out})")
    ap.add_argument("--input", required=True, help="the layer's input, NCHW float32 .npy")
    ap.add_argument("--weights", required=True, help="conv weights, OIHW .npy")
    ap.add_argument("--bn", help=".npz with gamma, beta, mean, var, eps (a key left out: a fresh BatchNorm's)")
    ap.add_argument("--inject-bad-eps", action="store_true",
                    help="add BadEpsilon, a broken pass that gets the BatchNorm's eps wrong (for a bisect to find)")
    return ap


def names(text):
    """A placeholder's pass names ('' for none)."""
    return [n for n in (text or "").split(",") if n]


def refuse_unknown(ap, a, known):
    """Exit 2 when {enabled} or {disabled} names a pass this adapter does not have."""
    unknown = [n for n in names(a.enabled) + names(a.disabled) if n not in known]
    if unknown:
        ap.exit(2, f"{ap.prog}: no pass {', '.join(unknown)} (this adapter's: {', '.join(known)})\n")


def load(ap, flag, path, ndim=None):
    """The float32 array of the .npy a flag names, or exit 2 naming the flag and the file."""
    try:
        raw = np.load(path, allow_pickle=False)
        if raw.dtype.kind not in "fiub":  # a complex or structured array would lose parts silently
            raise ValueError(f"dtype {raw.dtype} is not real numbers")
        v = np.asarray(raw, np.float32)
    except (OSError, ValueError, TypeError, EOFError) as e:
        ap.exit(2, f"{ap.prog}: {flag} {path}: not a real-valued .npy ({e})\n")
    if ndim is not None and v.ndim != ndim:
        ap.exit(2, f"{ap.prog}: {flag} {path}: a {ndim}-D array expected, got shape {list(v.shape)}\n")
    return v


def per_channel(ap, what, value, out_channels):
    """One value, or one per output channel, as float32 [out_channels]; else exit 2."""
    v = np.asarray(value, np.float32).reshape(-1)
    if v.size == 1:
        return np.full(out_channels, v[0], np.float32)
    if v.size != out_channels:
        ap.exit(2, f"{ap.prog}: {what}: {v.size} values for {out_channels} output channels\n")
    return v


def batchnorm(path, out_channels, default_eps, ap):
    """The BatchNorm's parameters (float32, one per output channel) and eps from an .npz, or
    exit 2 through the command line's parser `ap`."""
    try:
        z = dict(np.load(path, allow_pickle=False)) if path else {}
        eps = float(np.asarray(z.get("eps", default_eps)).reshape(-1)[0])
    except (OSError, ValueError, TypeError, EOFError, IndexError) as e:
        ap.exit(2, f"{ap.prog}: --bn {path}: not an .npz of numeric gamma, beta, mean, var, eps ({e})\n")
    if not np.isfinite(eps) or eps <= 0:
        ap.exit(2, f"{ap.prog}: --bn {path}: eps must be finite and > 0, got {eps}\n")
    return {k: per_channel(ap, f"--bn {path}: {k}", z.get(k, v), out_channels) for k, v in FRESH.items()}, eps


def layer(a, ap, default_eps=1e-5):
    """x, w (float32) and the BatchNorm (parameters, eps) the command line names."""
    x, w = load(ap, "--input", a.input, 4), load(ap, "--weights", a.weights, 4)
    if x.shape[1] != w.shape[1]:
        ap.exit(2, f"{ap.prog}: --input has {x.shape[1]} channels, --weights takes {w.shape[1]} (OIHW; no groups)\n")
    bn, eps = batchnorm(a.bn, w.shape[0], default_eps, ap)
    return x, w, bn, eps
