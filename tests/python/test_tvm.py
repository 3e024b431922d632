"""Real TVM (issue 24): the forum thread's fold reproduced by TVM itself, and which foldcheck
recipe TVM's Relax fold is.

What it guards: apache-tvm (pinned in tools/python/requirements.txt) folds the thread's
workload (the printed weights 2.1122932, 5.5735774, 2.0870073 and a fresh BatchNorm) into
the thread's printed values, -5 ppm, with foldcheck's `tvm` recipe bit-exact; on trained-like
BatchNorm statistics, where the recipes part, Relax's FoldBatchnormToConv2D + FoldConstant is
foldcheck's `onnxruntime`/`onnxoptimizer` division form bit for bit (weights, explain) and its
bias beta - mean * s, not Relay's (1 / sqrt(var + eps)) * gamma (foldcheck's `tvm` recipe).

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
TOOL = ROOT / "adapters" / "tvm_fold.py"


def fold(tmp, *args):
    out = tmp / "tvm"
    r = subprocess.run([sys.executable, str(TOOL), str(out), *args], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return out, r.stdout


def explain(out, *bn):
    r = subprocess.run([FOLDCHECK, "explain", "--original", str(out / "weights.npy"), "--observed",
                        str(out / "folded_weights.npy"), *bn, "--format", "json"], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_the_thread_seed_is_what_tvm_computes(tmp_path):
    out, printed = fold(tmp_path, "--seed")
    assert "folded: 2.1122828, 5.5735493, 2.0869968" in printed
    w, fw = np.load(out / "weights.npy").reshape(-1), np.load(out / "folded_weights.npy").reshape(-1)
    drift = 1e6 * (fw.astype(np.float64) - w) / w
    assert np.all((drift > -5.1) & (drift < -4.9))
    e = explain(out)
    assert e["verdict"] == "EXPECTED" and "tvm" in e["bit_exact_recipes"]


def test_relax_folds_by_division_not_relays_reciprocal(tmp_path):
    rng = np.random.default_rng(24)
    o = 16
    w = rng.normal(0, 0.2, (o, 8, 3, 3)).astype(np.float32)
    bn = {"gamma": rng.normal(1, 0.2, o), "beta": rng.normal(0, 0.1, o), "mean": rng.normal(0, 0.3, o),
          "var": rng.uniform(0.05, 2.0, o)}
    np.save(tmp_path / "w.npy", w)
    args = ["--weights", str(tmp_path / "w.npy")]
    for k, v in bn.items():
        np.save(tmp_path / f"{k}.npy", v.astype(np.float32))
        args += ["--" + k, str(tmp_path / f"{k}.npy")]
    out, _ = fold(tmp_path, *args)
    e = explain(out, *args[2:])
    assert e["verdict"] == "EXPECTED"
    assert e["bit_exact_recipes"] == ["onnxruntime", "onnxoptimizer"]  # the Relay-form recipes differ here
    # The bias, in float32 as the rewrite writes it: beta - mean * (gamma / sqrt(var + float32(eps))).
    f = {k: v.astype(np.float32) for k, v in bn.items()}
    s = f["gamma"] / np.sqrt(f["var"] + np.float32(1e-5))
    assert np.array_equal(np.load(out / "folded_bias.npy"), f["beta"] - f["mean"] * s)


@pytest.mark.slow
def test_bisect_through_real_tvm_names_an_injected_pass_and_none_when_honest(tmp_path):
    """adapters/tvm_bisect.py as `foldcheck bisect --cmd`: TVM's own passes and relax.build
    on one layer with trained-like statistics. Honest: EXPECTED, no culprit. With BadEpsilon
    (a pass that sets batch_norm's epsilon to 1e-3, Keras' default): that pass is named."""
    layer = layer_files(tmp_path, 7)
    cmd = (f"{sys.executable} {ROOT / 'adapters' / 'tvm_bisect.py'} --enabled {{enabled}} --disabled {{disabled}} "
           f"-o {{out}} " + " ".join(layer))
    code, honest = bisect(cmd, "FoldBatchnormToConv2D,FoldConstant", layer)
    assert code == 0 and honest["verdict"] == "EXPECTED" and honest["culprit"] is None
    code, broken = bisect(cmd + " --inject-bad-eps", "BadEpsilon,FoldBatchnormToConv2D,FoldConstant", layer)
    assert code == 1 and broken["culprit"] == "BadEpsilon"
