"""The converted side of foldcheck.keras: a TFLite flatbuffer's conv ops (their options, their
folded weights and bias as stored) and the values they computed in one interpreter run.

Runs use TFLite's default kernels (XNNPACK on CPU). The run whose intermediate tensors are
read keeps every tensor (experimental_preserve_all_tensors: the delegate then takes each op
on its own, so each op's output is written where it can be read); it is used only if its
final output is the plain run's bit for bit.
"""
import warnings

import numpy as np

from ._tensorflow import tf

CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")
DEAD = "the interpreter kept no values for this conv"
# TFLite's fused activations a conv can carry (schema ActivationFunctionType), as functions.
ACTIVATIONS = {0: ("NONE", lambda y: y), 1: ("RELU", lambda y: np.maximum(y, 0)),
               2: ("RELU_N1_TO_1", lambda y: np.clip(y, -1, 1)), 3: ("RELU6", lambda y: np.clip(y, 0, 6))}


def _interpreter(flat, preserve=False):
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation, preserve_all_tensors' memory note
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_content=bytes(flat), experimental_preserve_all_tensors=preserve)


def run(flat, x_nhwc, preserve=True):
    """An interpreter of `flat` that has run on x_nhwc (preserve: every tensor kept)."""
    it = _interpreter(flat, preserve)
    i = it.get_input_details()
    if len(i) != 1:
        raise ValueError(f"check_tflite: the converted model has {len(i)} inputs; one is supported")
    fixed = [(d, n) for d, n in zip(i[0]["shape_signature"], x_nhwc.shape) if d != -1]
    if len(i[0]["shape_signature"]) != x_nhwc.ndim or any(d != n for d, n in fixed):
        raise ValueError(f"check_tflite: the converted model takes an input of shape "
                         f"{[int(d) for d in i[0]['shape_signature']]} (-1: free), x has {list(x_nhwc.shape)}")
    try:  # TFLite's own refusals (a kernel that cannot take the shape, an int8 input) as ValueError
        it.resize_tensor_input(i[0]["index"], x_nhwc.shape)
        it.allocate_tensors()
        it.set_tensor(i[0]["index"], x_nhwc)
        it.invoke()
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"check_tflite: TFLite cannot run the converted model on x: {str(e).strip()}") from e
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


def converted_convs(flat, it):
    """Each conv op of the converted model: its index, kind, tensors and options, and its
    weight (as OIHW) and bias as stored. flat: the model's bytes; it: a tf.lite.Interpreter of
    it that has run (refused by name otherwise: a TypeError, never TFLite's from inside)."""
    if not isinstance(flat, (bytes, bytearray, memoryview)):
        raise TypeError(f"converted_convs: flat must be the converted model's bytes, got {type(flat).__name__}")
    if not isinstance(it, tf.lite.Interpreter):
        raise TypeError(f"converted_convs: it must be a tf.lite.Interpreter of the model, got {type(it).__name__}")
    options, ops = _options(flat), it._get_ops_details()
    shapes = {d["index"]: tuple(int(n) for n in d["shape"]) for d in it.get_tensor_details()}
    dequantized_from = {int(op["outputs"][0]): int(op["inputs"][0]) for op in ops if op["op_name"] == "DEQUANTIZE"}
    convs = []
    for op in ops:
        if op["op_name"] not in CONV_OPS or op["index"] not in options or len(op["inputs"]) < 3:
            continue
        x, f, b = (int(t) for t in op["inputs"][:3])
        w, stored = _constant(it, f, dequantized_from)
        w = np.transpose(w, (0, 3, 1, 2)) if op["op_name"] == "CONV_2D" else np.transpose(w, (3, 0, 1, 2))
        bias = _constant(it, b, dequantized_from)[0] if b >= 0 else None
        stride, dilation, padding, act = options[op["index"]]
        convs.append(dict(index=op["index"], kind=op["op_name"], input=x, output=int(op["outputs"][0]),
                          output_shape=shapes.get(int(op["outputs"][0])),
                          weight=np.ascontiguousarray(w), bias=bias, weight_type=stored, stride=stride,
                          dilation=dilation, padding=padding, activation=act))
    return convs


def _without_activation(flat, index):
    """The converted model with operator `index`'s fused activation removed (nothing else)."""
    from tensorflow.lite.tools import flatbuffer_utils  # noqa: PLC0415

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(flat))
    m.subgraphs[0].operators[index].builtinOptions.fusedActivationFunction = 0
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def conv_values(flat, x_nhwc, first, conv):
    """The conv's input and its output before any fused activation, from the run `first`
    (NHWC), or (None, None, why not). A fused activation is taken off by a run of the model
    with that one op's activation removed, used only if applying the activation to its output
    gives `first`'s bit for bit (the same kernel ran)."""
    try:
        x, y = first.get_tensor(conv["input"]).copy(), first.get_tensor(conv["output"]).copy()
    except ValueError:  # a conv whose output nothing uses: the interpreter keeps no data for it
        return None, None, f"{DEAD} (nothing uses its output): output not checked"
    name, act = ACTIVATIONS.get(conv["activation"], (None, None))
    if act is None:
        return None, None, f"fused activation {conv['activation']} is not modelled: output not checked"
    if name == "NONE":
        return x, y, None
    again = run(_without_activation(flat, conv["index"]), x_nhwc)
    x2, pre = again.get_tensor(conv["input"]), again.get_tensor(conv["output"]).copy()
    if not same_bits(x2, x) or not same_bits(act(pre), y):
        return None, None, (f"with its fused {name} removed the conv's output is not the model's before {name} "
                            "(a different kernel ran): output not checked")
    return x, pre, None


def per_layer_run(flat, x_nhwc):
    """The run whose intermediate tensors are read, if its output is the plain run's bit for
    bit (the values it keeps are the deployed computation's), else None."""
    kept = run(flat, x_nhwc, preserve=True)
    plain = run(flat, x_nhwc, preserve=False)
    a, b = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (kept, plain))
    return kept if same_bits(a, b) else None


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def same_padding(size, k, stride, dilation):
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2
