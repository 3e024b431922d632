"""The README's Python examples, run as written (section "Python: `import foldcheck`"): each
```python block in a fresh interpreter (this one, .venv's), the pytest example with pytest; what
the comments say they print is checked on their output."""
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def blocks():
    text = README.read_text()
    section = text[text.index("## Python: `import foldcheck`"):]
    section = section[: section.index("\n## ", 5)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


# What each block prints, as its comments say (in order).
PRINTS = [
    ["EXPECTED ['pytorch', 'tvm', 'onnxruntime', 'onnxoptimizer', 'exact']", "[0.29766777] [2.37632098]",
     "verdict: EXPECTED"],
    ["UNEXPECTED training_mode_batch_statistics",
     "BatchNorm ran in training mode (batch statistics): call model.eval() before comparing"],
    ["EXPECTED 20", "UNEXPECTED [('layer2.0.conv1', 7)]", "UNEXPECTED"],
    None,  # the pytest example (below)
    ["EXPECTED 3", "UNEXPECTED {'eps_mismatch'}"],
]
RUN_AS_SCRIPTS = [i for i, prints in enumerate(PRINTS) if prints is not None]
SLOW_EXAMPLE = 2  # check_model on a 224x224 ResNet-18, twice: ~100 s (slow_tests.py)


def test_the_readme_has_the_examples():
    assert len(blocks()) == len(PRINTS)


@pytest.mark.parametrize("index", [pytest.param(i, marks=pytest.mark.slow) if i == SLOW_EXAMPLE else i
                                   for i in RUN_AS_SCRIPTS])
def test_a_readme_example_runs_as_written(index, tmp_path):
    p = subprocess.run([sys.executable, "-c", blocks()[index]], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for expected in PRINTS[index]:
        assert expected in out, (expected, out)
        out = out[out.index(expected) + len(expected):]


def test_the_readme_pytest_example_passes_and_fails_when_it_should(tmp_path):
    code = blocks()[3]
    (tmp_path / "test_fold.py").write_text(code)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fold.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
    broken = code.replace("    assert_fold_close(fused, (conv, bn))",
                          "    with torch.no_grad():\n        fused.weight[5] *= 1 + 20e-6\n"
                          "    assert_fold_close(fused, (conv, bn))")
    assert broken != code
    (tmp_path / "test_fold.py").write_text(broken)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fold.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 1 and "channel 5" in p.stdout and "Likely cause" in p.stdout, p.stdout
