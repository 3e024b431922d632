"""TensorFlow/Keras as a frontend (issue 24): a Keras Conv2D + BatchNormalization (epsilon 1e-3,
momentum 0.99) folded by the TFLite converter, through adapters/tflite_fold.py.

What it guards: the converter's folded weights are within every recipe's bound (EXPECTED;
none of foldcheck's recipes reproduces them bit for bit: the converter folds in its own order);
the converted model's output on an input is the layer as given with Keras' eps (diagnose
EXPECTED); held to a PyTorch-style eps of 1e-5 instead, diagnose names eps_mismatch and
recovers eps = 1e-3 — the hypothesis meets its real source. And the converter as the compiler
of `foldcheck bisect --cmd` (adapters/tflite_bisect.py, its options as the passes): the
float32-preserving options name none; an option that leaves float32 (float16 weights, int8
weights where the layer has 1024 or more) is named, as is BadEpsilon, a frontend that drops
the layer's eps for Keras' 1e-3.

FOLDCHECK: the binary under test (the test suite sets it).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from compiler_layer import bisect, layer_files

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))
TOOL = ROOT / "adapters" / "tflite_fold.py"


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
    r = subprocess.run([sys.executable, str(TOOL), "--weights", str(tmp_path / "w.npy"),
                        "--bn", str(tmp_path / "keras.npz"), "--input", str(tmp_path / "x.npy"), str(out)],
                       capture_output=True, text=True, check=False)
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
    layer = ["--input", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npy"),
             "--observed", str(out / "output.npy")]
    assert run("diagnose", *layer, "--bn", str(out / "bn.npz"))["verdict"] == "EXPECTED"
    np.savez(tmp_path / "torch.npz", **{**{k: z[k] for k in ("gamma", "beta", "mean", "var")}, "eps": np.float64(1e-5)})
    d = run("diagnose", *layer, "--bn", str(tmp_path / "torch.npz"))
    assert d["verdict"] == "UNEXPECTED" and d["best"] == "eps_mismatch"
    h = next(x for x in d["hypotheses"] if x["name"] == "eps_mismatch")
    assert h["parameters"]["eps_recovered"] == 1e-3


BISECT = (f"{sys.executable} {ROOT / 'adapters' / 'tflite_bisect.py'} --enabled {{enabled}} "
          "--disabled {disabled} -o {out} ")
HONEST = "sparsity,reduce_type_precision,unfold_large_splat_constant,disable_fuse_mul_and_fc"


@pytest.mark.slow
def test_bisect_through_the_tflite_converter_names_the_option_that_leaves_float32(tmp_path):
    layer = layer_files(tmp_path, 11)  # 8x4x3x3: 288 weights, below dynamic-range quantization's 1024
    cmd = BISECT + " ".join(layer)
    code, honest = bisect(cmd, HONEST + ",dynamic_range_int8", layer)
    assert code == 0 and honest["verdict"] == "EXPECTED" and honest["culprit"] is None
    code, f16 = bisect(cmd, "reduce_type_precision,float16_weights,sparsity", layer)
    assert code == 1 and f16["culprit"] == "float16_weights"
    code, eps = bisect(cmd + " --inject-bad-eps", "sparsity,BadEpsilon,reduce_type_precision", layer)
    assert code == 1 and eps["culprit"] == "BadEpsilon"


@pytest.mark.slow
def test_bisect_names_dynamic_range_quantization_where_it_quantizes(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 8, 6, 6)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.normal(0, 0.2, (16, 8, 3, 3)).astype(np.float32))  # 1152 weights
    np.savez(tmp_path / "bn.npz", gamma=rng.normal(1, 0.2, 16).astype(np.float32),
             var=rng.uniform(0.1, 2, 16).astype(np.float32), eps=np.float32(1e-3))  # mean, beta: a fresh BN's
    layer = ["--input", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npy"), "--bn", str(tmp_path / "bn.npz")]
    code, r = bisect(BISECT + " ".join(layer), "sparsity,dynamic_range_int8,reduce_type_precision", layer)
    assert code == 1 and r["culprit"] == "dynamic_range_int8"


def test_a_fresh_batchnorm_folded_by_the_converter_is_read_from_the_conv_itself(tmp_path):
    """With a fresh BatchNorm the converter names the folded bias "arith.constant": the fold is
    read from the conv op's inputs, not from tensor names."""
    rng = np.random.default_rng(13)
    np.save(tmp_path / "w.npy", rng.normal(0, 0.2, (8, 4, 3, 3)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 4, 8, 8)).astype(np.float32))
    out = tmp_path / "tflite"
    r = subprocess.run([sys.executable, str(TOOL), "--weights", str(tmp_path / "w.npy"),
                        "--input", str(tmp_path / "x.npy"), str(out)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    e = run("explain", "--original", str(tmp_path / "w.npy"), "--observed", str(out / "folded_weights.npy"), "--bn",
            str(out / "bn.npz"))
    assert e["verdict"] == "EXPECTED"
