"""torch.compile (Inductor) as the compiler of `foldcheck bisect --cmd` (issue 24):
tools/engines/torch_compile_bisect.py on one layer with trained-like statistics. Honest
(Inductor's freezing, pattern matcher, eval conv + BN rewrite and constant folding each
switched by the bisect): EXPECTED, no culprit. With BadEpsilon (a pre-grad custom pass,
Inductor's own hook, setting batch_norm's eps to 1e-3) in the middle of the pipeline: named.

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
SWITCHES = "freezing,pattern_matcher,efficient_conv_bn_eval_fx_passes,joint_graph_constant_folding"


def test_bisect_through_torch_compile_names_an_injected_pass_and_none_when_honest(tmp_path):
    rng = np.random.default_rng(11)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 4, 8, 8)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.normal(0, 0.2, (8, 4, 3, 3)).astype(np.float32))
    np.savez(tmp_path / "bn.npz", gamma=rng.normal(1, 0.2, 8).astype(np.float32),
             beta=rng.normal(0, 0.1, 8).astype(np.float32), mean=rng.normal(0, 0.3, 8).astype(np.float32),
             var=rng.uniform(0.1, 2, 8).astype(np.float32), eps=np.float32(1e-5))
    layer = ["--input", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npy"), "--bn", str(tmp_path / "bn.npz")]
    cmd = (f"{sys.executable} {ROOT / 'tools' / 'engines' / 'torch_compile_bisect.py'} --enabled {{enabled}} "
           f"--disabled {{disabled}} -o {{out}} " + " ".join(layer))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # nothing shared between tests

    def bisect(command, passes):
        r = subprocess.run([FOLDCHECK, "bisect", "--cmd", command, "--passes", passes, *layer, "--format", "json"],
                           capture_output=True, text=True, check=False, env=env)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        return r.returncode, json.loads(r.stdout)

    code, honest = bisect(cmd, SWITCHES)
    assert code == 0 and honest["verdict"] == "EXPECTED" and honest["culprit"] is None
    code, broken = bisect(cmd + " --inject-bad-eps", "freezing,BadEpsilon,pattern_matcher")
    assert code == 1 and broken["culprit"] == "BadEpsilon"
