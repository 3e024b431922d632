#!/usr/bin/env python3
"""A Keras Conv2D + BatchNormalization folded by the TensorFlow Lite converter.

  tflite_fold.py --weights W.npy [--bn BN.npz] --input X.npy OUTDIR

Builds the layer in Keras — Conv2D (no bias, padding "same") then BatchNormalization with
Keras' defaults, epsilon 1e-3 and momentum 0.99, or the eps BN.npz gives — with the weights
(OIHW, written to Keras' HWIO) and the BatchNorm's gamma, beta, mean, var from BN.npz (a fresh
BatchNorm's for a key left out); converts it with tf.lite.TFLiteConverter.from_keras_model
(the converter folds the BatchNorm into the conv); reads the converted conv's weights (OHWI,
written back as OIHW) and bias; runs the converted model on X (NCHW, given to TFLite as NHWC)
with the TFLite interpreter. Writes OUTDIR/folded_weights.npy, folded_bias.npy, output.npy
(NCHW), model.tflite and bn.npz (the parameters and the eps Keras used). Exit 2 with a
message when the converter did not fold the BatchNorm (no conv with a bias in the model).
"""
import argparse
import contextlib
import io
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bisect_layer import batchnorm, load


def _tf():
    """tensorflow as foldcheck.keras loads it (its start-up notes on stderr held back; the
    build's package, which tools/python/link_build.sh puts in the project's .venv), on first
    use: --help and a refused argument answer before it loads."""
    from foldcheck.keras import tf  # noqa: PLC0415

    return tf


def keras_layer(w, bn, eps):
    tf = _tf()
    o, c, kh, kw = w.shape
    x = tf.keras.Input((None, None, c), batch_size=1)
    conv = tf.keras.layers.Conv2D(o, (kh, kw), padding="same", use_bias=False)
    norm = tf.keras.layers.BatchNormalization(epsilon=eps, momentum=0.99)
    model = tf.keras.Model(x, norm(conv(x)))
    conv.set_weights([np.transpose(w, (2, 3, 1, 0))])
    norm.set_weights([bn[k] for k in ("gamma", "beta", "mean", "var")])
    return model


def convert(model, x_nhwc, configure=None):
    """The converted model (flatbuffer) and a TFLite interpreter of it sized for x_nhwc;
    configure(converter), when given, sets the converter's options first."""
    tf = _tf()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if configure:
        configure(converter)
    with contextlib.redirect_stdout(io.StringIO()):  # Keras prints the exported signature
        flat = converter.convert()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = tf.lite.Interpreter(model_content=flat)
    it.resize_tensor_input(it.get_input_details()[0]["index"], x_nhwc.shape)
    it.allocate_tensors()
    return flat, it


def folded_conv(flat, it):
    """The converted conv's weights (OIHW) and bias, read by foldcheck.keras from the conv op's
    own inputs (a tensor's name says nothing: a fresh BatchNorm's bias is "arith.constant"),
    or (None, None) when the model has not exactly one conv."""
    from foldcheck.keras import converted_convs  # noqa: PLC0415

    convs = converted_convs(flat, it)
    return (convs[0]["weight"], convs[0]["bias"]) if len(convs) == 1 else (None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--weights", required=True, help="conv weights, OIHW .npy")
    ap.add_argument("--bn", help=".npz with gamma, beta, mean, var, eps (default eps: Keras' 1e-3)")
    ap.add_argument("--input", required=True, help="an input, NCHW float32 .npy")
    a = ap.parse_args()
    w, x = load(ap, "--weights", a.weights, 4), load(ap, "--input", a.input, 4)
    if x.shape[1] != w.shape[1]:
        ap.exit(2, f"{ap.prog}: --input has {x.shape[1]} channels (NCHW), --weights takes {w.shape[1]} (OIHW)\n")
    if w.shape[2] % 2 == 0 or w.shape[3] % 2 == 0:
        ap.exit(2, f"{ap.prog}: a {w.shape[2]}x{w.shape[3]} kernel: Keras' padding 'same' is symmetric for odd "
                   "kernels only\n")
    bn, eps = batchnorm(a.bn, w.shape[0], 1e-3, ap)  # Keras' default eps
    x_nhwc = np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))
    flat, it = convert(keras_layer(w, bn, eps), x_nhwc)
    fw, fb = folded_conv(flat, it)
    if fw is None or fb is None:
        ap.exit(2, "tflite_fold.py: the converter left no conv with a folded bias (the BatchNorm was not folded)\n")
    it.set_tensor(it.get_input_details()[0]["index"], x_nhwc)
    it.invoke()
    y = it.get_tensor(it.get_output_details()[0]["index"])
    os.makedirs(a.outdir, exist_ok=True)
    np.save(os.path.join(a.outdir, "folded_weights.npy"), fw)
    np.save(os.path.join(a.outdir, "folded_bias.npy"), fb)
    np.save(os.path.join(a.outdir, "output.npy"), np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2))))
    np.savez(os.path.join(a.outdir, "bn.npz"), eps=np.float64(eps), **bn)
    with open(os.path.join(a.outdir, "model.tflite"), "wb") as f:
        f.write(flat)
    print(f"tensorflow {_tf().__version__}: Keras Conv2D + BatchNormalization(epsilon={eps:g}) folded by the TFLite "
          f"converter into {a.outdir}")


if __name__ == "__main__":
    main()
