"""The Python module's tests (tools/python/pytest.sh tests/python_module; ctest python_module_tests
and python_band_tests).

`import foldcheck` is the package of the build under test: PYTHONPATH holds BUILD/python (set by
pytest.sh from FOLDCHECK, the binary under test). FOLDCHECK is the `foldcheck` program, for
comparisons with the command line."""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDCHECK = os.environ.get("FOLDCHECK", str(ROOT / "build" / "harness" / "foldcheck"))
sys.path.insert(0, str(ROOT / "tests" / "python"))  # the ONNX model builders of the CLI's tests

import slow_tests  # noqa: E402  (tests/python, just put on the path)


def pytest_configure(config):
    slow_tests.configure(config)


def pytest_collection_modifyitems(items):
    slow_tests.skip_when_asked(items)


@pytest.fixture(scope="session")
def foldcheck_bin():
    return FOLDCHECK


@pytest.fixture(scope="session")
def root():
    return ROOT
