"""TensorFlow/Keras as a frontend (issue 24): a Keras Conv2D + BatchNormalization (epsilon 1e-3,
momentum 0.99) folded by the TFLite converter, through tools/engines/tflite_fold.py.

What it guards: the converter's folded weights are within every recipe's bound (EXPECTED;
none of foldcheck's recipes reproduces them bit for bit: the converter folds in its own order);
the converted model's output on an input is the layer as given with Keras' eps (diagnose
EXPECTED); held to a PyTorch-style eps of 1e-5 instead, diagnose names eps_mismatch and
recovers eps = 1e-3 — the hypothesis meets its real source.

FOLDCHECK: the binary under test (the test suite sets it).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))
TOOL = ROOT / "tools" / "engines" / "tflite_fold.py"


def run(*args):
    r = subprocess.run([FOLDCHECK, *args, "--format", "json"], capture_output=True, text=True, check=False)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(r.stdout)


def test_keras_layer_folded_by_the_tflite_converter(tmp_path):
    rng = np.random.default_rng(12)
    w = rng.normal(0, 0.2, (8, 4, 3, 3)).astype(np.float32)
    bn = {"gamma": rng.normal(1, 0.2, 8), "beta": rng.normal(0, 0.1, 8), "mean": rng.normal(0, 0.3, 8),
          "var": rng.uniform(0.1, 2, 8)}
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 4, 8, 8)).astype(np.float32))
    np.savez(tmp_path / "keras.npz", **{k: v.astype(np.float32) for k, v in bn.items()})  # Keras' own eps
    out = tmp_path / "tflite"
    r = subprocess.run([sys.executable, str(TOOL), "--weights", str(tmp_path / "w.npy"), "--bn", str(tmp_path / "keras.npz"),
                        "--input", str(tmp_path / "x.npy"), str(out)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    z = dict(np.load(out / "bn.npz"))
    assert float(z["eps"]) == 1e-3
    bn_args = []
    for k in ("gamma", "beta", "mean", "var"):
        np.save(tmp_path / f"{k}.npy", z[k])
        bn_args += ["--" + k, str(tmp_path / f"{k}.npy")]
    e = run("explain", "--original", str(tmp_path / "w.npy"), "--observed", str(out / "folded_weights.npy"), *bn_args,
            "--eps", "1e-3")
    assert e["verdict"] == "EXPECTED"
    assert set(e["explained_by"]) >= {"pytorch", "tvm", "onnxruntime", "onnxoptimizer"}
    layer = ["--input", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npy"), "--observed", str(out / "output.npy")]
    assert run("diagnose", *layer, "--bn", str(out / "bn.npz"))["verdict"] == "EXPECTED"
    np.savez(tmp_path / "torch.npz", **{**{k: z[k] for k in ("gamma", "beta", "mean", "var")}, "eps": np.float64(1e-5)})
    d = run("diagnose", *layer, "--bn", str(tmp_path / "torch.npz"))
    assert d["verdict"] == "UNEXPECTED" and d["best"] == "eps_mismatch"
    h = next(x for x in d["hypotheses"] if x["name"] == "eps_mismatch")
    assert h["parameters"]["eps_recovered"] == 1e-3
