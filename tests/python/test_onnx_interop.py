"""Models written by the ONNX project's own Python package (not foldcheck's C++ test builder),
folded in float32 by numpy with ONNX Runtime's recipe, checked by the `foldcheck` binary.

What it guards: foldcheck reads what the ecosystem writes (initializers as float_data and as
raw_data, the IR and opset versions `onnx` writes today), a correct fold is EXPECTED in every
layer, and a fold error far below any tolerance users set by hand is found, with its layer
and channel, from the weights alone; a folded conv with right weights but another geometry
(stride, dilation, padding) is UNEXPECTED, the CLI naming each attribute with both values.

FOLDCHECK: the binary under test (the test suite sets it; default build/harness/foldcheck).
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))
F32 = np.float32


def bn_stats(rng, c):
    """Trained-like BatchNorm statistics for c channels, in float32."""
    return {
        "gamma": rng.normal(1.0, 0.2, c).astype(F32),
        "beta": rng.normal(0.0, 0.1, c).astype(F32),
        "mean": rng.normal(0.0, 0.3, c).astype(F32),
        "var": rng.uniform(0.2, 2.0, c).astype(F32),
    }


def make_layers(seed=7):
    """Two conv -> BatchNorm pairs with a Relu between: 3 -> 6 -> 5 channels."""
    rng = np.random.default_rng(seed)
    layers = []
    for name, cin, cout in (("conv_a", 3, 6), ("conv_b", 6, 5)):
        layers.append({
            "name": name,
            "w": rng.normal(0.0, 0.3, (cout, cin, 3, 3)).astype(F32),
            "b": rng.normal(0.0, 0.1, cout).astype(F32),
            **bn_stats(rng, cout),
        })
    return layers


def ort_fold(layer, eps):
    """ONNX Runtime's ConvBNFusion in float32: s = gamma / sqrt(var + eps); w' = w s;
    b' = (b - mean) s + beta. numpy's float32 sqrt and division are correctly rounded, as
    the engine's are, so this is the recipe bit for bit."""
    s = layer["gamma"] / np.sqrt(layer["var"] + F32(eps))
    w = layer["w"] * s[:, None, None, None]
    b = (layer["b"] - layer["mean"]) * s + layer["beta"]
    return w.astype(F32), b.astype(F32)


def tensor(name, array, raw):
    """An initializer stored as raw_data (numpy_helper) or as float_data (make_tensor)."""
    if raw:
        return numpy_helper.from_array(array, name)
    return helper.make_tensor(name, TensorProto.FLOAT, array.shape, array.ravel().tolist())


def save_model(path, layers, eps, folded=None):
    """The unfused model (folded=None), or the folded one with the given (w', b') per layer."""
    nodes, inits = [], []
    x = "x"
    for i, layer in enumerate(layers):
        n = layer["name"]
        raw = i % 2 == 1  # one layer of each storage kind
        w, b = (layer["w"], layer["b"]) if folded is None else folded[i]
        inits += [tensor(n + ".w", w, raw), tensor(n + ".b", b, raw)]
        nodes.append(helper.make_node("Conv", [x, n + ".w", n + ".b"], [n + ".y"], name=n,
                                      pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        x = n + ".y"
        if folded is None:
            bn = "bn" + n[-2:]
            for key in ("gamma", "beta", "mean", "var"):
                inits.append(tensor(f"{bn}.{key}", layer[key], raw))
            nodes.append(helper.make_node("BatchNormalization",
                                          [x] + [f"{bn}.{k}" for k in ("gamma", "beta", "mean", "var")],
                                          [bn + ".y"], name=bn, epsilon=eps))
            x = bn + ".y"
        if i + 1 < len(layers):
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}.y"], name=f"relu{i}"))
            x = f"relu{i}.y"
    cout = layers[-1]["w"].shape[0]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, cout, 10, 10])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnx-python")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def accuracy_diff(model, observed):
    r = subprocess.run([FOLDCHECK, "accuracy-diff", str(model), "--observed", str(observed),
                        "--format", "json", "--no-timing", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx_interop")
    eps = 1e-5
    layers = make_layers()
    folds = [ort_fold(layer, eps) for layer in layers]
    save_model(d / "model.onnx", layers, eps)
    save_model(d / "folded.onnx", layers, eps, folds)
    return d, layers, folds, eps


def test_correct_fold_is_expected_in_every_layer(models):
    d, layers, _, _ = models
    code, report = accuracy_diff(d / "model.onnx", d / "folded.onnx")
    assert code == 0
    assert report["verdict"] == "EXPECTED"
    assert [lay["name"] for lay in report["layers"]] == [lay["name"] for lay in layers]
    assert all(lay["verdict"] == "EXPECTED" for lay in report["layers"])


@pytest.mark.parametrize("layer_index, channel", [(0, 4), (1, 2)])
def test_one_channel_off_by_2ppm_is_found_by_layer_and_channel(models, tmp_path, layer_index, channel):
    d, layers, folds, eps = models
    bad = [(w.copy(), b.copy()) for w, b in folds]
    bad[layer_index][0][channel] *= F32(1 + 2e-6)  # ~30 float32 ULP; far inside rtol=1e-4
    save_model(tmp_path / "corrupt.onnx", layers, eps, bad)
    # A tolerance users pick by hand does not see it.
    assert np.allclose(bad[layer_index][0], folds[layer_index][0], rtol=1e-4, atol=1e-5)
    code, report = accuracy_diff(d / "model.onnx", tmp_path / "corrupt.onnx")
    assert code == 1
    assert report["verdict"] == "UNEXPECTED"
    flagged = [lay for lay in report["layers"] if lay["verdict"] != "EXPECTED"]
    assert [lay["name"] for lay in flagged] == [layers[layer_index]["name"]]
    assert flagged[0]["worst_channel"] == channel


def test_eps_mismatch_is_not_excused(models, tmp_path):
    """A fold that used Keras's eps (1e-3) where the model says 1e-5: a bug, not rounding."""
    d, layers, _, eps = models
    wrong = [ort_fold(layer, 1e-3) for layer in layers]
    save_model(tmp_path / "keras_eps.onnx", layers, eps, wrong)
    code, report = accuracy_diff(d / "model.onnx", tmp_path / "keras_eps.onnx")
    assert code == 1
    assert len(report["layers"]) == len(layers)
    assert all(lay["verdict"] == "UNEXPECTED" for lay in report["layers"])


def with_geometry(src, dst, layer, **attrs):
    """The model at src with `layer`'s conv attributes replaced by attrs (None: removed)."""
    model = onnx.load(str(src))
    node = [n for n in model.graph.node if n.name == layer][0]
    kept = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(k, v) for k, v in attrs.items() if v is not None])
    onnx.save(model, str(dst))


@pytest.mark.parametrize("attrs, note", [
    ({"strides": [2, 2]}, "the observed layer has strides [2, 2], the model's [1, 1]"),
    ({"dilations": [2, 2], "pads": [2, 2, 2, 2]},
     "the observed layer has dilations [2, 2], the model's [1, 1]; pads [2, 2, 2, 2], the model's [1, 1, 1, 1]"),
    ({"pads": [2, 2, 0, 0]}, "the observed layer has pads [2, 2, 0, 0], the model's [1, 1, 1, 1]"),
    ({"pads": None, "auto_pad": "SAME_LOWER"}, None),  # stride 1, kernel 3: pads 1 on each side, the same conv
])
def test_a_fold_of_another_geometry_is_unexpected_naming_it(models, tmp_path, attrs, note):
    """The folded weights are right; the folded conv computes something else (or, for an
    equivalent auto_pad, the same): the CLI exits 1 naming each attribute with both values."""
    d, layers, _, _ = models
    with_geometry(d / "folded.onnx", tmp_path / "other.onnx", "conv_a", **attrs)
    code, report = accuracy_diff(d / "model.onnx", tmp_path / "other.onnx")
    conv_a, conv_b = report["layers"]
    assert conv_a["fold"]["verdict"] == "EXPECTED" and conv_b["verdict"] == "EXPECTED"
    if note is None:
        assert code == 0 and conv_a["verdict"] == "EXPECTED" and "observed_note" not in conv_a
        return
    assert code == 1 and report["verdict"] == "UNEXPECTED" and conv_a["verdict"] == "UNEXPECTED"
    assert conv_a["observed_note"] == note
    changed = [k for k in ("strides", "dilations", "pads") if k in attrs]
    assert [x["attribute"] for x in conv_a["not_the_layer"]] == changed
    text = subprocess.run([FOLDCHECK, "accuracy-diff", str(d / "model.onnx"), "--observed",
                           str(tmp_path / "other.onnx"), "--no-timing", "-q"],
                          capture_output=True, text=True, timeout=600)
    assert text.returncode == 1 and note in text.stdout and "UNEXPECTED" in text.stdout
