#!/usr/bin/env python3
"""The TensorFlow Lite converter as the compiler of `foldcheck bisect --cmd`.

  tflite_bisect.py --enabled {enabled} --disabled {disabled} -o {out} --input X.npy
                   --weights W.npy [--bn BN.npz] [--inject-bad-eps]

Builds one Keras layer — Conv2D (no bias, padding "same", so odd kernels only) then
BatchNormalization with gamma, beta, mean, var, eps from BN.npz (a fresh BatchNorm's for a
key left out; eps 1e-5 when BN.npz has none, as foldcheck's --bn) — converts it with
tf.lite.TFLiteConverter.from_keras_model (which folds the BatchNorm into the conv in every
configuration: no option turns the fold off) and writes the TFLite interpreter's float32
output on X (NCHW) to OUT. The "passes" are the converter's own options, each set when
named in `{enabled}` and left at its default otherwise:

  float16_weights             optimizations=[DEFAULT], target_spec.supported_types=[float16]:
                              post-training float16 quantization (weights stored in float16)
  dynamic_range_int8          optimizations=[DEFAULT]: dynamic-range quantization (weight
                              tensors of 1024 elements or more in int8, hybrid kernels)
  sparsity                    optimizations=[EXPERIMENTAL_SPARSITY]: sparse weight encoding
  reduce_type_precision       _experimental_reduce_type_precision
  unfold_large_splat_constant _experimental_unfold_large_splat_constant
  disable_fuse_mul_and_fc     _experimental_disable_fuse_mul_and_fc

float16_weights and dynamic_range_int8 leave float32 arithmetic on purpose: on a layer
whose weights they change, a bisect held to float32 bounds names them (dynamic_range_int8
changes nothing below 1024 weights). float16_weights wins when both are named.

--inject-bad-eps adds BadEpsilon (first in the pipeline): the frontend builds the Keras
BatchNormalization with Keras' default epsilon 1e-3 instead of the layer's (the bug of a
PyTorch-to-Keras translation that drops the attribute); on a layer whose eps is 1e-3
already it changes nothing.

  foldcheck bisect --cmd '.venv/bin/python adapters/tflite_bisect.py --enabled {enabled} \\
      --disabled {disabled} -o {out} --input x.npy --weights w.npy --bn bn.npz' \\
      --passes reduce_type_precision,float16_weights,sparsity --input x.npy --weights w.npy --bn bn.npz
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bisect_layer import layer, names, parser, refuse_unknown

KERAS_EPS = 1e-3


def _optimize(c, how):
    c.optimizations = sorted(set(c.optimizations) | {how}, key=str)


def _float16(c):
    _optimize(c, _tf().lite.Optimize.DEFAULT)
    c.target_spec.supported_types = [_tf().float16]


def _tf():
    from tflite_fold import _tf as tensorflow  # noqa: PLC0415 (tensorflow loads after the arguments are read)
    return tensorflow()


# Each option's setter, applied to a TFLiteConverter; the names are the passes.
SWITCHES = {
    "float16_weights": _float16,
    "dynamic_range_int8": lambda c: _optimize(c, _tf().lite.Optimize.DEFAULT),
    "sparsity": lambda c: _optimize(c, _tf().lite.Optimize.EXPERIMENTAL_SPARSITY),
    "reduce_type_precision": lambda c: setattr(c, "_experimental_reduce_type_precision", True),
    "unfold_large_splat_constant": lambda c: setattr(c, "_experimental_unfold_large_splat_constant", True),
    "disable_fuse_mul_and_fc": lambda c: setattr(c, "_experimental_disable_fuse_mul_and_fc", True),
}


def main():
    ap = parser(__doc__)
    a = ap.parse_args()
    refuse_unknown(ap, a, (["BadEpsilon"] if a.inject_bad_eps else []) + list(SWITCHES))
    x, w, bn, eps = layer(a, ap)
    if w.shape[2] % 2 == 0 or w.shape[3] % 2 == 0:
        ap.exit(2, f"tflite_bisect.py: a {w.shape[2]}x{w.shape[3]} kernel: Keras' padding 'same' is symmetric "
                   "for odd kernels only\n")
    from tflite_fold import convert, keras_layer  # noqa: PLC0415 (tensorflow loads after the arguments are read)
    on = [n for n in SWITCHES if n in names(a.enabled)]
    model = keras_layer(w, bn, KERAS_EPS if "BadEpsilon" in names(a.enabled) else eps)
    x_nhwc = np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))
    try:  # TFLite's refusal of a configuration (XNNPACK cannot take a sparse int8 conv, ...): one line
        _, it = convert(model, x_nhwc, lambda c: [SWITCHES[n](c) for n in on])
        it.set_tensor(it.get_input_details()[0]["index"], x_nhwc)
        it.invoke()
    except (RuntimeError, ValueError) as e:
        lines = [t for t in str(e).splitlines() if t.strip()]
        ap.exit(2, f"{ap.prog}: TFLite cannot convert or run the layer with {', '.join(on) or 'no option'} enabled: "
                   f"{lines[-1] if lines else type(e).__name__}\n")
    y = it.get_tensor(it.get_output_details()[0]["index"])
    np.save(a.out, np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2))).astype(np.float32))


if __name__ == "__main__":
    main()
