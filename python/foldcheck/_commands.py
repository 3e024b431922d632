"""foldcheck's commands as Python functions (each returns a typed result, results.py).

Every function takes numpy arrays or torch tensors (read in place where the dtype is one the
core reads) or paths, runs with the GIL released, and accepts `progress`, a callable given each
status line of a long run (an exception it raises stops the run). `precision` is the certified
reference's starting precision in bits (>= 64; it escalates as needed), `threads` 0 means
every core; the results are bit-identical for any thread count.
"""
import os
import sys

from . import _core
from ._arrays import NpyFiles, as_array, scalar
from .results import (AccuracyDiffResult, BisectResult, DiagnoseResult, EnginesResult, ExplainResult,
                      FoldCheckResult, QuantCheckResult, RunResult)

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _bn(gamma, beta, mean, var, eps):
    return dict(gamma=as_array(gamma, "gamma"), beta=as_array(beta, "beta"), mean=as_array(mean, "mean"),
                var=as_array(var, "var"), eps=scalar(eps, "eps"))


def explain(original, observed, *, gamma=None, beta=None, mean=None, var=None, eps=None, dtype=None,
            precision=256, threads=0):
    """Is `observed` the fold of `original` by a BatchNorm?  (`foldcheck explain`)

    original, observed: the weights before and after the fold (channels on axis 0), in the
    dtype they are checked in (default: original's). gamma, beta, mean, var: one value or one
    per channel; a parameter left out takes a fresh BatchNorm's value (eps 1e-5); with none
    given, the common scale is inferred from the numbers and matched to known defaults.
    Returns an ExplainResult: the recipes that reproduce `observed` bit for bit, each
    element's residual against the exact fold in ULP, the bound, the verdict."""
    typed = dtype or "float32"  # a list's values: float32 unless said, as the command line's
    r = _core.explain(as_array(original, "original", list_dtype=typed), as_array(observed, "observed", list_dtype=typed),
                      dtype=dtype,
                      precision=precision, threads=threads, **_bn(gamma, beta, mean, var, eps))
    return ExplainResult(r)


def diagnose(x, observed, *, weight=None, bias=None, gamma=None, beta=None, mean=None, var=None, eps=None,
             stride=1, padding=None, dilation=1, precision=256, threads=0):
    """Is `observed` what conv (weight, bias) + BatchNorm computes on `x`, up to rounding?
    If not, which common bug explains it?  (`foldcheck diagnose`)

    x: NCHW input (or N x C for a BatchNorm alone, weight None); observed: the output in its
    dtype. Hypotheses: training-mode batch statistics, eps mismatch, variance/std confusion,
    missing sqrt, gamma/beta swapped, mean not subtracted, NHWC read as NCHW, bias dropped, BN
    applied twice. Returns a DiagnoseResult (.best, .fix, .hypotheses)."""
    r = _core.diagnose(as_array(x, "x"), as_array(observed, "observed"), weight=as_array(weight, "weight"),
                       bias=as_array(bias, "bias"), stride=int(stride), padding=None if padding is None else int(padding),
                       dilation=int(dilation), precision=precision, threads=threads,
                       **_bn(gamma, beta, mean, var, eps))
    return DiagnoseResult(r)


def fold_check(weight, bias, observed_weight, observed_bias=None, *, gamma, beta, mean, var, eps=1e-5,
               precision=256, threads=0):
    """A fused layer's weight and bias against the exact fold of (weight, bias) and the
    BatchNorm, with each engine recipe's bound (as accuracy_diff checks a folded model).
    Returns a FoldCheckResult (.closest_recipe, .worst_channel, .worst_ratio)."""
    r = _core.fold_check(as_array(weight, "weight"), as_array(bias, "bias"), precision=precision, threads=threads,
                         observed_weight=as_array(observed_weight, "observed_weight"),
                         observed_bias=as_array(observed_bias, "observed_bias"), **_bn(gamma, beta, mean, var, eps))
    return FoldCheckResult(r)


def quant_check(weight, found=None, *, gamma, beta, mean, var, eps=1e-5, scales=None, bits=8, per_channel=False,
                pow2=True, rounding="half_even", precision=256, threads=0):
    """Are dumped integers `found` the quantized fold of `weight` by the BatchNorm?
    (`foldcheck quant-check`). A one-step flip at a rounding tie within a correct float fold's
    error bound is EXPECTED. Without `found`: where each recipe's float fold flips an integer."""
    import numpy as np  # noqa: PLC0415

    ints = None if found is None else np.ascontiguousarray(np.asarray(
        found.detach().cpu().numpy() if hasattr(found, "detach") else found))
    r = _core.quant_check(as_array(weight, "weight"), found=ints, scales=as_array(scales, "scales"), bits=int(bits),
                          per_channel=bool(per_channel), pow2=bool(pow2), rounding=rounding, precision=precision,
                          threads=threads, **_bn(gamma, beta, mean, var, eps))
    return QuantCheckResult(r)


def run(case, *, seed=None, attribution=True, attribution_elements=1024, precision=256, threads=0, progress=None):
    """A case (a case file's path, or its content as a dict): its layer in every dtype, fused and
    unfused paths against the certified reference, with bounds and attribution (`foldcheck run`)."""
    import json  # noqa: PLC0415

    path, text = (case, None) if isinstance(case, (str, os.PathLike)) else ("<case>", json.dumps(case))
    r = _core.run(os.fspath(path), text=text, seed=seed, attribution=attribution,
                  attribution_elements=attribution_elements, precision=precision, threads=threads, progress=progress)
    return RunResult(r)


def accuracy_diff(model, *, observed=None, input=None, seed=0, observed_output=None, output_samples=32,  # noqa: A002
                  weights_only=False, recipe="pytorch", attribution=True, attribution_elements=256, confidence=0.999,
                  precision=256, threads=0, progress=None):
    """Every Conv -> BatchNormalization pair of an ONNX model, and, with `observed`, another
    engine's folded model checked layer by layer and channel by channel (`foldcheck accuracy-diff`).
    input / observed_output: arrays or .npy paths."""
    with NpyFiles() as files:
        r = _core.accuracy_diff(os.fspath(model), observed=None if observed is None else os.fspath(observed),
                                input=files.path(input, "input"), seed=seed,
                                observed_output=files.path(observed_output, "observed_output"),
                                output_samples=output_samples, weights_only=weights_only, recipe=recipe,
                                attribution=attribution, attribution_elements=attribution_elements, confidence=confidence,
                                precision=precision, threads=threads, progress=progress)
    return AccuracyDiffResult(r)


def engine_names():
    """The built-in engines of `engines`."""
    return list(_core.engine_names())


def _engine_tools(python):
    onednn = os.path.join(_PACKAGE, "bin", "foldcheck-onednn")
    adapters = os.environ.get("FOLDCHECK_ENGINES_DIR") or os.path.join(_PACKAGE, "share", "foldcheck", "engines")
    return _core.EngineTools(python or sys.executable, adapters, onednn if os.path.isfile(onednn) else "")


def engines(model, engines=(), *, adapters=None, input=None, seed=0, confidence=0.999,  # noqa: A002
            channel_samples=16, output_samples=32, timeout=3600.0, work_dir=None, python=None, precision=256,
            threads=0, progress=None):
    """Run real engines on an ONNX model and check what they produced (`foldcheck engines`).

    engines: built-in names (engine_names()); adapters: {label: command template} of your own
    ({model}, {input}, {outdir}; adapters/README.md). The Python adapters run with
    `python` (default: this interpreter)."""
    if isinstance(engines, str):
        engines = [engines]
    own = [f"{k}={v}" for k, v in (adapters or {}).items()]
    with NpyFiles() as files:
        r = _core.engines(os.fspath(model), list(engines), own, _engine_tools(python), input=files.path(input, "input"),
                          seed=seed, confidence=confidence, channel_samples=channel_samples,
                          output_samples=output_samples, timeout=float(timeout),
                          work_dir=None if work_dir is None else os.fspath(work_dir), precision=precision,
                          threads=threads, progress=progress)
    return EnginesResult(r)


def bisect(target=None, *, passes=(), opt_level=None, disabled=(), mode="search", threshold_ulp=None, dtype=None,
           input=None, seed=0, command=None, model=None, reference=None, timeout=600.0, precision=256,  # noqa: A002
           threads=0, progress=None):
    """Find the compiler pass that takes a drift past what rounding explains (`foldcheck bisect`).

    Internal: `target` is a case file (or dict) or an ONNX model, through foldcheck's pass
    pipeline (`passes`, or TVM's `opt_level` minus `disabled`). External: `command` with
    {enabled}, {disabled} and {out}, judged against `model` run on `input`, or against a
    `reference` output. mode: search, linear or leave_one_out. The result's exit_code is 1
    when a pass is named."""
    import json  # noqa: PLC0415

    text = None
    passes = [p for p in passes.split(",") if p] if isinstance(passes, str) else passes
    disabled = [p for p in disabled.split(",") if p] if isinstance(disabled, str) else disabled
    if target is not None and not isinstance(target, (str, os.PathLike)):
        target, text = "<case>", json.dumps(target)
    with NpyFiles() as files:
        r = _core.bisect(None if target is None else os.fspath(target), target_text=text, passes=list(passes),
                         opt_level=opt_level, disabled=list(disabled), mode=mode, threshold_ulp=threshold_ulp,
                         dtype=dtype, input=files.path(input, "input"), seed=seed, command=command,
                         model=None if model is None else os.fspath(model),
                         reference=files.path(reference, "reference"), timeout=float(timeout),
                         precision=precision, threads=threads, progress=progress)
    return BisectResult(r)
