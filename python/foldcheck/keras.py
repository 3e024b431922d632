"""foldcheck for Keras and TensorFlow Lite: the converter's fold of every conv + BatchNorm of a
Keras model, layer by layer (tensorflow is imported when this module is).

    import foldcheck.keras as fck
    r = fck.check_tflite(model, x)               # converted here with the default options
    r = fck.check_tflite(model, x, tflite=flat)  # a model you converted (bytes or a .tflite path)
    r.verdict, r.layers, r.unexpected; print(r)

The TFLite converter folds each BatchNormalization into the Conv2D or DepthwiseConv2D before
it (w' = w·s, b' = (b − μ)·s + β, s = γ/√(σ² + ε), in its own order: none of foldcheck's
recipes is its bit for bit) and may fuse a following ReLU/ReLU6 into the conv. Every such
pair of the Keras model is checked twice:
- its folded weights and bias, read from the converted model, against the exact fold of the
  Keras layer's weights and BatchNorm, with each recipe's rounding-error bound (fold_check);
- the converted conv's output on its own input, both read from one interpreter run on x
  (TFLite's default kernels, XNNPACK on CPU), against the Keras layer computed exactly
  (diagnose: rounding, or which common bug — an ε that is not the Keras layer's, ...). Where
  the converter fused an activation, the output before it is read from a run of the same
  model with that one conv's activation removed, and is used only if the activation of it
  is the first run's output bit for bit.
A converted conv is matched to its Keras pair by its folded weights: among the pairs of the
same shape, the one whose exact fold is nearest (a wrong fold is still nearest its own
layer's unless two layers of one shape have near-equal weights). A pair with no converted
conv (the converter left its BatchNorm as ops) is MISTRUSTED, never a pass. So is a layer
beyond its bounds whose BatchNorm feeds a one-input op the converter may have folded into
the conv as well (a constant multiply or add: Rescaling, a Lambda, x * 3.0; see
absorbable_after): foldcheck models conv + BatchNorm (+ ReLU, ReLU6) only.

Import torchvision (if at all) before this module: tensorflow 2.21 loaded first makes
torchvision 0.29's import crash the interpreter.
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import warnings

import numpy as np

from . import _commands
from .results import VERDICTS


def _tensorflow():
    """tensorflow, with what it writes to stderr while it loads held back (absl's notes on
    oneDNN and CUDA stubs, written before any log level applies); replayed if the import
    fails. Already imported: taken as it is."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow  # noqa: PLC0415
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return tensorflow


tf = _tensorflow()
_CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")
# TFLite's fused activations a conv can carry (schema ActivationFunctionType), as functions.
_ACTIVATIONS = {0: ("NONE", lambda y: y), 1: ("RELU", lambda y: np.maximum(y, 0)),
                2: ("RELU_N1_TO_1", lambda y: np.clip(y, -1, 1)), 3: ("RELU6", lambda y: np.clip(y, 0, 6))}


def conv_bn_pairs(model):
    """Every (conv, BatchNormalization, absorbable_after) of a built Keras model that a
    converter can fold: a Conv2D or DepthwiseConv2D with no activation of its own, channels
    last, whose output goes to that BatchNormalization (over the channel axis) and nowhere
    else. Returns (pairs, skipped): skipped is [(BatchNormalization name, why not)] for those
    after a conv that cannot be folded into."""
    pairs, skipped = [], []
    for bn, parents in _layers(model, parents=()):
        if not isinstance(bn, tf.keras.layers.BatchNormalization) or not bn._inbound_nodes:
            continue
        producer = bn._inbound_nodes[0].input_tensors[0]._keras_history.operation
        if not isinstance(producer, (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D)):
            continue
        why = _unfoldable(producer, bn)
        if why:
            skipped.append((bn.name, why))
        else:
            pairs.append((producer, bn, absorbable_after(bn, parents)))
    return pairs, skipped


def _layers(model, parents=None):
    """Every layer of the model, those of models nested in it included, in order; with
    parents=(), (layer, the nested models it is in, outermost first)."""
    for layer in model.layers:
        if isinstance(layer, tf.keras.Model):
            yield from _layers(layer, None if parents is None else (*parents, layer))
        else:
            yield layer if parents is None else (layer, parents)


# After a BatchNorm, ops that change nothing at inference (the converter drops them) and
# layers that cannot be folded into the conv before them; everything else that takes one
# tensor (Rescaling, a Lambda, x * 3.0, ...) may be a constant multiply or add, which TFLite
# folds into the conv's weights and bias too.
_TRANSPARENT = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
                "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Identity")
_NOT_FOLDED = ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Dense",
               "BatchNormalization", "LayerNormalization", "MaxPooling2D", "AveragePooling2D",
               "GlobalAveragePooling2D", "GlobalMaxPooling2D", "Flatten", "Reshape", "ZeroPadding2D", "Cropping2D",
               "UpSampling2D", "Softmax", "LeakyReLU", "PReLU", "ELU", "Permute", "Resizing")


def absorbable_after(bn, parents=()):
    """What after `bn` the converter may have folded into the conv as well (its name and
    type), or None: the first op that takes only bn's output, past ops that do nothing at
    inference, unless it is an activation or a layer no converter folds into weights. Where
    bn's output leaves a nested model (`parents`: the models it is in, outermost first), the
    search goes on after that model in the one around it."""
    op = bn
    while True:
        nodes = op._outbound_nodes
        if not nodes and parents:
            op, parents = parents[-1], parents[:-1]
            continue
        if len(nodes) != 1:  # the model's output, or used twice: nothing after it is folded in
            return None
        nxt = nodes[0].operation
        kind = type(nxt).__name__
        linear = isinstance(nxt, tf.keras.layers.Activation) and getattr(nxt.activation, "__name__", "") == "linear"
        if kind in _TRANSPARENT or linear:
            op = nxt
            continue
        # An activation is not linear: never in the weights (a ReLU or ReLU6 the conv carries).
        # A nested model taking bn's output is not looked into: it may begin with such an op.
        if kind in _NOT_FOLDED or isinstance(nxt, (tf.keras.layers.Activation, tf.keras.layers.ReLU)) \
                or len(nodes[0].input_tensors) != 1:
            return None
        return nxt.name, kind


def _unfoldable(conv, bn):
    if getattr(conv.activation, "__name__", "linear") != "linear":
        return f"{conv.name} has its own activation ({conv.activation.__name__}) before the BatchNorm"
    if conv.data_format != "channels_last":
        return f"{conv.name} is channels_first"
    if bn.axis not in (-1, [-1], 3, [3]):
        return f"the BatchNorm normalizes axis {bn.axis}, not the conv's channels"
    if len(conv._outbound_nodes) != 1 or len(bn._inbound_nodes) != 1:
        return f"{conv.name}'s output is used by more than the BatchNorm (or a layer is called twice)"
    return None


def keras_layer(conv, bn):
    """A pair's arrays as foldcheck reads them: weight OIHW (depthwise: O = C·multiplier, I = 1),
    the conv bias (or None), gamma, beta, mean, var (float32) and eps."""
    k = np.asarray(conv.kernel.numpy(), np.float32)
    if isinstance(conv, tf.keras.layers.DepthwiseConv2D):  # (kh, kw, C, m) -> channel c·m + j
        kh, kw, c, m = k.shape
        w = np.transpose(k.reshape(kh, kw, c * m), (2, 0, 1))[:, None]
    else:  # (kh, kw, I, O)
        w = np.transpose(k, (3, 2, 0, 1))
    o = w.shape[0]
    bias = np.asarray(conv.bias.numpy(), np.float32) if conv.use_bias else None
    one = lambda v, fresh: np.asarray(v.numpy() if v is not None else np.full(o, fresh), np.float32)  # noqa: E731
    return dict(weight=np.ascontiguousarray(w), bias=bias, gamma=one(bn.gamma, 1.0), beta=one(bn.beta, 0.0),
                mean=one(bn.moving_mean, 0.0), var=one(bn.moving_variance, 1.0), eps=float(bn.epsilon))


def _interpreter(flat, preserve=False):
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation, preserve_all_tensors' memory note
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_content=bytes(flat), experimental_preserve_all_tensors=preserve)


def _run(flat, x_nhwc, preserve=True):
    it = _interpreter(flat, preserve)
    i = it.get_input_details()
    if len(i) != 1:
        raise ValueError(f"check_tflite: the converted model has {len(i)} inputs; one is supported")
    fixed = [(d, n) for d, n in zip(i[0]["shape_signature"], x_nhwc.shape) if d != -1]
    if len(i[0]["shape_signature"]) != x_nhwc.ndim or any(d != n for d, n in fixed):
        raise ValueError(f"check_tflite: the converted model takes an input of shape "
                         f"{[int(d) for d in i[0]['shape_signature']]} (-1: free), x has {list(x_nhwc.shape)}")
    it.resize_tensor_input(i[0]["index"], x_nhwc.shape)
    it.allocate_tensors()
    it.set_tensor(i[0]["index"], x_nhwc)
    it.invoke()
    return it


def _options(flat):
    """Per operator index of subgraph 0: (stride, dilation, padding "SAME"/"VALID", activation)."""
    from tensorflow.lite.python import schema_py_generated as schema  # noqa: PLC0415

    g = schema.Model.GetRootAsModel(bytes(flat), 0).Subgraphs(0)
    out = {}
    for k in range(g.OperatorsLength()):
        op = g.Operators(k)
        table = op.BuiltinOptions()
        t = op.BuiltinOptionsType()
        cls = {schema.BuiltinOptions.Conv2DOptions: schema.Conv2DOptions,
               schema.BuiltinOptions.DepthwiseConv2DOptions: schema.DepthwiseConv2DOptions}.get(t)
        if cls is None or table is None:
            continue
        o = cls()
        o.Init(table.Bytes, table.Pos)
        out[k] = ((o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor()),
                  "SAME" if o.Padding() == schema.Padding.SAME else "VALID", o.FusedActivationFunction())
    return out


def _values(it, index):
    """A tensor's values in float32 (float16 and per-channel int8 weights dequantized), and
    the type the model stores it in."""
    d = next(t for t in it.get_tensor_details() if t["index"] == index)
    v = it.get_tensor(index)
    q = d.get("quantization_parameters") or {}
    if v.dtype == np.int8 and len(q.get("scales", [])):
        axis = int(q.get("quantized_dimension", 0))
        shape = [1] * v.ndim
        shape[axis] = -1
        v = (v.astype(np.float32) - np.reshape(q["zero_points"], shape)) * np.reshape(q["scales"], shape)
    return np.asarray(v, np.float32), str(d["dtype"].__name__)


def _constant(it, index, dequantized_from):
    """A constant's values as _values reads them; a DEQUANTIZE's output (float16 weights) is
    read from its stored input: a delegate (XNNPACK) unpacks such weights once, inside it, and
    never writes the DEQUANTIZE's output tensor."""
    return _values(it, dequantized_from.get(index, index))


def _converted_convs(flat, it):
    """Each conv op of the converted model: its index, kind, tensors and options, and its
    weight (as OIHW) and bias as stored."""
    options, ops = _options(flat), it._get_ops_details()
    dequantized_from = {int(op["outputs"][0]): int(op["inputs"][0]) for op in ops if op["op_name"] == "DEQUANTIZE"}
    convs = []
    for op in ops:
        if op["op_name"] not in _CONV_OPS or op["index"] not in options or len(op["inputs"]) < 3:
            continue
        x, f, b = (int(t) for t in op["inputs"][:3])
        w, stored = _constant(it, f, dequantized_from)
        w = np.transpose(w, (0, 3, 1, 2)) if op["op_name"] == "CONV_2D" else np.transpose(w, (3, 0, 1, 2))
        bias = _constant(it, b, dequantized_from)[0] if b >= 0 else None
        stride, dilation, padding, act = options[op["index"]]
        convs.append(dict(index=op["index"], kind=op["op_name"], input=x, output=int(op["outputs"][0]),
                          weight=np.ascontiguousarray(w), bias=bias, weight_type=stored, stride=stride,
                          dilation=dilation, padding=padding, activation=act))
    return convs


def _exact_fold(p):
    s = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + p["eps"])
    return p["weight"].astype(np.float64) * s.reshape(-1, 1, 1, 1)


def _match(layers, convs):
    """Each Keras pair's converted conv (or None): greedily, the nearest (relative max
    distance of the folded weights to the pair's exact fold) among those of its shape."""
    distances = []
    for i, p in enumerate(layers):
        exact = _exact_fold(p)
        scale = max(float(np.max(np.abs(exact))), np.finfo(np.float64).tiny)
        for j, c in enumerate(convs):
            if c["weight"].shape == exact.shape:
                distances.append((float(np.max(np.abs(c["weight"] - exact))) / scale, i, j))
    found, used = [None] * len(layers), set()
    for _, i, j in sorted(distances):
        if found[i] is None and j not in used:
            found[i] = convs[j]
            used.add(j)
    return found


def _without_activation(flat, index):
    """The converted model with operator `index`'s fused activation removed (nothing else)."""
    from tensorflow.lite.tools import flatbuffer_utils  # noqa: PLC0415

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(flat))
    m.subgraphs[0].operators[index].builtinOptions.fusedActivationFunction = 0
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def _conv_values(flat, x_nhwc, run, conv):
    """The conv's input and its output before any fused activation, from `run` (NHWC), or
    (None, None, why not)."""
    x, y = run.get_tensor(conv["input"]).copy(), run.get_tensor(conv["output"]).copy()
    name, act = _ACTIVATIONS.get(conv["activation"], (None, None))
    if act is None:
        return None, None, f"fused activation {conv['activation']} is not modelled: output not checked"
    if name == "NONE":
        return x, y, None
    again = _run(_without_activation(flat, conv["index"]), x_nhwc)
    x2, pre = again.get_tensor(conv["input"]), again.get_tensor(conv["output"]).copy()
    if not _same_bits(x2, x) or not _same_bits(act(pre), y):
        return None, None, (f"with its fused {name} removed the conv's output is not the model's before {name} "
                            "(a different kernel ran): output not checked")
    return x, pre, None


def _same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _same_padding(size, k, stride, dilation):
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _layer_input(x_nhwc, conv):
    """The conv's input as NCHW with TFLite's padding applied as zeros (SAME pads the far side
    more when the total is odd, which a symmetric padding cannot say), or None when the
    geometry is not one diagnose takes (unequal strides or dilations)."""
    (sh, sw), (dh, dw) = conv["stride"], conv["dilation"]
    if sh != sw or dh != dw:
        return None
    x = np.transpose(x_nhwc, (0, 3, 1, 2))
    if conv["padding"] == "SAME":
        kh, kw = conv["weight"].shape[2:]
        ph, pw = _same_padding(x.shape[2], kh, sh, dh), _same_padding(x.shape[3], kw, sw, dw)
        x = np.pad(x, ((0, 0), (0, 0), ph, pw))
    return np.ascontiguousarray(x, np.float32)


def _check_output(p, conv, flat, x_nhwc, run, precision, threads):
    """diagnose of the converted conv's output on its own input, or (None, why not)."""
    x, y, why = _conv_values(flat, x_nhwc, run, conv)
    if why:
        return None, why
    xin = _layer_input(x, conv)
    if xin is None:
        return None, f"strides {conv['stride']} / dilations {conv['dilation']} differ by axis: output not checked"
    observed = np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2)))
    r = _commands.diagnose(xin, observed, weight=p["weight"], bias=p["bias"], gamma=p["gamma"], beta=p["beta"],
                           mean=p["mean"], var=p["var"], eps=p["eps"], stride=conv["stride"][0], padding=0,
                           dilation=conv["dilation"][0], precision=precision, threads=threads)
    return r, None


def _worst(verdicts):
    return max(verdicts, key=VERDICTS.index)


def _check_layer(name, p, conv, flat, x_nhwc, run, precision, threads):
    row = {"layer": name, "verdict": "MISTRUSTED", "weights": None, "output": None, "note": None}
    if conv is None:
        row["note"] = "no conv of the converted model carries this layer's fold (its BatchNorm was not folded)"
        return row
    row.update(kind=conv["kind"], activation=_ACTIVATIONS.get(conv["activation"], (str(conv["activation"]),))[0],
               weight_type=conv["weight_type"])
    row["weights"] = _commands.fold_check(p["weight"], p["bias"], conv["weight"], conv["bias"], gamma=p["gamma"],
                                          beta=p["beta"], mean=p["mean"], var=p["var"], eps=p["eps"],
                                          precision=precision, threads=threads)
    row["output"], row["note"] = _check_output(p, conv, flat, x_nhwc, run, precision, threads) if run \
        else (None, "the interpreter's per-layer values are not its plain run's: output not checked")
    if conv["weight_type"] != "float32":
        row["note"] = "; ".join(filter(None, [f"weights stored in {conv['weight_type']} (the converter's "
                                              "quantization): held to float32's bounds, which quantization leaves "
                                              "by design", row["note"]]))
    row["verdict"] = _worst([r.verdict for r in (row["weights"], row["output"]) if r is not None])
    return row


def _absorbed(row, after):
    """A layer beyond its bounds right before an op the converter may have folded into it too
    is MISTRUSTED, not UNEXPECTED: its conv may compute that op as well, which foldcheck does
    not model (never a pass either way; a layer within its bounds stays EXPECTED)."""
    if after is None or row["verdict"] in ("EXPECTED", "MISTRUSTED"):
        return row
    name, kind = after
    why = (f"beyond its bounds ({row['verdict']}), and the BatchNorm is followed by {name} ({kind}): if that is a "
           "constant multiply or add, the converter folded it into this conv as well, which foldcheck does not "
           "model; not judged")
    return {**row, "verdict": "MISTRUSTED", "note": "; ".join(filter(None, [why, row["note"]]))}


def convert(model):
    """The TFLite converter's model of `model`, default options (the flatbuffer's bytes)."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    with contextlib.redirect_stdout(io.StringIO()):  # Keras prints the exported signature
        return bytes(converter.convert())


def _per_layer_run(flat, x_nhwc):
    """The run whose intermediate tensors are read, if its output is the plain run's bit for
    bit (the values it keeps are the deployed computation's), else None."""
    run = _run(flat, x_nhwc, preserve=True)
    plain = _run(flat, x_nhwc, preserve=False)
    a, b = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (run, plain))
    return run if _same_bits(a, b) else None


def _taken_by(model, x):
    """x as float32 NHWC, refused (ValueError) unless the Keras model runs on it: a shape the
    model does not take would reach TFLite's kernels, which do not all check it."""
    x = np.ascontiguousarray(np.asarray(x, np.float32))
    if x.ndim != 4:
        raise ValueError(f"check_tflite: x must be one NHWC input (4-D), got shape {list(x.shape)}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:  # as the command line refuses it: nothing downstream would be a comparison
        raise ValueError(f"check_tflite: x has {'NaN' if np.isnan(x.flat[bad[0]]) else 'an infinity'} at index "
                         f"{int(bad[0])}")
    try:
        model(x, training=False)
    except Exception as e:  # noqa: BLE001 (Keras raises many kinds for a shape it does not take)
        raise ValueError(f"check_tflite: the Keras model does not run on x of shape {list(x.shape)}: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    return x


def check_tflite(model, x, *, tflite=None, eps=None, precision=256, threads=0):
    """Is the TFLite converter's fold of every conv + BatchNorm of `model` correct, layer by
    layer, on input `x`? (see the module's documentation)

    model: a built Keras model (functional or Sequential, channels last; nested models are
    searched); x: one input, NHWC float32, as the model takes it; tflite: the converted model
    (bytes or a path to a .tflite), default: converted here with the converter's default
    options. eps: the BatchNorm epsilon the layers are held to, default each Keras layer's own
    (Keras' default is 1e-3); give 1e-5 to ask whether a model ported from PyTorch computes
    what PyTorch's layers did (diagnose then names eps_mismatch and recovers the eps the
    model used). Returns a TFLiteCheck (.verdict, .layers, .unexpected, .skipped, .report())."""
    if isinstance(tflite, (str, os.PathLike)):
        with open(tflite, "rb") as f:
            tflite = f.read()
    if eps is not None and not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"check_tflite: eps must be finite and > 0, got {eps}")
    x_nhwc = _taken_by(model, x)
    flat = bytes(tflite) if tflite is not None else convert(model)
    pairs, skipped = conv_bn_pairs(model)
    arrays = [keras_layer(c, b) for c, b, _ in pairs]
    for p in arrays if eps is not None else ():
        p["eps"] = float(eps)
    run = _per_layer_run(flat, x_nhwc)
    convs = _converted_convs(flat, run or _run(flat, x_nhwc))
    rows = [_absorbed(_check_layer(f"{c.name} + {b.name}", p, conv, flat, x_nhwc, run, precision, threads), after)
            for (c, b, after), p, conv in zip(pairs, arrays, _match(arrays, convs))]
    return TFLiteCheck(rows, skipped)


class TFLiteCheck:
    """check_tflite's result. .layers: [{"layer": "conv + batchnorm", "verdict", "kind",
    "activation", "weight_type", "weights": FoldCheckResult, "output": DiagnoseResult or None,
    "note"}]; the verdict is the worst layer's (MISTRUSTED when no pair was checked)."""

    def __init__(self, layers, skipped):
        self.layers = layers
        self.skipped = skipped

    @property
    def verdict(self):
        return _worst([r["verdict"] for r in self.layers]) if self.layers else "MISTRUSTED"

    @property
    def passed(self):
        return self.verdict == "EXPECTED"

    @property
    def exit_code(self):
        return 0 if self.passed else 1

    @property
    def unexpected(self):
        return [r for r in self.layers if r["verdict"] != "EXPECTED"]

    def to_dict(self):
        def part(r):
            return None if r is None else r.to_dict()

        return {"command": "check_tflite", "verdict": self.verdict,
                "layers": [{**r, "weights": part(r["weights"]), "output": part(r["output"])} for r in self.layers],
                "skipped": [{"batchnorm": b, "reason": why} for b, why in self.skipped]}

    def to_json(self, indent=None):
        return json.dumps(self.to_dict(), indent=indent)

    def report(self, format="text"):  # noqa: A002 (the CLI's word)
        if format == "json":
            return self.to_json(2)
        if format != "text":
            raise ValueError(f"check_tflite reports text or json, not {format!r}")
        return _text(self)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return f"<TFLiteCheck {self.verdict} layers: {len(self.layers)}>"


def _cell(r, key):
    if r is None:
        return "-"
    v = r.to_dict()
    ratio = v.get("worst_ratio") if key == "fold" else (v.get("as_given") or {}).get("max_ratio_to_bound")
    best = v.get("best") if key == "output" else v.get("closest_recipe")
    return f"{r.verdict} {ratio:.3g}" + (f" ({best})" if best else "") if ratio is not None else r.verdict


def _text(c):
    n = len(c.layers)
    layers = f"{n} conv + BatchNorm layer{'s' if n != 1 else ''}"
    unchecked = sum(r["output"] is None for r in c.layers)
    what = "folded weights and bias, and the layer's output on its own input" if not unchecked else \
        f"folded weights and bias; the output of {unchecked} of them not checked, see the notes"
    head = {"EXPECTED": f"{'the' if n == 1 else 'each of the'} {layers} the converter folded is within its "
                        f"rounding-error bounds ({what})",
            "MISTRUSTED": "no conv + BatchNorm layer to judge" if not n else
                          f"{sum(r['verdict'] == 'MISTRUSTED' for r in c.layers)} of {layers} not judged (see the notes)"}
    width = max([len(r["layer"]) for r in c.layers] + [5])
    lines = [f"check_tflite: {c.verdict}: " + head.get(c.verdict, f"{len(c.unexpected)} of {layers} beyond their "
                                                                  "rounding-error bounds"),
             "  worst |error| / bound per layer; weights: the nearest recipe's; output: the layer as given, or the "
             "bug that explains it",
             f"  {'layer':<{width}}  {'op':<24} {'weights':<32} output"]
    for r in c.layers:
        op = f"{r.get('kind', '-')}" + (f"+{r['activation']}" if r.get("activation") not in (None, "NONE") else "")
        lines.append(f"  {r['layer']:<{width}}  {op:<24} {_cell(r['weights'], 'fold'):<32} "
                     f"{_cell(r['output'], 'output')}")
        if r["note"]:
            lines.append(f"    note: {r['note']}")
    lines += [f"  not folded: {b}: {why}" for b, why in c.skipped]
    return "\n".join(lines)


def _input_for(model, path, seed):
    """x from an .npy (NHWC float32), or drawn from a seeded normal in the model's input shape
    (batch 1 where it is free); refuses a model of several inputs or free spatial sizes."""
    if path:
        return np.load(path).astype(np.float32)
    if len(model.inputs) != 1:
        raise ValueError(f"the model has {len(model.inputs)} inputs; give one with --input")
    shape = [1 if d is None and i == 0 else d for i, d in enumerate(model.inputs[0].shape)]
    if any(d is None for d in shape):
        raise ValueError(f"the model's input shape {tuple(model.inputs[0].shape)} has free sizes; give --input")
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def main(argv=None):
    """python -m foldcheck.keras MODEL.keras [--input X.npy | --seed S] [--tflite M.tflite]
    [--eps E] [--format text|json]: check_tflite from the command line; exit 0 EXPECTED,
    1 anything else, 2 bad input."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m foldcheck.keras", description=(
        "Is the TFLite converter's fold of every conv + BatchNorm of a Keras model correct, layer by layer? "
        "Exit 0 EXPECTED, 1 SUSPICIOUS/UNEXPECTED/MISTRUSTED, 2 bad input."))
    ap.add_argument("model", help="a Keras model (.keras or .h5, as tf.keras.models.load_model reads it)")
    ap.add_argument("--input", help="the model's input, NHWC float32 .npy (default: seeded normal, batch 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the default input (default 0)")
    ap.add_argument("--tflite", help="the converted model (default: converted here, the converter's defaults)")
    ap.add_argument("--eps", type=float, help="the BatchNorm epsilon to hold the layers to (default: each layer's)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    a = ap.parse_args(argv)
    try:  # a file that is not what its flag says: bad input, whatever the reader raised
        model = tf.keras.models.load_model(a.model, compile=False)
        x = _input_for(model, a.input, a.seed)
    except Exception as e:  # noqa: BLE001
        ap.exit(2, f"python -m foldcheck.keras: error: {type(e).__name__}: {e}\n")
    try:
        r = check_tflite(model, x, tflite=a.tflite, eps=a.eps)
    except (OSError, ValueError, TypeError, RuntimeError) as e:  # a refused input (foldcheck.InputError too)
        ap.exit(2, f"python -m foldcheck.keras: error: {type(e).__name__}: {e}\n")
    if not a.input and a.format == "text":
        print(f"input: seeded normal {list(x.shape)}, seed {a.seed}")
    print(r.report(a.format))
    return r.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
