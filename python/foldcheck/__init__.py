"""foldcheck: is a conv + BatchNorm drift the rounding IEEE arithmetic predicts, or a bug?

    import foldcheck
    r = foldcheck.explain(original=[2.1122932], observed=[2.1122828])   # the TVM thread
    r.verdict, r.bit_exact_recipes, r.residual_ulp

The commands of the `foldcheck` program as functions returning typed results (results.py):
explain, diagnose, fold_check, quant_check, run, accuracy_diff, engines, bisect.
PyTorch modules in, verdicts out: foldcheck.torch (check_fold, check_model, diagnose).
A Keras model and its TFLite conversion, layer by layer: foldcheck.keras (check_tflite).
A pytest assertion whose tolerance is a proven bound: foldcheck.testing.assert_fold_close.
"""
from . import _core
from ._commands import accuracy_diff, bisect, diagnose, engine_names, engines, explain, fold_check, quant_check, run
from ._core import Verdict
from .results import (
    VERDICTS,
    AccuracyDiffResult,
    BisectResult,
    DiagnoseResult,
    EnginesResult,
    ExplainResult,
    FoldCheckResult,
    QuantCheckResult,
    Result,
    RunResult,
)

InputError = _core.InputError
__version__ = _core.version
SCHEMA_VERSION = _core.schema_version

__all__ = [
    "explain", "diagnose", "fold_check", "quant_check", "run", "accuracy_diff", "engines", "engine_names", "bisect",
    "Result", "ExplainResult", "DiagnoseResult", "FoldCheckResult", "QuantCheckResult", "RunResult",
    "AccuracyDiffResult", "EnginesResult", "BisectResult", "InputError", "Verdict", "VERDICTS", "SCHEMA_VERSION",
    "__version__",
]


def __getattr__(name):  # foldcheck.torch, .testing, .keras load on first use (torch, tensorflow only then)
    if name in ("torch", "testing", "keras"):
        import importlib  # noqa: PLC0415

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'foldcheck' has no attribute {name!r}")
