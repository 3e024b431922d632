"""A small conv + BatchNorm layer with trained-like statistics as files, and `foldcheck bisect
--cmd` on it: what the real-compiler tests (test_tvm.py, test_torch_compile.py) share."""
import json
import os
import pathlib
import subprocess

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))


def layer_files(d, seed):
    """x [1,4,8,8], w [8,4,3,3], bn.npz (gamma, beta, mean, var, eps 1e-5) in d: the layer's
    arguments, as foldcheck bisect and the adapters take them."""
    rng = np.random.default_rng(seed)
    np.save(d / "x.npy", rng.standard_normal((1, 4, 8, 8)).astype(np.float32))
    np.save(d / "w.npy", rng.normal(0, 0.2, (8, 4, 3, 3)).astype(np.float32))
    np.savez(d / "bn.npz", gamma=rng.normal(1, 0.2, 8).astype(np.float32),
             beta=rng.normal(0, 0.1, 8).astype(np.float32), mean=rng.normal(0, 0.3, 8).astype(np.float32),
             var=rng.uniform(0.1, 2, 8).astype(np.float32),
             eps=np.float32(1e-5))
    return ["--input", str(d / "x.npy"), "--weights", str(d / "w.npy"), "--bn", str(d / "bn.npz")]


def bisect(command, passes, layer, env=None):
    """foldcheck bisect --cmd on the layer: (exit code, JSON report); exit 2 fails the test."""
    r = subprocess.run([FOLDCHECK, "bisect", "--cmd", command, "--passes", passes, *layer, "--format", "json"],
                       capture_output=True, text=True, check=False, env=env)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)
