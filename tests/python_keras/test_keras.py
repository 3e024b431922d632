"""foldcheck.keras (issue 24): a Keras model's conv + BatchNorm layers as the TFLite converter
folds them, checked layer by layer — folded weights and bias against the exact fold, and each
converted conv's output on its own input against the Keras layer.

What it guards: a correct conversion is EXPECTED in every layer of a model with the shapes
that make the reading hard (SAME padding with a stride, where TF pads the far side more; a
depthwise conv; a conv bias; fused ReLU and ReLU6, whose outputs are read before the
activation; a model nested in a model); a layer the converter cannot fold into (a conv with
its own activation) is listed, not judged. One channel of one folded conv changed by a few
ULP is named, layer and channel, and no other layer moves. Held to PyTorch's eps instead of
Keras' own, every layer's output is eps_mismatch with eps recovered as 1e-3 (the Keras
default): the port bug, found in the model. float16 weight quantization leaves float32's
bounds and says why; a model with no pair is MISTRUSTED, never a pass.
"""
import contextlib
import io
import json

import numpy as np
import pytest

import foldcheck.keras as fck  # tensorflow is pinned (tools/python/requirements.txt): never skipped

tf = fck.tf
L = tf.keras.layers


def _trained(model, seed):
    """BatchNorm statistics like a trained model's (the fold then differs by recipe)."""
    rng = np.random.default_rng(seed)
    for layer in fck.layers(model):
        if isinstance(layer, L.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([rng.normal(1, 0.2, c), rng.normal(0, 0.1, c), rng.normal(0, 0.3, c),
                               rng.uniform(0.1, 2, c)])
    return model


def _model(seed=3):
    x = tf.keras.Input((11, 11, 3), batch_size=1)
    h = L.Conv2D(8, 3, padding="same", use_bias=False, name="c1")(x)
    h = L.ReLU()(L.BatchNormalization(name="b1")(h))
    h = L.DepthwiseConv2D(3, strides=2, padding="same", name="dw")(h)  # 11 -> 6: TF pads 0 before, 1 after
    h = L.Activation("relu6")(L.BatchNormalization(name="b2")(h))
    h = L.Conv2D(6, 2, strides=2, padding="same", use_bias=True, name="c3")(h)  # an even kernel, a conv bias
    h = L.BatchNormalization(name="b3")(h)
    inner = tf.keras.Sequential([tf.keras.Input((3, 3, 6)), L.Conv2D(5, 3, padding="valid", name="c5"),
                                 L.BatchNormalization(name="b5")], name="inner")
    h = L.Conv2D(6, 1, padding="same", activation="relu", name="c4")(h)
    h = inner(L.BatchNormalization(name="b4")(h))
    return _trained(tf.keras.Model(x, h), seed)


def _input(seed=1):
    return np.random.default_rng(seed).standard_normal((1, 11, 11, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def model():
    return _model()


def test_a_correct_conversion_is_expected_in_every_layer(model):
    r = fck.check_tflite(model, _input())
    assert r.verdict == "EXPECTED" and r.passed and r.exit_code == 0, str(r)
    assert [x["layer"] for x in r.layers] == ["c1 + b1", "dw + b2", "c3 + b3", "c5 + b5"]
    assert [x["activation"] for x in r.layers] == ["RELU", "RELU6", "NONE", "NONE"]
    for x in r.layers:  # both checks ran, on a real comparison
        assert x["weights"].verdict == "EXPECTED" and x["output"] is not None and x["output"].verdict == "EXPECTED"
        assert 0 < x["output"]["as_given"]["max_ratio_to_bound"] <= 1
    assert [b for b, _, _ in r.skipped] == ["b4"] and "own activation" in r.skipped[0][1] and not r.skipped[0][2]
    text = str(r)
    assert text.startswith("check_tflite: EXPECTED") and "not judged: b4" in text and "DEPTHWISE_CONV_2D+RELU6" in text
    assert r.to_dict()["layers"][1]["output"]["verdict"] == "EXPECTED"


def _changed(flat, layer_weights, channel, factor):
    """The converted model with one channel of the conv whose weights are `layer_weights`
    (OHWI) multiplied by `factor`."""
    from tensorflow.lite.tools import flatbuffer_utils  # noqa: PLC0415

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(flat))
    for t in m.subgraphs[0].tensors:
        data = m.buffers[t.buffer].data
        if data is None or t.type != 0 or list(t.shape) != list(layer_weights.shape):  # 0: FLOAT32
            continue
        w = np.frombuffer(bytes(data), np.float32).reshape(layer_weights.shape).copy()
        if np.array_equal(w, layer_weights):
            w[channel] *= np.float32(factor)
            m.buffers[t.buffer].data = np.frombuffer(w.tobytes(), np.uint8)
            return bytes(flatbuffer_utils.convert_object_to_bytearray(m))
    raise AssertionError("no such weights in the converted model")


def test_one_channel_changed_by_a_few_ulp_is_named_layer_and_channel(model):
    flat = fck.convert(model)
    x = _input()
    convs = fck.tfl.converted_convs(flat, fck.tfl.run(flat, x))
    c3 = next(c for c in convs if c["weight"].shape == (6, 8, 2, 2))
    ohwi = np.ascontiguousarray(np.transpose(c3["weight"], (0, 2, 3, 1)))
    r = fck.check_tflite(model, x, tflite=_changed(flat, ohwi, 4, 1 + 2e-6))  # about 17 to 34 ULP
    verdicts = {row["layer"]: row["verdict"] for row in r.layers}
    assert verdicts == {"c1 + b1": "EXPECTED", "dw + b2": "EXPECTED", "c3 + b3": "UNEXPECTED", "c5 + b5": "EXPECTED"}
    bad = r.unexpected[0]
    assert bad["weights"].worst_channel == 4 and bad["weights"].verdict == "UNEXPECTED"


def test_held_to_pytorch_eps_every_layer_is_an_eps_mismatch_recovering_keras_default(model):
    r = fck.check_tflite(model, _input(), eps=1e-5)
    assert r.verdict == "UNEXPECTED" and len(r.unexpected) == 4
    for x in r.layers:
        assert x["output"].best == "eps_mismatch", str(r)
        h = next(h for h in x["output"].hypotheses if h["name"] == "eps_mismatch")
        assert h["parameters"]["eps_recovered"] == 1e-3


def test_eps_is_taken_as_every_number_argument_is(model):
    # A 0-d array (numpy's form of a number) was refused; a bool or a str is refused by name.
    r = fck.check_tflite(model, _input(), eps=np.array(1e-3))
    assert r.verdict == "EXPECTED", str(r)
    for bad in (True, "1e-3", 0.0, float("nan")):
        with pytest.raises(ValueError, match="^eps: must be a finite number > 0, got "):
            fck.check_tflite(model, _input(), eps=bad)


def test_float16_weights_leave_float32_bounds_and_say_why(model):
    c = tf.lite.TFLiteConverter.from_keras_model(model)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.target_spec.supported_types = [tf.float16]
    with contextlib.redirect_stdout(io.StringIO()):
        flat = c.convert()
    r = fck.check_tflite(model, _input(), tflite=flat)
    assert r.verdict == "UNEXPECTED"
    for x in r.layers:  # the weights read from their float16 store, not a delegate's scratch
        assert x["weight_type"] == "float16" and "float16" in x["note"]
        assert 1 < x["weights"].worst_ratio < 1e5


def test_a_model_without_a_pair_is_mistrusted():
    x = tf.keras.Input((5, 5, 2), batch_size=1)
    m = tf.keras.Model(x, L.Conv2D(3, 3)(x))
    r = fck.check_tflite(m, np.zeros((1, 5, 5, 2), np.float32))
    assert r.verdict == "MISTRUSTED" and not r.passed and r.exit_code == 1 and r.layers == []
    assert "no conv + BatchNorm layer to judge" in str(r)


@pytest.mark.parametrize("op", ["rescaling", "multiply", "lambda", "batchnorm", "rescaling before", "x*2 before"])
def test_a_constant_op_the_converter_folds_in_too_is_mistrusted_not_unexpected(op):
    """TFLite folds a constant multiply or add next to the conv into it as well (after the
    BatchNorm: Rescaling, x * 3, a Lambda, another BatchNorm; before the conv: Rescaling,
    x * 2): not a wrong fold, and not one foldcheck models. Never UNEXPECTED, never a pass."""
    x = tf.keras.Input((7, 7, 3), batch_size=1)
    before = {"rescaling before": lambda t: L.Rescaling(1 / 255)(t), "x*2 before": lambda t: t * 2.0}
    h = L.Conv2D(4, 3, padding="valid" if op == "x*2 before" else "same")(before.get(op, lambda t: t)(x))
    h = L.Dropout(0.1)(L.BatchNormalization()(h))
    h = {"rescaling": lambda t: L.Rescaling(2.0, 0.5)(t), "multiply": lambda t: t * 3.0,
         "lambda": lambda t: L.Lambda(lambda v: v - 0.25)(t),
         "batchnorm": lambda t: L.BatchNormalization()(t)}.get(op, lambda t: t)(h)
    m = _trained(tf.keras.Model(x, L.ReLU()(h)), 7)
    r = fck.check_tflite(m, _input()[:, :7, :7])
    assert r.verdict == "MISTRUSTED" and not r.passed, str(r)
    assert "into this conv as well" in r.layers[0]["note"]
    assert ("before the layer" if "before" in op else "after the layer") in r.layers[0]["note"]


def test_a_constant_op_that_changes_nothing_leaves_the_layer_expected():
    x = tf.keras.Input((7, 7, 3), batch_size=1)
    m = _trained(tf.keras.Model(x, L.BatchNormalization()(L.Conv2D(4, 3, padding="same")(x)) * 1.0), 7)
    assert fck.check_tflite(m, _input()[:, :7, :7]).verdict == "EXPECTED"


def test_the_op_after_a_nested_model_ending_in_a_batchnorm_is_seen():
    inner = tf.keras.Sequential([tf.keras.Input((7, 7, 3)), L.Conv2D(4, 3, padding="same"), L.BatchNormalization()])
    x = tf.keras.Input((7, 7, 3), batch_size=1)
    m = _trained(tf.keras.Model(x, L.Rescaling(2.0)(inner(x))), 8)
    r = fck.check_tflite(m, _input()[:, :7, :7])
    assert r.verdict == "MISTRUSTED" and "rescaling" in r.layers[0]["note"], str(r)
    assert fck.check_tflite(_trained(tf.keras.Model(x, L.ReLU()(inner(x))), 8), _input()[:, :7, :7]).passed


def _cli(*args, cwd):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    return subprocess.run([sys.executable, "-m", "foldcheck.keras", *args], capture_output=True, text=True,
                          cwd=cwd, check=False, timeout=600)


def test_the_command_line_exits_0_1_and_2_and_refuses_bad_inputs_by_name(model, tmp_path):
    model.save(tmp_path / "m.keras")
    ok = _cli("m.keras", cwd=tmp_path)
    assert ok.returncode == 0 and "seed 0" in ok.stdout and "check_tflite: EXPECTED" in ok.stdout, ok.stderr[-2000:]
    eps = _cli("m.keras", "--eps", "1e-5", "--format", "json", cwd=tmp_path)
    assert eps.returncode == 1 and '"verdict": "UNEXPECTED"' in eps.stdout
    np.save(tmp_path / "hwc.npy", _input()[0])
    np.save(tmp_path / "small.npy", _input()[:, :5, :5])
    np.save(tmp_path / "nan.npy", np.where(np.arange(363).reshape(1, 11, 11, 3) == 7, np.nan, _input()))
    (tmp_path / "bad.tflite").write_bytes(b"not a flatbuffer")
    refused = {("--input", "hwc.npy"): "4-D", ("--input", "small.npy"): "does not run on x",
               ("--input", "nan.npy"): "NaN at index 7", ("--input", "/dev/null"): "error",
               ("--tflite", "bad.tflite"): "error", ("--eps", "0"): "eps: must be a finite number > 0",
               ("--eps", "nan"): "eps: must be a finite number > 0"}
    for args, says in refused.items():
        r = _cli("m.keras", *args, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
    assert _cli("missing.keras", cwd=tmp_path).returncode == 2


def _mutated(flat, change):
    """The converted model with its conv ops (and their weight and bias tensors) given to
    change(ops, model) to alter: [(op, weight tensor, bias tensor)] in graph order."""
    from tensorflow.lite.tools import flatbuffer_utils  # noqa: PLC0415

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(flat))
    g = m.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    convs = [(op, g.tensors[op.inputs[1]], g.tensors[op.inputs[2]]) for op in g.operators
             if codes[op.opcodeIndex] in (3, 4)]  # CONV_2D, DEPTHWISE_CONV_2D
    change(convs, m)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def _times(tensor, model, index, factor):
    """One value of a float32 tensor of the flatbuffer model multiplied by factor."""
    data = np.frombuffer(bytes(model.buffers[tensor.buffer].data), np.float32).copy()
    data[index] *= np.float32(factor)
    model.buffers[tensor.buffer].data = np.frombuffer(data.tobytes(), np.uint8)


def _swap(convs, _):
    (_, w1, b1), (_, w2, b2) = convs[:2]
    w1.buffer, w2.buffer, b1.buffer, b2.buffer = w2.buffer, w1.buffer, b2.buffer, b1.buffer


CHANGES = {  # each makes the converted model compute something else than the Keras model
    "weights and bias of two layers swapped": _swap,
    "RELU6 made RELU": lambda c, _: setattr(c[0][0].builtinOptions, "fusedActivationFunction", 1),
    "RELU6 dropped": lambda c, _: setattr(c[0][0].builtinOptions, "fusedActivationFunction", 0),
    "stride 2": lambda c, _: setattr(c[1][0].builtinOptions, "strideH", 2),
    "padding VALID": lambda c, _: setattr(c[1][0].builtinOptions, "padding", 1),
    "dilation 2": lambda c, _: setattr(c[1][0].builtinOptions, "dilationWFactor", 2),
    "the second conv reading the model's input": lambda c, _: c[1][0].inputs.__setitem__(0, c[0][0].inputs[0]),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_converted_model_computing_something_else_is_unexpected(change):
    """Its folds can each be right and still be at the wrong layer, with the wrong geometry or
    activation: matched by place, compared with the Keras layer's geometry and activation."""
    x = tf.keras.Input((9, 9, 8), batch_size=1)
    h = L.ReLU(6.0)(L.BatchNormalization(name="b1")(L.Conv2D(8, 3, padding="same", name="c1")(x)))
    m = _trained(tf.keras.Model(x, L.BatchNormalization(name="b2")(L.Conv2D(8, 3, padding="same", name="c2")(h))), 2)
    xin = np.random.default_rng(0).standard_normal((1, 9, 9, 8)).astype(np.float32)
    flat = fck.convert(m)
    assert fck.check_tflite(m, xin, tflite=flat).verdict == "EXPECTED"
    r = fck.check_tflite(m, xin, tflite=_mutated(flat, CHANGES[change]))
    assert r.verdict == "UNEXPECTED", str(r)


@pytest.mark.parametrize("between", ["dropout", "linear activation"])
def test_a_pair_with_an_inference_no_op_between_is_judged(between):
    x = tf.keras.Input((7, 7, 3), batch_size=1)
    h = L.Conv2D(4, 3, padding="same", name="c")(x)
    h = L.Dropout(0.3)(h) if between == "dropout" else L.Activation("linear")(h)
    m = _trained(tf.keras.Model(x, L.BatchNormalization(name="b")(h)), 3)
    xin = _input()[:, :7, :7]
    flat = fck.convert(m)
    r = fck.check_tflite(m, xin, tflite=flat)
    assert [row["layer"] for row in r.layers] == ["c + b"] and r.passed, str(r)
    bad = fck.check_tflite(m, xin, tflite=_mutated(flat, lambda c, model: _times(c[0][2], model, 2, 1 + 1e-5)))
    assert bad.verdict == "UNEXPECTED" and bad.layers[0]["weights"].worst_channel == 2


@pytest.mark.parametrize("conv", ["separable", "conv1d"])
def test_a_pair_foldcheck_does_not_model_is_listed_not_judged_and_counted(conv):
    if conv == "conv1d":
        x = tf.keras.Input((9, 3), batch_size=1)
        m = tf.keras.Model(x, L.BatchNormalization(name="b")(L.Conv1D(4, 3, name="c")(x)))
        xin = np.ones((1, 9, 3), np.float32)
    else:
        x = tf.keras.Input((7, 7, 3), batch_size=1)
        m = tf.keras.Model(x, L.BatchNormalization(name="b")(L.SeparableConv2D(4, 3, name="c")(x)))
        xin = _input()[:, :7, :7]
    if conv == "conv1d":
        with pytest.raises(ValueError, match="4-D"):
            fck.check_tflite(m, xin)
        assert fck.conv_bn_pairs(m)[1][0][2]
        return
    r = fck.check_tflite(m, xin)
    assert r.verdict == "MISTRUSTED" and r.skipped[0][0] == "b" and r.skipped[0][2]
    assert "not judged: b" in str(r)


def test_a_ratio_that_is_not_finite_is_reported_not_a_crash():
    x = tf.keras.Input((5, 5, 2), batch_size=1)
    m = _trained(tf.keras.Model(x, L.BatchNormalization()(L.Conv2D(3, 3, padding="same")(x))), 4)
    xin = np.ones((1, 5, 5, 2), np.float32)
    r = fck.check_tflite(m, xin, tflite=_mutated(fck.convert(m), lambda c, model: _times(c[0][1], model, 0, np.nan)))
    assert r.verdict != "EXPECTED" and r.layers[0]["weights"].verdict != "EXPECTED"
    assert str(r).startswith("check_tflite: ")


def test_tflite_check_is_a_result_answer_first(model):
    """TFLiteCheck derives from foldcheck.results.Result: its report's first line is the answer
    (the verdict and its reason), the table after it."""
    from foldcheck.results import Result  # noqa: PLC0415

    r = fck.check_tflite(model, _input())
    assert isinstance(r, Result) and r.command == "check_tflite" and r.passed and r.exit_code == 0, str(r)
    lines = r.report().splitlines()
    assert lines[0] == r.answer() == f"check_tflite: EXPECTED: {r.reason}" and "layer" in lines[2], str(r)
    assert json.loads(r.to_json())["verdict"] == "EXPECTED" and r["command"] == "check_tflite"


def test_x_that_is_not_real_numbers_is_refused():
    m = _model()
    with pytest.raises(ValueError, match="real numbers"):
        fck.check_tflite(m, _input().astype(np.complex64))


@pytest.mark.parametrize("after", ["swish", "sigmoid", "leaky relu"])
def test_a_fused_relu_where_keras_has_another_activation_is_unexpected(after):
    x = tf.keras.Input((7, 7, 3), batch_size=1)
    act = {"swish": L.Activation("swish"), "sigmoid": L.Activation("sigmoid"), "leaky relu": L.LeakyReLU(0.1)}[after]
    m = _trained(tf.keras.Model(x, L.Conv2D(4, 1)(act(L.BatchNormalization()(L.Conv2D(4, 3, padding="same")(x))))), 5)
    xin = _input()[:, :7, :7]
    flat = fck.convert(m)
    assert fck.check_tflite(m, xin, tflite=flat).passed
    r = fck.check_tflite(m, xin, tflite=_mutated(flat, lambda c, _: setattr(c[0][0].builtinOptions,
                                                                          "fusedActivationFunction", 1)))
    assert r.verdict == "UNEXPECTED" and "applies RELU" in r.layers[0]["note"], str(r)


@pytest.mark.parametrize("shape", ["two identical ReLUs", "Reshape then ReLU", "Flatten then ReLU"])
def test_a_relu_the_converter_fuses_across_a_reshape_or_merges_is_expected(shape):
    """NASNetMobile feeds one BatchNorm to several identical ReLUs; the converter merges them and
    fuses one into the conv, as it fuses a ReLU across a reshape."""
    x = tf.keras.Input((6, 6, 3), batch_size=1)
    h = L.BatchNormalization()(L.Conv2D(4, 3, padding="same")(x))
    out = {"two identical ReLUs": lambda t: L.Concatenate()([L.ReLU()(t), L.ReLU()(t)]),
           "Reshape then ReLU": lambda t: L.ReLU()(L.Reshape((36, 4))(t)),
           "Flatten then ReLU": lambda t: L.ReLU()(L.Flatten()(t))}[shape](h)
    m = _trained(tf.keras.Model(x, out), 6)
    r = fck.check_tflite(m, _input()[:, :6, :6])
    assert r.passed and r.layers[0]["output"] is not None, str(r)


def test_a_batchnorm_shift_moved_past_a_spatial_constant_is_mistrusted_not_unexpected():
    """Before an add of a constant that varies over space (a positional embedding), the
    converter folds only the BatchNorm's scale into the conv and moves its shift into the add:
    an honest model whose conv alone is not the fold. Not judged, and never a false alarm."""
    x = tf.keras.Input((8, 8, 4), batch_size=1)
    p = np.random.default_rng(4).normal(0, 1, (1, 8, 8, 6)).astype(np.float32)
    h = L.BatchNormalization()(L.Conv2D(6, 3, padding="same")(x)) + p
    m = _trained(tf.keras.Model(x, L.Conv2D(3, 1)(h)), 1)
    r = fck.check_tflite(m, np.random.default_rng(0).standard_normal((1, 8, 8, 4)).astype(np.float32))
    assert r.verdict == "MISTRUSTED" and "add" in r.layers[0]["note"], str(r)


def test_defaults_are_the_cpp_commands():
    """check_tflite's precision and threads are the C++ commands' (read through _core)."""
    import inspect  # noqa: PLC0415

    from foldcheck import _core  # noqa: PLC0415

    ours = inspect.signature(fck.check_tflite).parameters
    for name in ("precision", "threads"):
        assert ours[name].default == _core.diagnose_defaults[name] == _core.fold_check_defaults[name], name


def test_layer_names_with_control_characters_are_shown_escaped():
    """A Keras layer named with ESC (a terminal colour sequence), CR, a tab or a line feed (the
    TFLite converter refuses such names in a model; a check_tflite result holds them as its
    rows): the text report's rows show them as the core's reports show names (\\u001B, \\r,
    \\t, \\n: foldcheck._core.neutralised), one row each, columns aligned; the JSON exact."""
    name = "c\x1b[31mRED\r\t\nverdict: EXPECTED\x07 + b\x1b[2J"
    rows = [{"layer": name, "verdict": "UNEXPECTED", "kind": "CONV_2D", "activation": "NONE", "weights": None,
             "output": None, "note": "next to op\x1b]0;title\x07"},
            {"layer": "c2 + b2", "verdict": "EXPECTED", "kind": "CONV_2D", "activation": "NONE", "weights": None,
             "output": None, "note": None}]
    r = fck.TFLiteCheck(rows, [("bn\r\nverdict: EXPECTED", "not after a conv", True)])
    assert json.loads(r.to_json())["layers"][0]["layer"] == name
    text = r.report()
    shown = "c\\u001B[31mRED\\r\\t\\nverdict: EXPECTED\\u0007 + b\\u001B[2J"
    assert shown in text and "next to op\\u001B]0;title\\u0007" in text and "bn\\r\\nverdict: EXPECTED" in text, text
    assert not [c for c in "\x1b\r\t\x07" if c in text] and "\nverdict: EXPECTED" not in text
    lines = text.split("\n")
    row, other = next(x for x in lines if shown in x), next(x for x in lines if x.startswith("  c2 + b2"))
    assert row.index("CONV_2D") == other.index("CONV_2D")  # padded after escaping


# Issue 40: every public function of foldcheck.keras refuses a wrong argument by name (a
# TypeError or ValueError saying which and what it is) before it runs anything; no raw error
# from TensorFlow, TFLite or Python reaches the user. Before: tflite=b"" and tflite=5 raised
# TFLite's errors (5 was read as five zero bytes), model=None an AttributeError, model="m.keras"
# TFLite's converter's error, and a model whose layer is named 'conv 1' or '卷积' TensorFlow's
# "TypeError: 'NoneType' object is not callable" from inside the converter.
@pytest.mark.parametrize("tflite, error, message", [
    (b"", ValueError, "check_tflite: tflite is not a TFLite model (a flatbuffer with the identifier TFL3 at byte 4): "
                      "0 bytes"),
    (5, TypeError, "check_tflite: tflite must be the converted model (bytes) or a .tflite file's path, got 5 (int)"),
    ([1, 2], TypeError, "got [1, 2] (list)"),
    (bytearray(b"not a flatbuffer"), ValueError, "tflite is not a TFLite model"),
    ("/no/such.tflite", ValueError, "check_tflite: tflite: cannot read '/no/such.tflite' (No such file or directory)"),
    ("/", ValueError, "check_tflite: tflite: cannot read '/'"),
])
def test_a_wrong_tflite_is_refused_by_name(model, tflite, error, message):
    with pytest.raises(error) as e:
        fck.check_tflite(model, _input(), tflite=tflite)
    assert type(e.value) is error and message in str(e.value), str(e.value)


MODEL_TAKERS = {"check_tflite": lambda m: fck.check_tflite(m, _input()), "convert": fck.convert,
                "conv_bn_pairs": fck.conv_bn_pairs, "layers": lambda m: list(fck.layers(m)),
                "all_ops": lambda m: list(fck.all_ops(m)), "record": lambda m: fck.record(m, _input(), [])}


@pytest.mark.parametrize("bad", [None, "m.keras", 5, "layer"], ids=["none", "path", "int", "a layer"])
@pytest.mark.parametrize("function", list(MODEL_TAKERS))
def test_every_function_taking_a_model_refuses_what_is_not_one(function, bad):
    bad = L.Conv2D(2, 1) if bad == "layer" else bad
    with pytest.raises(TypeError) as e:
        MODEL_TAKERS[function](bad)
    assert str(e.value).startswith(f"{function}: model must be a Keras model (tf.keras.Model"), str(e.value)
    assert f"({type(bad).__name__})" in str(e.value)


@pytest.mark.parametrize("function", ["check_tflite", "convert", "conv_bn_pairs"])
def test_a_model_not_built_is_refused(function):
    m = tf.keras.Sequential([L.Conv2D(2, 1), L.BatchNormalization()], name="unbuilt")
    with pytest.raises(ValueError, match=rf"^{function}: model 'unbuilt' is not built"):
        MODEL_TAKERS[function](m)


def test_the_helpers_refuse_what_is_not_theirs(model):
    with pytest.raises(TypeError, match=r"^keras_layer: conv must be a Keras Conv2D or DepthwiseConv2D, got None"):
        fck.keras_layer(None, None)
    with pytest.raises(TypeError, match=r"^keras_layer: bn must be a Keras BatchNormalization, got "):
        fck.keras_layer(model.get_layer("c1"), model.get_layer("c1"))
    with pytest.raises(TypeError, match=r"^converted_convs: flat must be the converted model's bytes, got int"):
        fck.converted_convs(5, None)
    with pytest.raises(TypeError, match=r"^converted_convs: it must be a tf.lite.Interpreter"):
        fck.converted_convs(b"", None)


def test_precision_and_threads_are_refused_before_anything_runs():
    # With no pair to check, they reached no core function: any value was taken.
    x = tf.keras.Input((5, 5, 2), batch_size=1)
    m = tf.keras.Model(x, L.Conv2D(3, 3)(x))
    for kw, message in (({"precision": "64"}, "^precision: must be an integer"),
                        ({"threads": -1}, "^threads: must be an integer"), ({"precision": True}, "^precision: ")):
        with pytest.raises(ValueError, match=message):
            fck.check_tflite(m, np.zeros((1, 5, 5, 2), np.float32), **kw)


def _named(conv="c1", relu="relu"):
    """A conv + BatchNorm model with these names (the same weights for every name)."""
    x = tf.keras.Input((6, 6, 2), batch_size=1)
    h = L.BatchNormalization(name="bn")(L.Conv2D(3, 3, padding="same", name=conv)(x))
    m = tf.keras.Model(x, L.ReLU(name=relu)(h), name="named")
    rng = np.random.default_rng(5)
    weights = [rng.normal(0, 0.5, w.shape).astype(np.float32) for w in m.get_weights()]
    weights[5] = np.abs(weights[5]) + 0.5  # the moving variance
    m.set_weights(weights)
    return m


@pytest.mark.parametrize("names", [{"conv": "conv 1"}, {"conv": "卷积"}, {"conv": "c\u202eevil"},
                                   {"relu": "relu 1"}],
                         ids=["space", "cjk", "bidi", "activation"])
def test_names_the_converter_cannot_take_are_named_not_a_tensorflow_error(names):
    m = _named(**names)
    bad = names.get("conv") or names["relu"]
    x = np.random.default_rng(2).standard_normal((1, 6, 6, 2)).astype(np.float32)
    for function, call in (("check_tflite", lambda: fck.check_tflite(m, x)), ("convert", lambda: fck.convert(m))):
        with pytest.raises(ValueError) as e:
            call()
        text = str(e.value)
        assert text.startswith(f"{function}: model {m.name!r}: the TFLite converter cannot convert it"), text
        assert repr(bad) in text and "rename them" in text and "give tflite=" in text, text
        assert "\u202e" not in text and "\n" not in text  # a bidi control is shown escaped
    # The same model converted under plain names is checked: the names are only the converter's.
    flat = fck.convert(_named())
    assert fck.check_tflite(m, x, tflite=flat).verdict == "EXPECTED"
