"""Model- and compiler-scale tests, marked @pytest.mark.slow: minutes of PyTorch, TVM, TFLite or a
torchvision model around a few foldcheck calls. FOLDCHECK_SLOW_TESTS=0 skips them, saying so. The
test command runs them once, in its main test run; its hardening run (the same sources under
ASan + UBSan, where their time is the engines', not foldcheck's) and its bare-system check (the
same sources and packages, proving the install steps) leave them out (tools/bootstrap.sh,
tools/hardening.sh). Each conftest.py of the Python tests calls these two."""
import os

import pytest

REASON = ("model- or compiler-scale: run by the test command's main test run, not again here "
          "(FOLDCHECK_SLOW_TESTS=0)")


def configure(config):
    config.addinivalue_line("markers", "slow: model- or compiler-scale (FOLDCHECK_SLOW_TESTS=0 skips it)")


def skip_when_asked(items):
    if os.environ.get("FOLDCHECK_SLOW_TESTS") != "0":
        return
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason=REASON))
