"""`foldcheck engines` with the real engines (ONNX Runtime, onnxoptimizer, OpenVINO, oneDNN) on
a small residual model built here with trained-like BatchNorm statistics.

What it guards: every engine's honest fold of every layer is EXPECTED (weights and per-layer
outputs); ONNX Runtime's `extended` FusedConv is read with its activation and `all`'s NCHWc
convs are refused naming the domain; a channel scaled by (1 + 2e-6) in ORT's optimized model is
named, layer and channel, from the weights and from the per-layer outputs; an engine that
writes no weights (an adapter of the user's) is judged from its outputs alone; a broken
adapter is an engine failure with its reason, never a pass.

FOLDCHECK: the binary under test (the test suite sets it).
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))
ENV = {**os.environ, "FOLDCHECK_PYTHON": sys.executable}
F32 = np.float32


def conv_bn(rng, nodes, inits, x, name, cin, cout, k, stride=1):
    """Conv (no bias) -> BatchNormalization with trained-like statistics; returns the BN output."""
    w = rng.normal(0.0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)).astype(F32)
    stats = {"gamma": rng.normal(1.0, 0.2, cout), "beta": rng.normal(0.0, 0.1, cout),
             "mean": rng.normal(0.0, 0.3, cout), "var": rng.uniform(0.2, 2.0, cout)}
    inits.append(numpy_helper.from_array(w, name + ".w"))
    for key, v in stats.items():
        inits.append(numpy_helper.from_array(v.astype(F32), f"{name}.bn.{key}"))
    nodes.append(helper.make_node("Conv", [x, name + ".w"], [name + ".y"], name=name, kernel_shape=[k, k],
                                  pads=[k // 2] * 4, strides=[stride, stride]))
    nodes.append(helper.make_node("BatchNormalization", [name + ".y"] + [f"{name}.bn.{k}" for k in stats],
                                  [name + ".bn.y"], name=name + ".bn", epsilon=1e-5))
    return name + ".bn.y"


def relu(nodes, x, name):
    nodes.append(helper.make_node("Relu", [x], [name], name=name))
    return name


def residual_model(path, seed=3):
    """stem 3->16 3x3, a residual block of two 16->16 3x3 convs, a linear 1x1 projection (its
    BatchNorm's output is the next conv's input, as in MobileNetV2's bottlenecks: one value that
    is a layer's output and the next layer's input), a 1x1 stride-2 16->24, pooled."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    a = relu(nodes, conv_bn(rng, nodes, inits, "x", "stem", 3, 16, 3), "stem.relu")
    b = relu(nodes, conv_bn(rng, nodes, inits, a, "block.conv1", 16, 16, 3), "block.relu1")
    c = conv_bn(rng, nodes, inits, b, "block.conv2", 16, 16, 3)
    nodes.append(helper.make_node("Add", [c, a], ["block.add"], name="block.add"))
    d = relu(nodes, "block.add", "block.relu2")
    p = conv_bn(rng, nodes, inits, d, "proj", 16, 16, 1)
    e = relu(nodes, conv_bn(rng, nodes, inits, p, "head", 16, 24, 1, stride=2), "head.relu")
    nodes.append(helper.make_node("GlobalAveragePool", [e], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["y"], name="flatten"))
    graph = helper.make_graph(nodes, "residual",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test_engines")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def residual_model_dir(d):
    """d with the residual model (model.onnx) and a seeded input (x.npy)."""
    residual_model(d / "model.onnx")
    np.save(d / "x.npy", np.random.default_rng(0).normal(size=(2, 3, 20, 20)).astype(F32))
    return d


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return residual_model_dir(tmp_path_factory.mktemp("engines"))


def engines(model_dir, *args, expect=(0, 1)):
    r = subprocess.run([FOLDCHECK, "engines", str(model_dir / "model.onnx"), "--input", str(model_dir / "x.npy"),
                        "--format", "json", "--no-timing", "-q", *args],
                       capture_output=True, text=True, timeout=900, env=ENV)
    assert r.returncode in expect, r.stderr
    return r.returncode, json.loads(r.stdout)


ADAPTER = ROOT / "adapters" / "onnxruntime_engine.py"


def adapter(*args):
    """The built-in ONNX Runtime adapter with extra arguments, as an --adapter command."""
    return f"'{sys.executable}' '{ADAPTER}' " + " ".join(args) + " {model} {input} {outdir}"


LAYERS = ["stem", "block.conv1", "block.conv2", "proj", "head"]


@pytest.mark.parametrize("engine", ["onnxruntime:basic", "onnxruntime:extended", "onnxoptimizer", "openvino"])
def test_honest_engine_is_expected_in_every_layer(model, engine):
    code, r = engines(model, "--engine", engine)
    e = r["engines"][0]
    assert code == 0 and r["verdict"] == "EXPECTED", e
    assert e["failed"] is None and e["fusion_preserved"] is True
    assert [f["name"] for f in e["final_outputs"]] == ["y"] and e["final_outputs"][0]["verdict"] == "EXPECTED"
    assert [lay["name"] for lay in e["layers"]] == LAYERS
    for layer in e["layers"]:
        assert layer["verdict"] == "EXPECTED", layer
        out = layer["outputs"]
        assert out["verdict"] == "EXPECTED" and out["elements"] > 0
        assert out["channels"]["tested"] > 0 and out["channels"]["beyond_bound"] == 0
        assert out["channels"]["beyond_estimate"] == 0
        # The folded weights are checked whenever the engine wrote them.
        assert (layer["weights"] is not None) == e["folded_model"]


def test_extended_fused_conv_is_read_with_its_activation(model):
    _, r = engines(model, "--engine", "onnxruntime:extended")
    acts = {lay["name"]: lay["outputs"]["activation"] for lay in r["engines"][0]["layers"]}
    assert acts["stem"] == "Relu" and acts["head"] == "Relu"  # Conv + Relu became FusedConv
    assert acts["block.conv2"] is None  # its Relu comes after the Add: not fused
    assert acts["proj"] is None  # linear


def test_all_level_blocked_layout_is_refused_naming_the_domain(model):
    code, r = engines(model, "--engine", "onnxruntime:all")
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED"
    assert "com.microsoft.nchwc" in e["failed"] and "not supported" in e["failed"]


@pytest.mark.parametrize("layer, channel", [("block.conv1", 3), ("proj", 9), ("head", 17)])
def test_a_2ppm_channel_is_named_from_weights_and_outputs(model, layer, channel):
    code, r = engines(model, "--adapter",
                      "ort-corrupt=" + adapter("--level basic", f"--corrupt {layer}:{channel}:2e-6"))
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "UNEXPECTED"
    assert e["first_weights_beyond"] == layer and e["first_outputs_beyond"] == layer
    bad = [lay for lay in e["layers"] if lay["name"] == layer][0]
    assert bad["weights"]["worst_channel"] == channel
    worst = bad["outputs"]["channels"]["worst"]
    assert worst["channel"] == channel and abs(worst["rho_ppm"] - 2.0) < 0.5
    assert all(lay["verdict"] == "EXPECTED" for lay in e["layers"] if lay["name"] != layer)


WRONG_OUTPUT = r'''
import json, shutil, subprocess, sys
import numpy as np
model, inp, out, ort = sys.argv[1:5]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
m = json.load(open(out + "/manifest.json"))
y = np.load(out + "/" + m["outputs"]["y"])
np.save(out + "/" + m["outputs"]["y"], y * np.float32(1.01))  # a 1% error after the last conv
'''


def script_adapter(tmp_path, label, text, *args):
    """An --adapter running the Python script `text` with {model} {input} {outdir} and `args`."""
    script = tmp_path / (label + ".py")
    script.write_text(text)
    return f"{label}='{sys.executable}' '{script}' {{model}} {{input}} {{outdir}} " + " ".join(f"'{a}'" for a in args)


def test_a_wrong_final_output_is_unexpected(model, tmp_path):
    code, r = engines(model, "--adapter", script_adapter(tmp_path, "wrong", WRONG_OUTPUT, ADAPTER))
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "UNEXPECTED"
    assert e["final_outputs"][0]["verdict"] == "UNEXPECTED"
    assert all(lay["verdict"] == "EXPECTED" for lay in e["layers"])  # every layer was right


FAKE_ENGINE = r'''
import json, os, shutil, subprocess, sys
import numpy as np
model, inp, out, channel = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# ONNX Runtime's values, renamed to the original model's (no folded model: outputs only),
# with one channel of the head's output scaled by (1 + 2e-6) as a faulty kernel would.
subprocess.run([sys.executable, sys.argv[5], "--level", "basic", model, inp, out + "/ort"], check=True)
m = json.load(open(out + "/ort/manifest.json"))
values = {}
for name, f in m["values"].items():
    v = np.load(out + "/ort/" + f)
    if name == "head.bn.y":
        v[:, channel] *= np.float32(1 + 2e-6)
    values[name] = "v%d.npy" % len(values)
    np.save(out + "/" + values[name], v)
json.dump({"protocol": 1, "engine": "fake", "values_of": "model", "values": values}, open(out + "/manifest.json", "w"))
'''


def test_an_engine_without_weights_is_judged_from_its_outputs(model, tmp_path):
    code, r = engines(model, "--adapter", script_adapter(tmp_path, "fake", FAKE_ENGINE, 5, ADAPTER))
    e = r["engines"][0]
    assert code == 1 and e["folded_model"] is False
    assert e["first_weights_beyond"] is None and e["first_outputs_beyond"] == "head"
    head = [lay for lay in e["layers"] if lay["name"] == "head"][0]
    assert head["weights"] is None and head["outputs"]["channels"]["worst"]["channel"] == 5


@pytest.mark.parametrize("command, reason", [
    ("exit 3", "exit 3"),
    ("echo oops >&2; exit 1", "oops"),
    ("true", "manifest.json"),
    ("mkfifo {outdir}/manifest.json", "not a regular file"),
    ("echo '{\"protocol\": 2, \"engine\": \"x\"}' > {outdir}/manifest.json", "`protocol` must be 1"),
    ("echo '{\"protocol\": 1, \"engine\": \"x\", \"values\": {\"a\": \"/etc/passwd\"}}' > {outdir}/manifest.json",
     "absolute path"),
    ("echo '{\"protocol\": 1, \"engine\": \"x\", \"values\": {\"a\": \"../x.npy\"}}' > {outdir}/manifest.json",
     "\"..\""),
])
def test_a_broken_adapter_is_an_engine_failure_never_a_pass(model, command, reason):
    code, r = engines(model, "--adapter", "broken=" + command)
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED" and r["verdict"] == "MISTRUSTED"
    assert reason in e["failed"]


def onednn_built():
    return subprocess.run([FOLDCHECK, "engines", "--help"], capture_output=True, text=True).returncode == 0 and \
        pathlib.Path(FOLDCHECK).parent.parent.joinpath("adapters", "foldcheck-onednn").exists()


def onednn_bf16_here():
    """Whether oneDNN (Debian 12's 2.6) offers direct bf16 convolutions on this CPU: it needs
    AVX-512 (avx512_core: its bf16 kernels emulate the conversions without AVX512-BF16); on a CPU
    with AVX2 only it offers none, and foldcheck-onednn leaves every bf16 layer out, saying so."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = set(f.read().split())
    return {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags


# The bf16 engine where oneDNN offers it here, else the float32 one: the tests of the adapter
# protocol below need an engine that computes its layers.
COMPUTING_ONEDNN = "onednn:bf16" if onednn_bf16_here() else "onednn"


@pytest.mark.skipif(not onednn_built(), reason="foldcheck-onednn not built (FOLDCHECK_BUILD_ONEDNN)")
@pytest.mark.parametrize("engine, runs", [("onednn", 4), ("onednn:bf16", 1)])
def test_onednn_every_recipe_is_expected(model, engine, runs):
    code, r = engines(model, "--engine", engine)
    if engine == "onednn:bf16" and not onednn_bf16_here():  # every layer left out: nothing judged
        e = r["engines"][0]
        assert code == 1 and r["verdict"] == "MISTRUSTED" and len(r["engines"]) == runs, r
        assert all(lay["verdict"] == "LEFT OUT" and "no direct bf16" in lay["outputs"]["left_out"]
                   for lay in e["layers"]), e
        return
    assert code == 0 and r["verdict"] == "EXPECTED", r
    assert len(r["engines"]) == runs
    for e in r["engines"]:
        assert all(lay["verdict"] == "EXPECTED" and lay["outputs"]["elements"] > 0 for lay in e["layers"]), e


@pytest.mark.skipif(not onednn_built(), reason="foldcheck-onednn not built (FOLDCHECK_BUILD_ONEDNN)")
def test_onednn_output_is_onednns_not_the_next_layers_input(model, tmp_path):
    """The projection's output and the head's input are one value name; each layer's own
    files (`layers`) keep oneDNN's output apart from foldcheck's activation."""
    engines(model, "--engine", COMPUTING_ONEDNN, "--work-dir", str(tmp_path))
    man = json.loads((tmp_path / "engine_1" / "manifest.json").read_text())
    assert set(man["layers"]) == set(LAYERS)
    proj_out = np.load(tmp_path / "engine_1" / man["layers"]["proj"]["output"])
    head_in = np.load(tmp_path / "engine_1" / man["layers"]["head"]["input"])
    assert proj_out.shape == head_in.shape and not np.array_equal(proj_out, head_in)


@pytest.mark.skipif(not onednn_built(), reason="foldcheck-onednn not built (FOLDCHECK_BUILD_ONEDNN)")
def test_onednn_winograd_left_out_layers_are_reported_not_passed(model):
    _, r = engines(model, "--engine", "onednn:winograd")
    e = r["engines"][0]
    left = [lay for lay in e["layers"] if lay["verdict"] == "LEFT OUT"]
    assert all("left_out" in lay["outputs"] for lay in left)
    judged = [lay for lay in e["layers"] if lay["verdict"] != "LEFT OUT"]
    assert e["verdict"] == ("MISTRUSTED" if not judged else "EXPECTED")


def cpu_flags():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return set(f.read().split())


@pytest.mark.skipif(not onednn_built(), reason="foldcheck-onednn not built (FOLDCHECK_BUILD_ONEDNN)")
def test_onednn_fpmath_bf16_is_held_to_the_bf16_bound(model):
    """oneDNN's fpmath_mode bf16 (issue 41): bf16 operands on CPUs with AVX512-BF16, float32
    elsewhere (a note says so); either way within the bf16 arithmetic's bound, every layer judged."""
    code, r = engines(model, "--engine", "onednn:fpmath-bf16")
    e = r["engines"][0]
    assert code == 0 and e["verdict"] == "EXPECTED" and e["arithmetic"] == "bf16", e
    assert all(lay["outputs"]["elements"] > 0 for lay in e["layers"]), e
    assert ("avx512_bf16" in cpu_flags()) != any("no AVX512-BF16" in n for n in e["notes"]), e["notes"]


TAMPER = r'''
import json, os, subprocess, sys
import numpy as np
model, inp, out, mode, ort = sys.argv[1:6]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
path = out + "/manifest.json"
m = json.load(open(path))
first = m["values"]["x"] if "x" in m["values"] else None
stem_out = m["values"]["stem.relu"]
if mode == "fifo":
    os.remove(out + "/" + stem_out)
    os.mkfifo(out + "/" + stem_out)
elif mode == "outside_link":
    os.remove(out + "/" + stem_out)
    np.save(out + "/../outside.npy", np.zeros((2, 16, 20, 20), np.float32))
    os.symlink(os.path.abspath(out + "/../outside.npy"), out + "/" + stem_out)
elif mode == "nan_input":
    v = np.load(out + "/" + stem_out)
    v[0, 0, 0, 0] = np.nan
    np.save(out + "/" + stem_out, v)
elif mode == "shifted_input":
    np.save(out + "/" + first, np.load(out + "/" + first) + np.float32(1))
elif mode == "names_wrong":
    m["values"] = {k + ".typo": v for k, v in m["values"].items()}
elif mode == "declared_bf16":
    m["weight_dtype"] = "bfloat16"
json.dump(m, open(path, "w"))
'''


@pytest.mark.parametrize("mode, layer, verdict, reason", [
    ("fifo", None, "MISTRUSTED", "not a regular file"),
    ("outside_link", None, "MISTRUSTED", "outside the adapter's output directory"),
    ("declared_bf16", None, "MISTRUSTED", "declares bfloat16 weights"),
    ("nan_input", "block.conv1", "MISTRUSTED", "NaN or Inf"),
    ("shifted_input", "stem", "UNEXPECTED", "differ from the input it was given"),
    ("names_wrong", None, "MISTRUSTED", "which is not a value of the engine's folded model"),
])
def test_tampered_adapter_output_is_never_a_pass(model, tmp_path, mode, layer, verdict, reason):
    adapter_cmd = script_adapter(tmp_path, "tamper", TAMPER, mode, ADAPTER)
    code, r = engines(model, "--adapter", adapter_cmd, "--engine", "onnxruntime:basic", "--timeout", "120")
    by_label = {e["label"]: e for e in r["engines"]}
    tampered, honest = by_label["tamper"], by_label["onnxruntime:basic"]
    assert code == 1 and tampered["verdict"] == verdict, tampered
    assert honest["verdict"] == "EXPECTED"  # the next engine is still checked, on its own input copy
    if layer is None:
        assert reason in tampered["failed"] and tampered["layers"] == []
    else:
        bad = [lay for lay in tampered["layers"] if lay["name"] == layer][0]
        assert bad["verdict"] == verdict and reason in json.dumps(bad)


def test_the_last_conv_whose_output_is_the_graph_output_is_checked(tmp_path):
    rng = np.random.default_rng(5)
    nodes, inits = [], []
    a = relu(nodes, conv_bn(rng, nodes, inits, "x", "stem", 3, 8, 3), "stem.relu")
    y = conv_bn(rng, nodes, inits, a, "last", 8, 8, 3)
    graph = helper.make_graph(nodes, "last", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 8, 12, 12])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "model.onnx"))
    np.save(tmp_path / "x.npy", rng.normal(size=(1, 3, 12, 12)).astype(F32))
    code, r = engines(tmp_path, "--engine", "onnxruntime:basic", "--engine", "openvino")
    assert code == 0, r
    for e in r["engines"]:
        assert [lay["outputs"]["elements"] for lay in e["layers"]] == [8 * 144, 8 * 144], e


def test_usage_errors_exit_2(model, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    for args, msg in [(["--engine", "onnxruntime:basic", "--work-dir", str(tmp_path / "busy")],
                       "must be an empty directory"),
                      (["--engine", "nosuch"], "unknown engine 'nosuch'"),
                      (["--adapter", "a=true", "--adapter", "a=true"], "given twice"),
                      (["--engine", "onnxruntime:basic", "--python", str(tmp_path / "nopython")], "--python")]:
        r = subprocess.run([FOLDCHECK, "engines", str(model / "model.onnx"), *args], capture_output=True, text=True,
                           env=ENV)
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep me"
    nopair = tmp_path / "nopair.onnx"
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(nopair))
    r = subprocess.run([FOLDCHECK, "engines", str(nopair), "--engine", "onnxruntime:basic"], capture_output=True,
                       text=True, env=ENV)
    assert r.returncode == 2 and "no layer -> BatchNormalization pair" in r.stderr


# Issue 40: every file an adapter names is held to one rule (a regular file inside OUTDIR,
# links resolved, opened without blocking, size-limited); before, a FIFO named as
# `folded_model` blocked foldcheck in open() for ever (past --timeout, deaf to SIGTERM), and a
# `folded_model` could be a link leading out of OUTDIR.
def shell_engines(model_dir, command, *args, env=None, timeout=30):
    """`engines` with one --adapter shell command; ends within `timeout` s or the test fails."""
    r = subprocess.run([FOLDCHECK, "engines", str(model_dir / "model.onnx"), "--input", str(model_dir / "x.npy"),
                        "--format", "json", "--no-timing", "-q", "--adapter", "shell=" + command, *args],
                       capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})})
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def manifest(**fields):
    """Shell text writing {outdir}/manifest.json with these fields (protocol and engine given)."""
    return "echo '" + json.dumps({"protocol": 1, "engine": "shell", **fields}) + "' > {outdir}/manifest.json"


NPY = f"'{sys.executable}' -c 'import numpy, sys; numpy.save(sys.argv[1], numpy.zeros((2, 3, 20, 20), numpy.float32))'"


@pytest.mark.parametrize("setup, fields, reason", [
    ("mkfifo {outdir}/f.onnx", {"folded_model": "f.onnx"}, "not a regular file (a FIFO)"),
    ("mkfifo {outdir}/p; ln -s p {outdir}/f.onnx", {"folded_model": "f.onnx"}, "not a regular file (a FIFO)"),
    ("mkdir {outdir}/f.onnx", {"folded_model": "f.onnx"}, "not a regular file (a directory)"),
    ("ln -s {model} {outdir}/f.onnx", {"folded_model": "f.onnx"}, "leads outside the adapter's output directory"),
    ("ln -s /dev/zero {outdir}/f.onnx", {"folded_model": "f.onnx"}, "leads outside the adapter's output directory"),
    ("mkfifo {outdir}/../p; ln -s ../p {outdir}/f.onnx", {"folded_model": "f.onnx"}, "leads outside"),
    ("mkfifo {outdir}/v.npy", {"values": {"x": "v.npy", "stem.bn.y": "v.npy"}}, "not a regular file (a FIFO)"),
    ("mkfifo {outdir}/y.npy", {"outputs": {"y": "y.npy"}}, "not a regular file (a FIFO)"),
    ("mkfifo {outdir}/i.npy", {"layers": {"stem": {"input": "i.npy", "output": "i.npy"}}},
     "not a regular file (a FIFO)"),
    ("ln -s /dev/zero {outdir}/i.npy", {"layers": {"stem": {"input": "i.npy", "output": "i.npy"}}}, "leads outside"),
])
def test_every_file_an_adapter_names_is_held_to_one_rule(model, setup, fields, reason):
    t0 = time.monotonic()
    code, r = shell_engines(model, setup + "; " + manifest(**fields), "--timeout", "5")
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED" and reason in e["failed"], e
    # The file by the adapter's OUTDIR, not by the temporary path it had (removed with it).
    assert "shell's OUTDIR/" in e["failed"] and "foldcheck-engines-" not in e["failed"], e
    assert time.monotonic() - t0 < 20


@pytest.mark.parametrize("fields", [{"folded_model": "."}, {"folded_model": "./"},
                                    {"values": {"x": ".", "stem.bn.y": "."}}, {"outputs": {"y": "."}}])
def test_a_file_that_is_outdir_itself_is_refused_as_a_directory(model, fields):
    # It was refused as "leads outside OUTDIR", which it does not.
    code, r = shell_engines(model, manifest(**fields))
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED", e
    assert "is the adapter's output directory itself, a directory" in e["failed"] and "outside" not in e["failed"], e


@pytest.mark.parametrize("replace", [
    "rm -r {outdir} && ln -s ELSEWHERE {outdir}",                               # OUTDIR itself a link
    "mv {outdir} ELSEWHERE.moved && ln -s ELSEWHERE {outdir}",                  # moved away, a link in its place
    "w=$(dirname {outdir}); mkdir -p ELSEWHERE/w/engine_1; cp ELSEWHERE/manifest.json ELSEWHERE/w/engine_1; "
    "mv $w ELSEWHERE/w.moved && ln -s ELSEWHERE/w $w",                          # the work directory above it
])
def test_outdir_replaced_by_a_link_elsewhere_is_refused_naming_it(model, tmp_path, replace):
    # Before, foldcheck read the engine's files from wherever the link led: its manifest here
    # (notes "from elsewhere") was read and reported.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "manifest.json").write_text(json.dumps({"protocol": 1, "engine": "elsewhere",
                                                         "notes": ["from elsewhere"]}))
    code, r = shell_engines(model, replace.replace("ELSEWHERE", str(elsewhere)))
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED", e
    assert "the adapter's output directory is no longer the directory foldcheck made" in e["failed"], e
    assert "nothing in it is read" in e["failed"] and not e.get("notes"), e


def test_outdir_removed_and_made_anew_in_place_is_read(model):
    # Not a link: a directory of foldcheck's still (an adapter may clean its output so).
    code, r = shell_engines(model, "rm -r {outdir} && mkdir {outdir} && " + manifest(notes=["made anew"]))
    e = r["engines"][0]
    assert "no longer the directory" not in (e.get("failed") or "") and e.get("notes") == ["made anew"], e


def test_a_manifest_that_is_a_link_out_of_outdir_is_refused(model):
    code, r = shell_engines(model, "ln -s {model} {outdir}/manifest.json")
    assert code == 1 and "leads outside the adapter's output directory" in r["engines"][0]["failed"]


def test_an_adapter_file_over_the_size_limit_is_refused_before_it_is_read(model):
    big = "head -c 3000000 /dev/zero > {outdir}/f.onnx; " + manifest(folded_model="f.onnx")
    code, r = shell_engines(model, big, env={"FOLDCHECK_MAX_ELEMENTS": "100000"})
    assert code == 1 and "over the limit" in r["engines"][0]["failed"], r["engines"][0]


def temporaries(tmpdir):
    return [p.name for p in tmpdir.iterdir() if p.name.startswith("foldcheck-engines-")]


def adapter_processes(token):
    """The pids of processes whose command line holds `token` (the adapter's own sleep)."""
    found = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(d))
        except (OSError, ValueError):
            continue
    return found


# SIGQUIT (issue 40) was not caught: foldcheck ended at once, its temporaries and the adapter
# left behind.
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT])
@pytest.mark.parametrize("command", [
    "sleep 30.{tag}",                     # waiting for the adapter
    "trap '' TERM INT QUIT; sleep 30.{tag}; true",   # an adapter deaf to them (SIGKILL after the grace)
])
def test_a_signal_ends_foldcheck_promptly_and_removes_its_temporaries(model, tmp_path, sig, command):
    tag = f"{os.getpid()}{int(sig):02d}{len(command)}"
    command = command.replace("{tag}", tag)
    p = subprocess.Popen([FOLDCHECK, "engines", str(model / "model.onnx"), "--input", str(model / "x.npy"), "-q",
                          "--adapter", "slow=" + command], env={**ENV, "TMPDIR": str(tmp_path)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        for _ in range(500):  # until the adapter runs
            if any((tmp_path / d / "engine_1").exists() for d in temporaries(tmp_path)):
                break
            time.sleep(0.01)
        time.sleep(0.2)
        t0 = time.monotonic()
        p.send_signal(sig)
        code = p.wait(timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        p.kill()
    assert code == -sig  # ended by the signal (130 / 143 / 131 in a shell)
    assert temporaries(tmp_path) == []
    assert adapter_processes(f"30.{tag}") == []  # the adapter ended with foldcheck
    assert not [f for f in os.listdir(tmp_path) if f.startswith("core")]  # nor a core dump left


# Issue 40: the manifest refuses keys the protocol does not have and names that are not the
# model's (a typo "fusion_preserverd": false gave EXPECTED, exit 0).
@pytest.mark.parametrize("fields, reason", [
    ({"fusion_preserverd": False}, "unknown key `fusion_preserverd`"),
    ({"layers": {"stem": {"input": "a.npy", "output": "b.npy", "outptu": "c.npy"}}},
     "unknown key `layers.stem.outptu`"),
    ({"values": {"stem.bn.y.typo": "a.npy"}}, "`values` names 'stem.bn.y.typo', which is not a value of the model"),
    ({"layers": {"stme": {"input": "a.npy", "output": "b.npy"}}}, "`layers` names 'stme'"),
    ({"left_out": {"haed": "no kernel"}}, "`left_out` names 'haed'"),
    ({"outputs": {"logits": "a.npy"}}, "`outputs` names 'logits', which is not a graph output of the model"),
    # Issue 41: what the layers are held to, named from one vocabulary.
    ({"arithmetic": "tf16"}, "`arithmetic`: unknown arithmetic"),
    ({"accumulation": "winograd_f3x3"}, "`accumulation` must be \"direct\", \"winograd_f2x3\""),
    ({"layers": {"stem": {"input": "a.npy", "output": "b.npy", "accumulation": "winograd"}}},
     "`layers.stem.accumulation` must be"),
])
def test_the_manifest_refuses_unknown_keys_and_names(model, fields, reason):
    code, r = shell_engines(model, manifest(**fields))
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED" and reason in e["failed"], e
    assert "manifest.json" in e["failed"]


def linear_bn_model(path, seed=7):
    """A conv + BatchNorm, then a Linear (Gemm) + BatchNorm1d, as torchvision-style heads have."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    a = relu(nodes, conv_bn(rng, nodes, inits, "x", "stem", 3, 8, 3), "stem.relu")
    nodes.append(helper.make_node("GlobalAveragePool", [a], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"))
    inits.append(numpy_helper.from_array(rng.normal(0.0, 0.3, (10, 8)).astype(F32), "fc.w"))
    inits.append(numpy_helper.from_array(rng.normal(0.0, 0.1, 10).astype(F32), "fc.b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["fc.y"], name="fc", transB=1))
    stats = {"gamma": rng.normal(1.0, 0.2, 10), "beta": rng.normal(0.0, 0.1, 10),
             "mean": rng.normal(0.0, 0.3, 10), "var": rng.uniform(0.2, 2.0, 10)}
    for key, v in stats.items():
        inits.append(numpy_helper.from_array(v.astype(F32), f"fc.bn.{key}"))
    nodes.append(helper.make_node("BatchNormalization", ["fc.y"] + [f"fc.bn.{k}" for k in stats], ["y"],
                                  name="fc.bn", epsilon=1e-5))
    graph = helper.make_graph(nodes, "linear_bn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("engine", ["onnxruntime:basic", "onnxruntime:extended", "onnxoptimizer", "openvino"])
def test_a_linear_bn_pair_is_checked_from_its_outputs(tmp_path, engine):
    """Issue 40: a Gemm -> BatchNormalization pair (folded or left unfolded by the engine) is
    judged from its per-layer outputs as a conv is; it was MISTRUSTED for every honest engine
    ("per-layer outputs are checked for Conv layers"), so any model with Linear + BN exited 1."""
    linear_bn_model(tmp_path / "model.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(4, 3, 12, 12)).astype(F32))
    code, r = engines(tmp_path, "--engine", engine)
    e = r["engines"][0]
    assert code == 0 and e["verdict"] == "EXPECTED", e
    fc = [lay for lay in e["layers"] if lay["name"] == "fc"][0]
    assert fc["verdict"] == "EXPECTED" and fc["outputs"]["elements"] == 40, fc


def test_the_fixture_model_with_external_data_runs_in_onnxruntime(tmp_path):
    """Issue 40: ONNX Runtime's adapter saved its optimized model of a model with external data
    referring to the original's data file, relative to OUTDIR where it is not: the adapter
    failed ("should be stored in .../engine_1/model.data, but it is not regular file")."""
    fixture = ROOT / "cases" / "models" / "fixture"
    code, r = engines(fixture, "--engine", "onnxruntime:basic", "--engine", "onnxruntime:extended")
    for e in r["engines"]:
        assert e["failed"] is None and e["verdict"] == "EXPECTED", e
        assert all(lay["verdict"] == "EXPECTED" for lay in e["layers"]), e
    assert code == 0


@pytest.mark.parametrize("data, reason", [
    ("mkfifo {outdir}/folded.data", "not a regular file"),
    ("ln -s {fixture}/folded.data {outdir}/folded.data", "outside the model's directory"),
])
def test_a_folded_models_external_data_is_held_to_the_same_rule(data, reason):
    """The folded model's external data file is a file the adapter names too: a FIFO there is
    refused at once, a link out of OUTDIR refused."""
    fixture = ROOT / "cases" / "models" / "fixture"
    command = (f"cp {fixture}/folded.onnx {{outdir}}/f.onnx; " + data.replace("{fixture}", str(fixture)) + "; "
               + manifest(folded_model="f.onnx"))
    t0 = time.monotonic()
    code, r = shell_engines(fixture, command)
    e = r["engines"][0]
    assert code == 1 and e["verdict"] == "MISTRUSTED" and reason in e["failed"], e
    # The file by the adapter's OUTDIR, not by the temporary path it had (removed with it).
    assert "shell's OUTDIR/" in e["failed"] and "foldcheck-engines-" not in e["failed"], e
    assert time.monotonic() - t0 < 20


@pytest.mark.skipif(not onednn_built(), reason="foldcheck-onednn not built (FOLDCHECK_BUILD_ONEDNN)")
def test_onednn_reports_a_linear_layer_left_out_not_missing(tmp_path):
    """foldcheck-onednn runs convolutions only: its Gemm layer is reported left out (not judged),
    never a missing value that makes the honest engine MISTRUSTED."""
    linear_bn_model(tmp_path / "model.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(4, 3, 12, 12)).astype(F32))
    code, r = engines(tmp_path, "--engine", COMPUTING_ONEDNN)
    e = r["engines"][0]
    assert code == 0 and e["verdict"] == "EXPECTED", e
    fc = [lay for lay in e["layers"] if lay["name"] == "fc"][0]
    assert fc["verdict"] == "LEFT OUT" and "convolutions only" in fc["outputs"]["left_out"], fc


GEOMETRY = r'''
import json, subprocess, sys
import onnx
from onnx import helper
model, inp, out, mode, ort = sys.argv[1:6]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
m = json.load(open(out + "/manifest.json"))
folded = onnx.load(out + "/" + m["folded_model"])
stem = [n for n in folded.graph.node if n.op_type == "Conv" and n.input[0] == "x"][0]
attrs = {"stride": {"strides": [2, 2]}, "same_upper": {"pads": None, "auto_pad": "SAME_UPPER"}}[mode]
kept = [a for a in stem.attribute if a.name not in attrs]
del stem.attribute[:]
stem.attribute.extend(kept + [helper.make_attribute(k, v) for k, v in attrs.items() if v is not None])
onnx.save(folded, out + "/" + m["folded_model"])
'''


@pytest.mark.parametrize("mode, verdict, note", [
    ("stride", "UNEXPECTED", "the engine's layer has strides [2, 2], the model's [1, 1]"),
    ("same_upper", "EXPECTED", None),  # stride 1, kernel 3: SAME_UPPER pads 1 on each side, the same conv
])
def test_an_engines_folded_layer_of_another_geometry_is_not_the_layer(model, tmp_path, mode, verdict, note):
    """The engine's folded stem conv has right weights but (stride) another stride: it computes
    something else, UNEXPECTED naming the attribute, its outputs not compared; or (same_upper)
    the same padding written as auto_pad: EXPECTED."""
    code, r = engines(model, "--adapter", script_adapter(tmp_path, "geometry", GEOMETRY, mode, ADAPTER))
    e = r["engines"][0]
    assert e["failed"] is None, e
    stem = [lay for lay in e["layers"] if lay["name"] == "stem"][0]
    assert stem["weights"]["verdict"] == "EXPECTED"  # the folded weights themselves are right
    assert stem["verdict"] == verdict and stem["not_the_layer"] == note
    assert code == (1 if note else 0) and e["verdict"] == verdict
    assert e["first_weights_beyond"] == ("stem" if note else None)  # not the fold, whatever its weights
    assert all(lay["verdict"] == "EXPECTED" for lay in e["layers"] if lay["name"] != "stem")
    if note:
        assert "not_the_layer" in stem["outputs"]["not_checked"]
        adapter = script_adapter(tmp_path, "geometry", GEOMETRY, mode, ADAPTER)
        text = subprocess.run([FOLDCHECK, "engines", str(model / "model.onnx"), "--input", str(model / "x.npy"),
                               "--no-timing", "-q", "--adapter", adapter],
                              capture_output=True, text=True, timeout=900, env=ENV)
        assert text.returncode == 1 and "not the model's layer: " + note in text.stdout


PLANT_LINKS = r'''
import os, subprocess, sys
model, inp, out, ort, victim, victim_dir = sys.argv[1:7]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
# Where foldcheck puts the next engine's input and OUTDIR: links to the user's own files.
n = int(os.path.basename(inp)[len("input_"):-len(".npy")]) + 1
os.symlink(victim, os.path.join(out, "..", f"input_{n}.npy"))
os.symlink(victim_dir, os.path.join(out, "..", f"engine_{n}"))
'''


def test_links_an_adapter_plants_for_the_next_engine_are_not_written_through(model, tmp_path):
    """An adapter that leaves links where foldcheck writes the next engine's input and OUTDIR
    (a buggy cleanup, a hostile script): the user's files they point to stay untouched, and
    the next engine still gets the model's input (EXPECTED)."""
    victim, victim_dir = tmp_path / "victim.npy", tmp_path / "victim_dir"
    victim.write_bytes(b"the user's file")
    victim_dir.mkdir()
    (victim_dir / "kept.txt").write_text("kept")
    planted = script_adapter(tmp_path, "plant", PLANT_LINKS, ADAPTER, victim, victim_dir)
    code, r = engines(model, "--adapter", planted, "--adapter", "next=" + adapter("--level basic"))
    assert victim.read_bytes() == b"the user's file"
    assert (victim_dir / "kept.txt").read_text() == "kept" and len(list(victim_dir.iterdir())) == 1
    assert code == 0 and [e["verdict"] for e in r["engines"]] == ["EXPECTED", "EXPECTED"]


SWAP_WORK_DIR = r'''
import os, shutil, subprocess, sys
model, inp, out, ort, victim_dir, how = sys.argv[1:7]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
work = os.path.dirname(os.path.abspath(out))
if how == "directory":  # a non-empty directory where the next engine's input goes
    os.makedirs(os.path.join(work, "input_2.npy", "sub"))
else:  # the work directory itself replaced by a link to a user's directory, or removed
    shutil.rmtree(work)
    if how == "link":
        os.symlink(victim_dir, work)
'''


@pytest.mark.parametrize("how", ["directory", "link", "removed"])
def test_an_adapter_that_replaces_the_work_directory_leaves_the_users_files_alone(model, tmp_path, how):
    """An adapter that leaves a directory at the next engine's input path, or replaces (or
    removes) foldcheck's work directory: the user's directory a link points to keeps its files,
    the first engine's result stays, the next engine is run (a directory at its input removed)
    or not run, said (MISTRUSTED), never a raw filesystem error (exit 2)."""
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    (victim_dir / "engine_2").mkdir()
    (victim_dir / "engine_2" / "keep.txt").write_text("kept")
    (victim_dir / "input_2.npy").write_bytes(b"the user's file")
    swap = script_adapter(tmp_path, "swap", SWAP_WORK_DIR, ADAPTER, victim_dir, how)
    code, r = engines(model, "--adapter", swap, "--adapter", "next=" + adapter("--level basic"))
    assert (victim_dir / "engine_2" / "keep.txt").read_text() == "kept"
    assert (victim_dir / "input_2.npy").read_bytes() == b"the user's file"
    first, second = r["engines"]
    if how == "directory":
        assert code == 0 and first["verdict"] == second["verdict"] == "EXPECTED"
    else:  # the first adapter's own files went with the directory: not read through a link either
        assert code == 1 and first["verdict"] == second["verdict"] == "MISTRUSTED", first
        assert "replaced or removed" in second["failed"]


def between_model(path, between):
    """x [1, 3, 10, 10] -> Conv c (6 x 3 x 3 x 3, pads 1) -> `between` (op types, chained) -> BatchNormalization bn
    (trained-like statistics) -> Relu -> y."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.normal(size=(6, 3, 3, 3)).astype(F32), "w"),
             numpy_helper.from_array(rng.uniform(0.5, 2, 6).astype(F32), "g"),
             numpy_helper.from_array(rng.normal(size=6).astype(F32), "b"),
             numpy_helper.from_array(rng.normal(size=6).astype(F32), "m"),
             numpy_helper.from_array(rng.uniform(0.5, 3, 6).astype(F32), "v")]
    nodes, value = [helper.make_node("Conv", ["x", "w"], ["c0"], name="c", pads=[1, 1, 1, 1])], "c0"
    for i, op in enumerate(between):
        nodes.append(helper.make_node(op, [value], [f"t{i}"], name=f"{op.lower()}{i}"))
        value = f"t{i}"
    nodes += [helper.make_node("BatchNormalization", [value, "g", "b", "m", "v"], ["n"], name="bn", epsilon=1e-5),
              helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "between",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 10, 10])],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    np.save(path.parent / "x.npy", rng.normal(size=(1, 3, 10, 10)).astype(F32))


UNFOLDED = r'''
import json, shutil, sys
import numpy as np, onnx, onnxruntime as ort
model, inp, out, scale = sys.argv[1:5]
m = onnx.load(model)  # run as it is (nothing folded), the conv's and the BatchNorm's outputs added
m.graph.output.extend([onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None) for v in ("c0", "n")])
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
y, c0, n = ort.InferenceSession(m.SerializeToString(), so).run(None, {"x": np.load(inp)})
if scale in ("nan", "inf"):  # one output NaN or infinite
    n[0, 2, 1, 1] = np.float32(scale)
else:  # its BatchNorm's output, channel 2, off by a factor (1: none)
    n[:, 2] *= np.float32(scale)
for name, v in (("x", np.load(inp)), ("c0", c0), ("n", n), ("y", y)):
    np.save(f"{out}/{name}.npy", v)
shutil.copy(model, out + "/f.onnx")
json.dump({"protocol": 1, "engine": "unfolded", "folded_model": "f.onnx", "outputs": {"y": "y.npy"},
           "values": {"x": "x.npy", "c0": "c0.npy", "n": "n.npy"}}, open(out + "/manifest.json", "w"))
'''


@pytest.mark.parametrize("between", [["Identity"], ["Identity", "Identity"]])
def test_a_layer_left_unfolded_behind_no_op_nodes_is_judged_unfolded(tmp_path, between):
    """A conv whose BatchNorm an engine left unfolded, with Identity nodes between them as
    exporters leave (pairs are found through them), is an unfolded layer judged at the BatchNorm's output (an
    engine's choice: EXPECTED when right); its conv's raw output was compared with the folded
    layer's (UNEXPECTED at 1.9e7 on the project's fixture, where onnxoptimizer folds nothing
    through its Identity). A wrong value there is still found, a NaN or an infinity counted and said."""
    between_model(tmp_path / "model.onnx", between)
    code, r = engines(tmp_path, "--engine", "onnxoptimizer")
    e = r["engines"][0]
    c = e["layers"][0]
    assert code == 0 and e["verdict"] == "EXPECTED" and "not_folded" in c["weights"], e
    assert c["verdict"] == "EXPECTED" and c["outputs"]["elements"] == 600, c
    (tmp_path / "unfolded.py").write_text(UNFOLDED)
    run = f"'{sys.executable}' '{tmp_path / 'unfolded.py'}' {{model}} {{input}} {{outdir}}"
    for scale, verdict in ((1, "EXPECTED"), (1 + 1e-3, "UNEXPECTED"), ("nan", "UNEXPECTED"), ("inf", "UNEXPECTED")):
        code, r = engines(tmp_path, "--adapter", f"mine={run} {scale}")
        c = r["engines"][0]["layers"][0]
        assert c["verdict"] == verdict and code == (verdict != "EXPECTED"), r["engines"][0]
        # A NaN or an infinity is counted and said, not left out of the ratios unsaid.
        assert c["outputs"]["nonfinite"] == (scale in ("nan", "inf")), c
    text = subprocess.run([FOLDCHECK, "engines", str(tmp_path / "model.onnx"), "--input", str(tmp_path / "x.npy"), "-q",
                           "--adapter", f"mine={run} nan"], capture_output=True, text=True, timeout=300, env=ENV).stdout
    assert "1 output(s) NaN or infinite where the layer's value is finite" in text and "NaN/Inf" in text, text


TAMPER_MODEL = r'''
import subprocess, sys
model, inp, out, ort, how = sys.argv[1:6]
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
import onnx
from onnx import numpy_helper
m = onnx.load(model)
if how == "variance":  # the first BatchNorm's variance doubled, saved over the user's file
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"][0]
    init = [i for i in m.graph.initializer if i.name == bn.input[4]][0]
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 2, init.name))
if how == "data":  # the external data file beside it, one weight's byte flipped (the model file untouched)
    import os
    data = os.path.join(os.path.dirname(model), "model.data")
    b = bytearray(open(data, "rb").read())
    b[100] ^= 0x40
    open(data, "wb").write(bytes(b))
else:
    onnx.save(m, model)  # "same": the file rewritten with the same model (bytes may differ)
'''


@pytest.mark.parametrize("how", ["variance", "same", "data"])
def test_an_adapter_that_rewrites_the_model_file_is_not_judged_nor_are_the_engines_after_it(model, tmp_path, how):
    """{model} is the user's own file: an adapter that rewrites it (a BatchNorm's variance
    doubled), or the external data beside it, made the next, honest engine UNEXPECTED (it ran
    the changed model) and itself EXPECTED. Its results are of another model: MISTRUSTED, said,
    and the engines after it not run; an adapter that leaves the file alone is judged as before."""
    mine = tmp_path / "m"
    shutil.copytree(ROOT / "cases" / "models" / "fixture" if how == "data" else model, mine)
    before = (mine / "model.onnx").read_bytes()
    tamper = script_adapter(tmp_path, "tamper", TAMPER_MODEL, ADAPTER, how)
    code, r = engines(mine, "--adapter", tamper, "--adapter", "next=" + adapter("--level basic"))
    first, second = r["engines"]
    if how != "data" and (mine / "model.onnx").read_bytes() == before:  # the same bytes: nothing changed
        assert how == "same" and code == 0 and [first["verdict"], second["verdict"]] == ["EXPECTED", "EXPECTED"]
        return
    assert code == 1 and first["verdict"] == second["verdict"] == "MISTRUSTED", r
    assert "the adapter changed the model file it was given" in first["failed"], first
    assert second["failed"].startswith("not run: an earlier adapter changed the model file"), second


def linear_chain(path, form):
    """x [4, 6] -> MatMul l1 (6 -> 5) -> BatchNorm -> Relu -> MatMul l2 (5 -> 3) -> BatchNorm -> y; with
    `form`, that model folded (in float32: w * gamma / sqrt(var + eps)) and written as "gemm" (a Gemm
    with C, as ONNX Runtime's MatMulBnFusion writes it) or "matmul_add" (MatMul, then an Add of the bias)."""
    rng = np.random.default_rng(11)
    nodes, inits, value = [], [], "x"
    for i, (k, n) in enumerate(((6, 5), (5, 3)), 1):
        w = rng.normal(0, 0.4, (k, n)).astype(F32)
        g, b = rng.uniform(0.5, 1.5, n).astype(F32), rng.normal(0, 0.1, n).astype(F32)
        m, v = rng.normal(0, 0.2, n).astype(F32), rng.uniform(0.3, 2, n).astype(F32)
        out = "y" if i == 2 else f"l{i}.out"
        if form is None:
            inits += [numpy_helper.from_array(a, f"l{i}.{s}") for a, s in ((w, "w"), (g, "g"), (b, "b"), (m, "m"),
                                                                              (v, "v"))]
            nodes += [helper.make_node("MatMul", [value, f"l{i}.w"], [f"l{i}.mm"], name=f"l{i}"),
                      helper.make_node("BatchNormalization", [f"l{i}.mm"] + [f"l{i}.{s}" for s in "gbmv"], [out],
                                       name=f"l{i}.bn", epsilon=1e-5)]
        else:
            s = (g / np.sqrt(v + F32(1e-5))).astype(F32)
            inits += [numpy_helper.from_array((w * s).astype(F32), f"l{i}.w"),
                      numpy_helper.from_array((b - m * s).astype(F32), f"l{i}.c")]
            nodes += ([helper.make_node("Gemm", [value, f"l{i}.w", f"l{i}.c"], [out], name=f"l{i}")] if form == "gemm"
                      else [helper.make_node("MatMul", [value, f"l{i}.w"], [f"l{i}.mm"], name=f"l{i}"),
                            helper.make_node("Add", [f"l{i}.mm", f"l{i}.c"], [out], name=f"l{i}.add")])
        if i == 1:
            nodes.append(helper.make_node("Relu", [out], ["r"], name="relu"))
            value = "r"
    graph = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


RUN_FOLDED = r'''
import json, shutil, sys
import numpy as np, onnx, onnxruntime as ort
model, inp, out, folded = sys.argv[1:5]
m = onnx.load(folded)  # run as it is, every value an output
names = [o for n in m.graph.node for o in n.output if o not in {g.name for g in m.graph.output}]
m.graph.output.extend([onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None) for v in names])
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
x = np.load(inp)
got = ort.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})
values = {"x": x, **dict(zip([o.name for o in m.graph.output], got))}
for k, (name, v) in enumerate(values.items()):
    np.save(f"{out}/v{k}.npy", v)
shutil.copy(folded, out + "/f.onnx")
files = {name: f"v{k}.npy" for k, name in enumerate(values)}
manifest = {"protocol": 1, "engine": "as given", "folded_model": "f.onnx", "outputs": {"y": files.pop("y")},
            "values": files}
json.dump(manifest, open(out + "/manifest.json", "w"))
'''


@pytest.mark.parametrize("form", ["gemm", "matmul_add"])
def test_a_matmul_bn_folded_as_gemm_or_matmul_add_is_judged_per_layer(tmp_path, form):
    """MatMul + BatchNorm folded into a Gemm (ONNX Runtime's MatMulBnFusion, at every level) or
    into MatMul + Add: each layer matched and judged from its weights and outputs (the Gemm was
    "no counterpart", MISTRUSTED in every engine; MatMul + Add read without its bias)."""
    linear_chain(tmp_path / "model.onnx", None)
    np.save(tmp_path / "x.npy", np.random.default_rng(2).normal(size=(4, 6)).astype(F32))
    linear_chain(tmp_path / "folded.onnx", form)
    run = script_adapter(tmp_path, "given", RUN_FOLDED, tmp_path / "folded.onnx")
    code, r = engines(tmp_path, "--adapter", run, "--engine", "onnxruntime:basic")
    for e in r["engines"]:
        assert e["failed"] is None and e["verdict"] == "EXPECTED", e
        assert [lay["verdict"] for lay in e["layers"]] == ["EXPECTED", "EXPECTED"], e["layers"]
        assert all(lay["outputs"].get("elements") for lay in e["layers"]), e["layers"]
    assert code == 0


CHANGED_FINAL = r'''
import json, subprocess, sys
import numpy as np, onnx
from onnx import numpy_helper
model, inp, out, ort, layer, channel, by = sys.argv[1:8]
# Every value from an honest run; the final output from the same model with one output channel
# of one conv scaled, as a faulty kernel of that layer would compute it.
subprocess.run([sys.executable, ort, "--level", "basic", model, inp, out], check=True)
m = json.load(open(out + "/manifest.json"))
g = onnx.load(model)
w = next(i for i in g.graph.initializer if i.name == layer + ".w")
a = numpy_helper.to_array(w).copy()
a[int(channel)] *= np.float32(1 + float(by))
w.CopyFrom(numpy_helper.from_array(a, w.name))
onnx.save(g, out + "/changed.onnx")
subprocess.run([sys.executable, ort, "--level", "basic", out + "/changed.onnx", inp, out + "/changed"], check=True)
y = np.load(out + "/changed/" + json.load(open(out + "/changed/manifest.json"))["outputs"]["y"])
np.save(out + "/" + m["outputs"]["y"], y)
'''


def test_a_final_output_beyond_its_band_is_suspicious_and_names_the_channel(model, tmp_path):
    """The engines' final outputs have accuracy-diff's band: an honest engine's is within it (and
    states its floor); one whose output moved along one conv channel by a change far inside the
    end-to-end bound is SUSPICIOUS (exit 1), the band naming that layer and channel."""
    code, r = engines(model, "--engine", "onnxruntime:basic")
    f = r["engines"][0]["final_outputs"][0]
    assert code == 0 and f["verdict"] == "EXPECTED"
    assert f["band"]["computed"] and f["band"]["beyond_count"] == 0 and f["band"]["floor_ppm"]["median"] > 0

    code, r = engines(model, "--adapter", script_adapter(tmp_path, "drift", CHANGED_FINAL, ADAPTER,
                                                         "block.conv1", 3, 3e-6))
    e = r["engines"][0]
    f = e["final_outputs"][0]
    assert f["worst_ratio"] < 0.5  # element by element the bound sees nothing
    assert code == 1 and f["verdict"] == "SUSPICIOUS" and e["verdict"] == "SUSPICIOUS", f
    assert (f["band"]["worst"]["layer"], f["band"]["worst"]["channel"]) == ("block.conv1", 3), f["band"]
    assert f["band"]["worst"]["change_ppm"] == pytest.approx(3, rel=0.2)
    assert all(lay["verdict"] == "EXPECTED" for lay in e["layers"])  # every layer's values were the honest run's
