"""foldcheck's commands as Python functions (each returns a typed result, results.py).

Every function takes numpy arrays or torch tensors (read in place where the dtype is one the
core reads) or paths, runs with the GIL released, and accepts `progress`, a callable given each
status line of a long run (an exception it raises stops the run). `precision` is the certified
reference's starting precision in bits (>= 64; it escalates as needed), `threads` 0 means
every core; the results are bit-identical for any thread count. Every default is the C++
command's own (its options struct's, read through the core: EXPLAIN, RUN, ... below); `eps`
left out is a fresh BatchNorm's (the core's BatchNorm loader).
"""
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import _core
from ._arrays import ArrayIn, NpyFiles, PathIn, as_array, scalar
from .results import (
    AccuracyDiffResult,
    BisectResult,
    DiagnoseResult,
    EnginesResult,
    ExplainResult,
    FoldCheckResult,
    QuantCheckResult,
    RunResult,
)

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

# `progress`: called with each status line of a long run (an exception it raises stops the run).
Progress = Callable[[str], object]

# Every command's defaults: its C++ options struct's (ref::Options, ExplainInput, DiagnoseInput,
# QuantCheckInput, RunOptions, BisectOptions, AccuracyDiffOptions, EnginesOptions), the one place
# they are written, read through the core (python/src/bind_*.cpp). The signatures below take them
# from here; tests/python_module/test_module.py checks every public function's against them.
EXPLAIN: dict[str, Any] = dict(_core.explain_defaults)
DIAGNOSE: dict[str, Any] = dict(_core.diagnose_defaults)
FOLD: dict[str, Any] = dict(_core.fold_check_defaults)
QUANT: dict[str, Any] = dict(_core.quant_check_defaults)
RUN: dict[str, Any] = dict(_core.run_defaults)
BISECT: dict[str, Any] = dict(_core.bisect_defaults)
AD: dict[str, Any] = dict(_core.accuracy_diff_defaults)
ENG: dict[str, Any] = dict(_core.engines_defaults)


def _bn(gamma: ArrayIn | None, beta: ArrayIn | None, mean: ArrayIn | None, var: ArrayIn | None,
        eps: ArrayIn | None) -> dict[str, Any]:
    # eps: a number (a numpy scalar, a 0-d array or tensor) goes to the core's one conversion of
    # scalar arguments (python/src/scalars.hpp), which refuses a bool, a str or None by name; a
    # one-element list or array is its value.
    if isinstance(eps, (list, tuple)) or getattr(eps, "ndim", 0) > 0:
        eps = scalar(eps, "eps")
    return dict(gamma=as_array(gamma, "gamma"), beta=as_array(beta, "beta"), mean=as_array(mean, "mean"),
                var=as_array(var, "var"), eps=eps)


def checked_progress(progress: Any) -> Any:
    """`progress` as the core calls it: None or a callable (each status line); anything else is
    refused by name before the run starts, never a TypeError from inside it at its first line."""
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: must be a callable taking a status line (str), or None; got "
                        f"{type(progress).__name__}")
    return progress


def _path(x: Any, name: str) -> Any:
    """A path argument as the core takes it (str); anything else is passed on for the core to
    refuse by name (scalars.hpp), never os.fspath's TypeError that names no argument."""
    return os.fspath(x) if isinstance(x, (str, os.PathLike)) else x


def explain(original: ArrayIn, observed: ArrayIn, *, gamma: ArrayIn | None = None, beta: ArrayIn | None = None,
            mean: ArrayIn | None = None, var: ArrayIn | None = None, eps: ArrayIn | None = None,
            dtype: str | None = None, precision: int = EXPLAIN["precision"],
            threads: int = EXPLAIN["threads"]) -> ExplainResult:
    """Is `observed` the fold of `original` by a BatchNorm?  (`foldcheck explain`)

    original, observed: the weights before and after the fold (channels on axis 0), in the
    dtype they are checked in (default: original's). gamma, beta, mean, var: one value or one
    per channel; a parameter left out takes a fresh BatchNorm's value (the core's); with none
    given, the common scale is inferred from the numbers and matched to known defaults.
    Returns an ExplainResult: the recipes that reproduce `observed` bit for bit, each
    element's residual against the exact fold in ULP, the bound, the verdict."""
    typed = dtype or "float32"  # a list's values: float32 unless said, as the command line's
    r = _core.explain(as_array(original, "original", list_dtype=typed),
                      as_array(observed, "observed", list_dtype=typed),
                      dtype=dtype,
                      precision=precision, threads=threads, **_bn(gamma, beta, mean, var, eps))
    return ExplainResult(r)


def diagnose(x: ArrayIn, observed: ArrayIn, *, weight: ArrayIn | None = None, bias: ArrayIn | None = None,
             gamma: ArrayIn | None = None, beta: ArrayIn | None = None, mean: ArrayIn | None = None,
             var: ArrayIn | None = None, eps: ArrayIn | None = None, stride: int = DIAGNOSE["stride"],
             padding: int | None = None, dilation: int = DIAGNOSE["dilation"],
             arithmetic: str = DIAGNOSE["arithmetic"], algorithm: str = DIAGNOSE["algorithm"],
             precision: int = DIAGNOSE["precision"],
             threads: int = DIAGNOSE["threads"]) -> DiagnoseResult:
    """Is `observed` what conv (weight, bias), conv + BatchNorm, or a BatchNorm alone computes on
    `x`, up to rounding, in `arithmetic`? If not, which common bug or other arithmetic explains it?
    (`foldcheck diagnose`)

    x: NCHW input (or N x C for a BatchNorm alone, weight None); observed: the output in its
    dtype. No BatchNorm argument (gamma, beta, mean, var, eps) means a plain conv, never a
    default BatchNorm. arithmetic: "float32" (as given), "tf32" (TF32 tensor cores), "bf16",
    "fp16" (operands, float32 sums), "fp16-accumulate", "bf16x3": each operand conversion is
    replayed exactly. algorithm: "direct", "winograd2"/"winograd4"/"winograd6" (Winograd
    F(m x m, 3 x 3), its transforms bounded), "fft" (a normwise bound, float32), "split-k:S".
    Hypotheses: training-mode batch
    statistics, eps mismatch, variance/std confusion, missing sqrt, gamma/beta swapped, mean not
    subtracted, NHWC read as NCHW, bias dropped, BN applied twice (with a BatchNorm), and the
    other arithmetics, Winograd tiles and the FFT (when the layer as given does not explain the
    output).
    Returns a DiagnoseResult (.best, .fix, .hypotheses)."""
    bn = {} if all(v is None for v in (gamma, beta, mean, var, eps)) else _bn(gamma, beta, mean, var, eps)
    r = _core.diagnose(as_array(x, "x"), as_array(observed, "observed"), weight=as_array(weight, "weight"),
                       bias=as_array(bias, "bias"), stride=stride, padding=padding,
                       dilation=dilation, arithmetic=arithmetic, algorithm=algorithm, precision=precision,
                       threads=threads, **bn)
    return DiagnoseResult(r)


def fold_check(weight: ArrayIn, bias: ArrayIn | None, observed_weight: ArrayIn, observed_bias: ArrayIn | None = None,
               *, gamma: ArrayIn, beta: ArrayIn, mean: ArrayIn, var: ArrayIn, eps: ArrayIn | None = None,
               precision: int = FOLD["precision"], threads: int = FOLD["threads"]) -> FoldCheckResult:
    """A fused layer's weight and bias against the exact fold of (weight, bias) and the
    BatchNorm, with each engine recipe's bound (as accuracy_diff checks a folded model).
    Returns a FoldCheckResult (.closest_recipe, .worst_channel, .worst_ratio)."""
    r = _core.fold_check(as_array(weight, "weight"), as_array(bias, "bias"), precision=precision, threads=threads,
                         observed_weight=as_array(observed_weight, "observed_weight"),
                         observed_bias=as_array(observed_bias, "observed_bias"), **_bn(gamma, beta, mean, var, eps))
    return FoldCheckResult(r)


def diagnose_fold(explained: ExplainResult, weight: ArrayIn, bias: ArrayIn | None, observed_weight: ArrayIn,
                  observed_bias: ArrayIn | None = None, *, gamma: ArrayIn, beta: ArrayIn, mean: ArrayIn,
                  var: ArrayIn, eps: ArrayIn | None = None) -> Any:
    """Why a fused layer is not the fold of (weight, bias) and the BatchNorm: the core's
    weight-level diagnosis (diagnosis/fold_diagnosis.hpp), each cause within its rounding-error
    bound. explained: explain's result on these weights (which elements are beyond the cited
    recipe's bound). Returns a foldcheck._core.FoldDiagnosis: .weights (.worst, .worst_ratio,
    .channels_beyond, .slip, .cause) and .bias (.off, .missing, .cause); it names a cause, the
    verdicts are explain's and fold_check's."""
    return _core.diagnose_fold(explained._core, as_array(weight, "weight"), as_array(bias, "bias"),
                               observed_weight=as_array(observed_weight, "observed_weight"),
                               observed_bias=as_array(observed_bias, "observed_bias"),
                               **_bn(gamma, beta, mean, var, eps))


def quant_check(weight: ArrayIn, found: ArrayIn | None = None, *, gamma: ArrayIn, beta: ArrayIn, mean: ArrayIn,
                var: ArrayIn, eps: ArrayIn | None = None, scales: ArrayIn | None = None, bits: int = QUANT["bits"],
                per_channel: bool = QUANT["per_channel"], pow2: bool = QUANT["pow2"],
                rounding: str = QUANT["rounding"], precision: int = QUANT["precision"],
                threads: int = QUANT["threads"]) -> QuantCheckResult:
    """Are dumped integers `found` the quantized fold of `weight` by the BatchNorm?
    (`foldcheck quant-check`). A one-step flip at a rounding tie within a correct float fold's
    error bound is EXPECTED. Without `found`: where each recipe's float fold flips an integer."""
    import numpy as np  # noqa: PLC0415

    ints = None if found is None else np.ascontiguousarray(np.asarray(
        found.detach().cpu().numpy() if hasattr(found, "detach") else found))
    r = _core.quant_check(as_array(weight, "weight"), found=ints, scales=as_array(scales, "scales"), bits=bits,
                          per_channel=per_channel, pow2=pow2, rounding=rounding, precision=precision,
                          threads=threads, **_bn(gamma, beta, mean, var, eps))
    return QuantCheckResult(r)


def run(case: PathIn | Mapping[str, Any], *, seed: int | None = None, attribution: bool = RUN["attribution"],
        attribution_elements: int = RUN["attribution_elements"], precision: int = RUN["precision"],
        threads: int = RUN["threads"], arithmetic: str | None = None, conversion: str | None = None,
        algorithm: str | None = None, progress: Progress | None = None) -> RunResult:
    """A case (a case file's path, or its content as a dict): its layer in every dtype, fused and
    unfused paths against the certified reference, with bounds and attribution (`foldcheck run`).

    arithmetic: "tf32", "bf16" or "fp16" evaluates every conv with its operands converted first
    (by `conversion`: "nearest-even", "nearest-away", "truncate"; default the arithmetic's most
    common), "float32" or None as the case says; algorithm: "split-k:S" or "winograd2" replaces
    the case's accumulation orders (`run --arithmetic / --conversion / --algorithm`)."""
    import json  # noqa: PLC0415

    path, text = (case, None) if isinstance(case, (str, os.PathLike)) else ("<case>", json.dumps(case))
    r = _core.run(_path(path, "case"), text=text, seed=seed, attribution=attribution,
                  attribution_elements=attribution_elements, precision=precision, threads=threads,
                  arithmetic=arithmetic, conversion=conversion, algorithm=algorithm,
                  progress=checked_progress(progress))
    return RunResult(r)


def accuracy_diff(model: PathIn, *, observed: PathIn | None = None, input: ArrayIn | PathIn | None = None,  # noqa: A002
                  seed: int = AD["seed"], observed_output: ArrayIn | PathIn | None = None,
                  output_samples: int = AD["output_samples"], arithmetic: str = AD["arithmetic"],
                  weights_only: bool = AD["weights_only"], recipe: str = AD["recipe"],
                  attribution: bool = AD["attribution"], attribution_elements: int = AD["attribution_elements"],
                  confidence: float = AD["confidence"], precision: int = AD["precision"], threads: int = AD["threads"],
                  progress: Progress | None = None, unmodelled: dict[str, str] | None = None) -> AccuracyDiffResult:
    """Every Conv -> BatchNormalization pair of an ONNX model, and, with `observed`, another
    engine's folded model checked layer by layer and channel by channel (`foldcheck accuracy-diff`).
    input / observed_output: arrays or .npy paths. arithmetic: "float32", "tf32" (TF32 tensor
    cores, float32 activations), or "bf16" / "fp16" operands (with every activation a 16-bit value,
    as torch.autocast computes, when all the output's values are): the end-to-end bound then
    models the converted operands (nearest conversions); "bf16x3" and "fp16-accumulate" are
    refused end to end. unmodelled: {layer name: why} for layers whose
    observed fold the caller knows cannot be judged (another op folded into it): each MISTRUSTED
    with its reason as its note, whatever its comparisons show."""
    with NpyFiles() as files:
        r = _core.accuracy_diff(_path(model, "model"), observed=_path(observed, "observed"),
                                input=files.path(input, "input"), seed=seed,
                                observed_output=files.path(observed_output, "observed_output"),
                                output_samples=output_samples, arithmetic=arithmetic, weights_only=weights_only,
                                recipe=recipe,
                                attribution=attribution, attribution_elements=attribution_elements,
                                confidence=confidence,
                                precision=precision, threads=threads, progress=checked_progress(progress),
                                unmodelled=unmodelled)
    return AccuracyDiffResult(r)


def engine_names() -> list[str]:
    """The built-in engines of `engines`."""
    return list(_core.engine_names())


def _engine_tools(python: PathIn | None) -> Any:
    # python: converted and checked by the core (bind_model.cpp: a str naming an existing file)
    onednn = os.path.join(_PACKAGE, "bin", "foldcheck-onednn")
    adapters = os.environ.get("FOLDCHECK_ENGINES_DIR") or os.path.join(_PACKAGE, "share", "foldcheck", "engines")
    return _core.EngineTools(sys.executable if python is None else _path(python, "python"), adapters,
                             onednn if os.path.isfile(onednn) else "")


def engines(model: PathIn, engines: str | Sequence[str] = (), *, adapters: Mapping[str, str] | None = None,
            input: ArrayIn | PathIn | None = None, seed: int = ENG["seed"],  # noqa: A002
            confidence: float = ENG["confidence"], channel_samples: int = ENG["channel_samples"],
            output_samples: int = ENG["output_samples"], timeout: float = ENG["timeout"],
            work_dir: PathIn | None = None, python: PathIn | None = None, precision: int = ENG["precision"],
            threads: int = ENG["threads"], arithmetic: str | None = None, algorithm: str | None = None,
            progress: Progress | None = None) -> EnginesResult:
    """Run real engines on an ONNX model and check what they produced (`foldcheck engines`).

    engines: built-in names (engine_names()), a str for one; adapters: {label: command template}
    of your own ({model}, {input}, {outdir}; adapters/README.md): a label is not blank and holds
    no '=' or control character, a command is not blank. The Python adapters run with `python`
    (default: this interpreter). Each is converted and checked by the core before anything runs
    (a wrong one is foldcheck.InputError naming it). arithmetic ("tf32", "bf16", ...) and
    algorithm ("winograd4", "split-k:8", ...): what the engines' convs computed in, for an engine
    whose manifest does not say (`engines --arithmetic / --algorithm`; default float32, direct)."""
    with NpyFiles() as files:
        r = _core.engines(_path(model, "model"), engines, adapters, _engine_tools(python),
                          input=files.path(input, "input"),
                          seed=seed, confidence=confidence, channel_samples=channel_samples,
                          output_samples=output_samples, timeout=timeout,
                          work_dir=_path(work_dir, "work_dir"), precision=precision,
                          threads=threads, arithmetic=arithmetic, algorithm=algorithm,
                          progress=checked_progress(progress))
    return EnginesResult(r)


def bisect(target: PathIn | Mapping[str, Any] | None = None, *, passes: str | Sequence[str] = (),
           opt_level: int | None = None, disabled: str | Sequence[str] = (), mode: str = BISECT["mode"],
           threshold_ulp: float | None = None, dtype: str | None = None,
           input: ArrayIn | PathIn | None = None, seed: int = BISECT["seed"], command: str | None = None,  # noqa: A002
           model: PathIn | None = None, reference: ArrayIn | PathIn | None = None, timeout: float = BISECT["timeout"],
           precision: int = BISECT["precision"], threads: int = BISECT["threads"],
           progress: Progress | None = None) -> BisectResult:
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
        r = _core.bisect(_path(target, "target"), target_text=text, passes=passes,
                         opt_level=opt_level, disabled=disabled, mode=mode, threshold_ulp=threshold_ulp,
                         dtype=dtype, input=files.path(input, "input"), seed=seed, command=command,
                         model=_path(model, "model"),
                         reference=files.path(reference, "reference"), timeout=timeout,
                         precision=precision, threads=threads, progress=checked_progress(progress))
    return BisectResult(r)
