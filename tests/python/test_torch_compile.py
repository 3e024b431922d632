"""torch.compile (Inductor) as the compiler of `foldcheck bisect --cmd` (issue 24):
adapters/torch_compile_bisect.py on one layer with trained-like statistics. Honest
(Inductor's freezing, pattern matcher, eval conv + BN rewrite and constant folding each
switched by the bisect): EXPECTED, no culprit. With BadEpsilon (a pre-grad custom pass,
Inductor's own hook, setting batch_norm's eps to 1e-3) in the middle of the pipeline: named.

FOLDCHECK: the binary under test (the test suite sets it).
"""
import os
import pathlib
import sys

import pytest

from compiler_layer import bisect, layer_files

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWITCHES = "freezing,pattern_matcher,efficient_conv_bn_eval_fx_passes,joint_graph_constant_folding"


@pytest.mark.slow
def test_bisect_through_torch_compile_names_an_injected_pass_and_none_when_honest(tmp_path):
    layer = layer_files(tmp_path, 11)
    cmd = (f"{sys.executable} {ROOT / 'adapters' / 'torch_compile_bisect.py'} --enabled {{enabled}} "
           f"--disabled {{disabled}} -o {{out}} " + " ".join(layer))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # nothing shared between tests
    code, honest = bisect(cmd, SWITCHES, layer, env)
    assert code == 0 and honest["verdict"] == "EXPECTED" and honest["culprit"] is None
    code, broken = bisect(cmd + " --inject-bad-eps", "freezing,BadEpsilon,pattern_matcher", layer, env)
    assert code == 1 and broken["culprit"] == "BadEpsilon"
