"""foldcheck for PyTorch: modules in, verdicts out (torch is imported when this module is).

    import foldcheck.torch as fct
    fct.check_fold(conv, bn, fused)          # is `fused` the fold of conv + bn? which recipe?
    fct.check_model(model, fused_model, x)   # every conv + BN of a model, by module name
    fct.diagnose(bn, x, observed)            # why does this BatchNorm's output differ?

A fused model may come from any of the fusers PyTorch users run:
torch.ao.quantization.fuse_modules, torch.nn.utils.fusion.fuse_conv_bn_eval,
torch.fx.experimental.optimization.fuse (an fx GraphModule), torch.jit.freeze (a frozen
ScriptModule: its folded constants are read from its graph), torch.compile with inductor's
freezing (its folded constants are read from the compiled graph; see compiled_fold). Models
are exported to ONNX with their BatchNorms kept (export_onnx), then checked by accuracy_diff.
"""
import contextlib
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["check_fold", "check_model", "diagnose", "conv_bn_pairs", "export_onnx", "bn_parameters", "frozen_fold",
           "compiled_fold", "FoldResult", "ModelCheck"]

from . import _commands, _core
from ._core import Verdict
from .results import SHOWN, AccuracyDiffResult, DiagnoseResult, ExplainResult, FoldCheckResult, Result

_AD = _commands.AD  # accuracy_diff's defaults (the C++ AccuracyDiffOptions'), check_model's too
_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_BNS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
ConvModule = torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d  # what the functions take as `conv`


def bn_parameters(bn: torch.nn.Module) -> dict[str, Any]:
    """A BatchNorm module's inference parameters: gamma, beta, mean, var (tensors) and eps.
    A BatchNorm without affine parameters has gamma 1 and beta 0; one without running
    statistics cannot be folded (its eval output uses batch statistics) and is refused."""
    if not isinstance(bn, _BNS):
        raise TypeError(f"expected a torch.nn.BatchNorm1d/2d/3d, got {type(bn).__name__}")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("this BatchNorm tracks no running statistics (track_running_stats=False): it always "
                         "normalizes with batch statistics, and no fold reproduces it")
    c = bn.num_features
    dev = dict(dtype=bn.running_mean.dtype)
    gamma = bn.weight.detach() if bn.weight is not None else torch.ones(c, **dev)
    beta = bn.bias.detach() if bn.bias is not None else torch.zeros(c, **dev)
    return dict(gamma=gamma, beta=beta, mean=bn.running_mean.detach(), var=bn.running_var.detach(), eps=float(bn.eps))


def _conv_arrays(conv: torch.nn.Module, what: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    if not isinstance(conv, _CONVS):
        raise TypeError(f"{what}: expected a torch.nn.Conv1d/2d/3d (channels on axis 0), got {type(conv).__name__}")
    return conv.weight.detach(), None if conv.bias is None else conv.bias.detach()


# --- what a fused conv computes besides its weights ----------------------------------------
# A fold changes a conv's weight and bias values and nothing else: every other attribute that
# defines its computation must be the conv's, and its dtype too (the recipes replay a fold in
# the modules' dtype). check_fold, assert_fold_close, check_model and diagnose hold a fused conv
# to that through _fold_mismatches.

def _fused_conv(fused: torch.nn.Module, what: str = "fused") -> torch.nn.Module:
    """The conv inside what a fuser returns for one conv + BN: the conv itself, or a Sequential
    (fuse_modules' ConvReLU2d, a Sequential(conv, Identity)) whose first module is the conv and
    whose others are Identity or activations. A conv + BatchNorm kept apart (ConvBn2d, made by
    fuse_modules in training mode) is not a fold and is refused, naming it."""
    if isinstance(fused, torch.nn.Sequential) and len(fused) and isinstance(fused[0], _CONVS):
        rest = list(fused)[1:]
        if any(isinstance(m, _BNS) for m in rest):
            raise TypeError(f"{what}: a {type(fused).__name__} that keeps its BatchNorm apart from the conv (not "
                            "folded: fuse_modules_qat keeps it for training; fold an eval model with fuse_modules)")
        others = [type(m).__name__ for m in rest if not _is_pointwise(m)]
        if others:
            raise TypeError(f"{what}: a {type(fused).__name__} of a conv and {', '.join(others)}: expected one fused "
                            "conv (alone or followed by an activation)")
        return fused[0]
    return fused


def _is_pointwise(m: torch.nn.Module) -> bool:
    """An Identity or an activation module (what a fuser may keep after a fused conv)."""
    return isinstance(m, torch.nn.Identity) or type(m).__module__ == "torch.nn.modules.activation"


def _padding(conv: ConvModule) -> tuple[tuple[int, int], ...]:
    """The zeros (or padding_mode values) added before and after each spatial dimension:
    'valid' none, 'same' d*(k-1) in all, the extra one after (as PyTorch pads it)."""
    if conv.padding == "valid":
        return tuple((0, 0) for _ in conv.kernel_size)
    if conv.padding == "same":
        total = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
        return tuple((t // 2, t - t // 2) for t in total)
    return tuple((int(p), int(p)) for p in conv.padding)


def _geometry(conv: ConvModule) -> dict[str, Any]:
    """What defines a conv's computation besides its weight and bias values, in a form where two
    convs that compute the same compare equal: padding resolved ('same' is its numbers), a
    dilation along a kernel of size 1 read as 1, padding_mode read only where it pads."""
    padding = _padding(conv)
    return {"kind": f"{'ConvTranspose' if conv.transposed else 'Conv'}{len(conv.kernel_size)}d",
            "in_channels": conv.in_channels, "out_channels": conv.out_channels, "groups": conv.groups,
            "kernel_size": tuple(conv.kernel_size), "stride": tuple(conv.stride), "padding": padding,
            "dilation": tuple(d if k > 1 else 1 for d, k in zip(conv.dilation, conv.kernel_size)),
            "padding_mode": conv.padding_mode if any(any(p) for p in padding) else "zeros",
            "output_padding": tuple(getattr(conv, "output_padding", ())) if conv.transposed else ()}


def _shown(conv: ConvModule, key: str) -> str:
    """An attribute as the user wrote it (padding 'same' with the numbers it means)."""
    if key == "kind":
        return f"a {type(conv).__name__}"
    if key == "padding":
        pad = _padding(conv)
        numbers = tuple(a for a, _ in pad) if all(a == b for a, b in pad) else pad
        return f"{conv.padding!r} {numbers}" if isinstance(conv.padding, str) else f"{numbers}"
    value = getattr(conv, key)
    return repr(value) if isinstance(value, str) else f"{value}"


def _fold_mismatches(conv: ConvModule, bn: torch.nn.Module, fused: ConvModule) -> tuple[list[str], str | None]:
    """How `fused` computes something else than a fold of conv + bn can: (the geometry it
    changed, one sentence each: "the fused conv has stride (2, 2), the conv (1, 1)"; the dtype
    mismatch, or None). A changed geometry is another computation (UNEXPECTED whatever the
    weights); a fused conv of another dtype than the conv's is a fold no recipe replays (each
    folds in the modules' dtype), so no bound judges it (MISTRUSTED, named as such)."""
    mine, theirs = _geometry(conv), _geometry(fused)
    words = {"kind": "is", "padding_mode": "has padding_mode"}
    geometry = [f"the fused conv {words.get(k, 'has ' + k.replace('_', ' '))} {_shown(fused, k)}, "
                f"the conv {_shown(conv, k)}" for k in mine if mine[k] != theirs[k]]
    return geometry, _dtype_mismatch(conv, bn, fused)


def _dtype_mismatch(conv: ConvModule, bn: torch.nn.Module, fused: ConvModule) -> str | None:
    """The sentence naming a fused conv whose dtype is not the conv's (or whose bias is not its
    weight's), else None."""
    cd, fd = conv.weight.dtype, fused.weight.dtype
    fb = None if fused.bias is None else fused.bias.dtype
    if fb is not None and fb != fd:
        return f"the fused conv's bias is {_name(fb)}, its weight {_name(fd)}"
    if fd == cd:
        return None
    mean = getattr(bn, "running_mean", None)
    bd = mean.dtype if isinstance(mean, torch.Tensor) else cd
    modules = f"the conv and BatchNorm {_name(cd)}" if bd == cd else f"the conv {_name(cd)}, the BatchNorm {_name(bd)}"
    return (f"the fused conv is {_name(fd)}, {modules}: check_fold replays folds in the conv's dtype; a fold in one "
            f"dtype cast to another is no recipe's, and no bound judges it (check the fold before the cast, or fold "
            f"the {_name(fd)} modules)")


def _mismatch_verdicts(geometry: list[str], dtype_mismatch: str | None) -> list[Verdict]:
    """The core's verdicts of a fused conv's mismatches: another geometry is another computation
    (a failed check, UNEXPECTED); a dtype no recipe folds in is a check that could not inform
    (MISTRUSTED)."""
    out = [_core.of_check(failed=True)] if geometry else []
    return out + ([_core.of_check(failed=False, informative=False)] if dtype_mismatch else [])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class FoldResult(Result):
    """check_fold's result: the folded weights (explain: the recipes that reproduce them bit for
    bit, residuals in ULP) and the weights with the bias (each recipe's bound). The verdict is
    the worse of the two; when it is not EXPECTED, .diagnosis is the core's cause (the slip the
    weights are, the channels that changed, or the bias), and the report's first line says it.

    .geometry: how the fused conv computes another convolution than the conv (stride, padding,
    padding_mode, dilation, groups, ...; one sentence each, the verdict UNEXPECTED whatever the
    weights); .dtype_mismatch: the sentence naming a fused conv of another dtype than the conv's
    (a fold no recipe replays: MISTRUSTED). Either comes first in the reason."""

    def __init__(self, weights: ExplainResult, parameters: FoldCheckResult,
                 diagnose: Callable[[], Any] | None = None, geometry: list[str] | None = None,
                 dtype_mismatch: str | None = None) -> None:
        super().__init__(parameters._core)
        self.weights = weights
        self.parameters = parameters
        self._diagnose = diagnose
        self._diagnosis: Any = None
        self.geometry = list(geometry or [])
        self.dtype_mismatch = dtype_mismatch

    @property
    def verdict(self) -> Verdict:
        return _core.worst(self.weights.verdict, self.parameters.verdict,
                           *_mismatch_verdicts(self.geometry, self.dtype_mismatch))

    @property
    def mismatch(self) -> str | None:
        """The sentence saying how the fused conv is not the conv's kind (geometry, dtype), or None."""
        parts = self.geometry + ([self.dtype_mismatch] if self.dtype_mismatch else [])
        if not parts:
            return None
        return ("the fused conv computes another convolution: " if self.geometry else "") + "; ".join(parts)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def bit_exact_recipes(self) -> list[str]:
        return self.weights.bit_exact_recipes

    @property
    def recipe(self) -> str | None:
        """The recipe that reproduces the weights bit for bit (the first), else the closest one."""
        b = self.bit_exact_recipes
        return b[0] if b else self.parameters.closest_recipe

    @property
    def worst_channel(self) -> int | None:
        return self.parameters.worst_channel

    @property
    def diagnosis(self) -> Any:
        """The core's cause of a failure (foldcheck._core.FoldDiagnosis: .weights.cause,
        .weights.slip, .weights.channels_beyond, .bias.cause, .bias.off), None for a pass."""
        if self._diagnosis is None and self._diagnose is not None and not self.passed:
            self._diagnosis = self._diagnose()
        return self._diagnosis

    @property
    def reason(self) -> str | None:
        if self.passed:
            return (f"the weights and bias are a fold within {self.recipe}'s bound"
                    f"{' (its fold bit for bit)' if self.bit_exact_recipes else ''}")
        if self.mismatch:
            return self.mismatch
        d = self.diagnosis
        if d is None:
            return None
        if not self.weights.passed:
            return f"the weights are not a fold of the conv and BatchNorm: {d.weights.cause}"
        return f"the weights are, the bias is not: {d.bias.cause}"

    def answer(self) -> str:
        """The verdict with the cause above (the weights and the bias together), not the answer
        of the parameters' check alone that the core gives for fold_check."""
        return f"verdict: {self.verdict}" + (f": {self.reason}" if self.reason else "")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "geometry": self.geometry, "dtype_mismatch": self.dtype_mismatch,
                "weights": self.weights.to_dict(), "fold": self.parameters.to_dict()}

    def to_json(self, indent: int | None = None) -> str:
        import json  # noqa: PLC0415

        return json.dumps(self.to_dict(), indent=indent)

    def report(self, format: str = "text") -> str:  # noqa: A002
        if format == "json":
            return self.to_json(2)
        return super().report(format)

    def details(self) -> str:
        fold = self.parameters.to_dict()
        ratio = fold.get("worst_ratio")
        channel = fold.get("worst_channel")
        lines = [f"mismatch: {self.mismatch}"] if self.mismatch else []
        lines += [f"weights: {self.weights.verdict}; bit for bit: {', '.join(self.bit_exact_recipes) or 'no recipe'}",
                 f"weights and bias: {fold['verdict']} (closest recipe {fold.get('closest_recipe')}, worst ratio to "
                 f"its bound {'inf' if ratio is None else f'{ratio:.3g}'}"
                 f"{'' if channel is None else f', worst channel {channel}'})",
                 "bound: |w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta per weight and the bias chain's running-error "
                 "bound, each recipe's", "", self.weights.details()]
        return "\n".join(lines)

    def _repr_extra(self) -> str:
        return f" recipe: {self.recipe}"


def _fold_arrays(conv: ConvModule, bn: torch.nn.Module, fused: torch.nn.Module) -> dict[str, Any]:
    """check_fold's arrays: the conv's weight and bias, the fused conv's, the BatchNorm's."""
    w, b = _conv_arrays(conv, "conv")
    fw, fb = _conv_arrays(fused, "fused")
    if fw.shape != w.shape:
        geometry, _ = _fold_mismatches(conv, bn, fused)  # type: ignore[arg-type]  # both convs (_conv_arrays)
        raise ValueError(f"fused: weight shape {tuple(fw.shape)}, the conv's is {tuple(w.shape)}"
                         f"{': ' + '; '.join(geometry) if geometry else ''}")
    return dict(weight=w, bias=b, observed_weight=fw, observed_bias=fb, **bn_parameters(bn))


def check_fold(conv: ConvModule, bn: torch.nn.Module, fused: torch.nn.Module, *,
               precision: int = _commands.FOLD["precision"], threads: int = _commands.FOLD["threads"]) -> FoldResult:
    """Is the conv `fused` the fold of `conv` followed by `bn` (eval mode)?

    Its weights against the exact fold w*gamma/sqrt(var+eps) with every engine recipe replayed
    bit for bit (which one reproduces them) and bounded; its weights and bias together against
    each recipe's bound, as accuracy_diff checks a folded model. Returns a FoldResult
    (.verdict, .recipe, .bit_exact_recipes, .worst_channel, .weights, .parameters, .diagnosis).
    A fused conv of other geometry (stride, padding, padding_mode, dilation, groups, ...) is
    UNEXPECTED whatever its weights; one of another dtype than the conv's is MISTRUSTED (no
    recipe folds in one dtype and casts to another); either is named first (.geometry,
    .dtype_mismatch). `fused` may be fuse_modules' ConvReLU (its conv is checked)."""
    fused = _fused_conv(fused)
    a = _fold_arrays(conv, bn, fused)
    geometry, dtype_mismatch = _fold_mismatches(conv, bn, fused)  # type: ignore[arg-type]  # convs: checked above
    p = bn_parameters(bn)
    weights = _commands.explain(a["weight"], a["observed_weight"], precision=precision, threads=threads, **p)
    parameters = _commands.fold_check(a["weight"], a["bias"], a["observed_weight"], a["observed_bias"],
                                      precision=precision, threads=threads, **p)
    return FoldResult(weights, parameters, lambda: _commands.diagnose_fold(weights, **a), geometry, dtype_mismatch)


def diagnose(bn: torch.nn.Module, x: torch.Tensor, observed: torch.Tensor, *, conv: ConvModule | None = None,
             precision: int = _commands.DIAGNOSE["precision"],
             threads: int = _commands.DIAGNOSE["threads"]) -> DiagnoseResult:
    """Why does `observed` differ from what `bn` (eval mode: its running statistics), after
    `conv` if given, computes on `x`? The layer as given, then the common bugs: training-mode
    batch statistics, eps mismatch, variance read as std, missing sqrt, gamma/beta swapped,
    NHWC read as NCHW, ... Returns a DiagnoseResult (.best, .fix, .hypotheses)."""
    p = bn_parameters(bn)
    kw: dict[str, Any] = {}
    if conv is not None:
        w, b = _conv_arrays(conv, "conv")
        if len(conv.kernel_size) != 2:
            raise ValueError(f"conv: diagnose models a Conv2d (NCHW), this is a {type(conv).__name__}; check_fold "
                             "checks its fold")
        if conv.groups != 1 or len(set(conv.stride)) > 1 or len(set(conv.dilation)) > 1:
            raise ValueError("conv: diagnose takes an ungrouped conv with one stride and one dilation")
        if isinstance(conv.padding, str) or len(set(conv.padding)) > 1 or conv.padding_mode != "zeros":
            raise ValueError("conv: diagnose takes symmetric numeric zero padding (padding_mode 'zeros')")
        kw = dict(weight=w, bias=b, stride=conv.stride[0], padding=conv.padding[0], dilation=conv.dilation[0])
    problem = _output_shape_problem(x, observed, conv)
    if problem:
        raise ValueError(f"diagnose: {problem}")
    return _commands.diagnose(x, observed, precision=precision, threads=threads, **kw, **p)


def _output_shape_problem(x: Any, observed: Any, conv: ConvModule | None, what: str = "observed") -> str | None:
    """Why `observed` cannot be the output of `conv` (if given) + BatchNorm on `x`, by its shape:
    the shapes, the conv named, and which one-attribute change of the conv's geometry (stride,
    padding, dilation: a fused conv that lost or changed one) would give the observed shape."""
    if conv is None:
        return None  # the core's own refusal names the shapes of a BatchNorm alone
    got = tuple(observed.shape)
    want = _conv_output_shape(x.shape, conv.out_channels, conv.kernel_size, conv.stride, _padding(conv), conv.dilation)
    if got == want:
        return None
    text = f"{what} has shape {got}; the conv ({conv}) gives {want} on x of shape {tuple(x.shape)}"
    k, n = conv.kernel_size, len(conv.kernel_size)
    candidates = [(f"stride {s}", dict(stride=(s,) * n)) for s in range(1, 5)] + \
        [(f"padding {p}", dict(padding=((p, p),) * n)) for p in range(0, 2 * max(k))] + \
        [(f"dilation {d}", dict(dilation=(d,) * n)) for d in range(1, 5)]
    base = dict(stride=conv.stride, padding=_padding(conv), dilation=conv.dilation)
    fits = [what for what, change in candidates
            if _conv_output_shape(x.shape, conv.out_channels, k, **{**base, **change}) == got]
    return text + (f": a conv with {' or '.join(fits)} gives the observed shape (was it computed by a conv of "
                   "another geometry?)" if fits else "")


def _conv_output_shape(shape: Any, channels: int, kernel: Any, stride: Any, padding: Any, dilation: Any) -> tuple:
    """A conv's output shape on an input of `shape` (PyTorch's formula, per spatial dimension)."""
    spatial = [(n + a + b - d * (k - 1) - 1) // s + 1
               for n, k, s, (a, b), d in zip(shape[2:], kernel, stride, padding, dilation)]
    return (shape[0], channels, *spatial)


# --- models ------------------------------------------------------------------------------

def conv_bn_pairs(model: torch.nn.Module, example: torch.Tensor | None = None) -> list[list[str]]:
    """The [conv, bn] module-name pairs of a model where the BatchNorm takes the conv's output,
    nothing else does, and each module is called once (what fuse_modules may fuse). Found by
    torch.fx tracing; a model fx cannot trace needs `example` (an input), and its pairs are then
    found by running it once, counting every use of each conv's output."""
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception:  # fx cannot trace data-dependent Python
        if example is None:
            raise
        return _pairs_by_running(model, example)
    mods = dict(gm.named_modules())
    calls: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    pairs = []
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(mods.get(node.target), _BNS):
            continue
        src = node.args[0]
        if (getattr(src, "op", None) == "call_module" and isinstance(mods.get(src.target), _CONVS)
                and len(src.users) == 1 and calls[src.target] == 1 and calls[node.target] == 1):
            pairs.append([src.target, node.target])
    return pairs


def _pairs_by_running(model, example):
    """conv_bn_pairs by one run: module hooks name each conv's output and each BatchNorm's
    input; a torch function mode counts every other use of a conv's output (what runs inside a
    BatchNorm's own forward is that BatchNorm's use). Outputs are kept alive during the run, so
    no tensor's identity is reused."""
    from torch.overrides import TorchFunctionMode  # noqa: PLC0415

    names = {m: n for n, m in model.named_modules()}
    produced: dict[int, Any] = {}
    other_uses: dict[Any, int] = {}
    bn_of: dict[Any, Any] = {}
    calls: dict[Any, int] = {}
    inside_bn: list[Any] = []
    hooks: list[Any] = []

    class Uses(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not inside_bn:
                for a in torch.utils._pytree.tree_leaves((args, kwargs or {})):
                    if isinstance(a, torch.Tensor) and id(a) in produced:
                        other_uses[id(a)] = other_uses.get(id(a), 0) + 1
            return func(*args, **(kwargs or {}))

    def count(mod):
        calls[names[mod]] = calls.get(names[mod], 0) + 1

    def on_conv(mod, inputs, out):
        count(mod)
        produced[id(out)] = (names[mod], out)

    def on_bn_pre(mod, inputs):
        count(mod)
        # Only a conv's output (kept alive in `produced`) is recorded: another input may be freed
        # during the run and its id reused by a later conv's output, which would then seem to
        # feed two BatchNorms (seen: Branchy's c3 -> bn3 missed now and then).
        if id(inputs[0]) in produced:
            bn_of.setdefault(id(inputs[0]), []).append(names[mod])
        inside_bn.append(mod)

    def on_bn_post(mod, inputs, out):
        inside_bn.pop()

    for m in model.modules():
        if isinstance(m, _CONVS):
            hooks.append(m.register_forward_hook(on_conv))
        elif isinstance(m, _BNS):
            hooks.extend([m.register_forward_pre_hook(on_bn_pre), m.register_forward_hook(on_bn_post)])
    _run_hooked(model, example, hooks, Uses())
    order = list(names.values())
    pairs = [[conv, bns[0]] for tid, (conv, _) in produced.items()
             for bns in [bn_of.get(tid, [])]
             if len(bns) == 1 and not other_uses.get(tid) and calls[conv] == 1 and calls[bns[0]] == 1]
    return sorted(pairs, key=lambda p: order.index(p[0]))


@contextlib.contextmanager
def _evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """The model in eval mode (no running statistic moves), every module's mode given back."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        for m, t in modes:
            m.training = t


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def export_onnx(model: torch.nn.Module, x: torch.Tensor, path: str | os.PathLike[str], opset: int = 17) -> str:
    """Export `model` on input `x` to ONNX as foldcheck reads it: eval mode, BatchNorms kept as
    BatchNormalization nodes (training=PRESERVE on an eval model: EVAL would let the exporter
    fold them), no constant folding, parameters under their module names. The TorchScript
    exporter does that (dynamo=False); the default dynamo exporter of PyTorch >= 2.9 decomposes
    and renames."""
    evaluating = _evaluating(model) if isinstance(model, torch.nn.Module) else contextlib.nullcontext()
    with evaluating, _quiet_export(), torch.no_grad():
        torch.onnx.export(model, (x,), os.fspath(path), input_names=["input"], opset_version=opset,
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False, dynamo=False)
    return os.fspath(path)


def _module_names(onnx_path):
    """ONNX conv node name -> the PyTorch module it came from (its weight initializer is
    MODULE.weight; an exporter's Identity in between is followed)."""
    import onnx  # noqa: PLC0415

    g = onnx.load(onnx_path, load_external_data=False).graph
    identity = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity"}
    names = {}
    for n in g.node:
        if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and len(n.input) > 1:
            w = n.input[1]
            while w in identity:
                w = identity[w]
            if w.endswith(".weight"):
                names[n.name] = w[: -len(".weight")]
    return names


class ModelCheck(Result):
    """check_model's result: accuracy_diff's, with each layer named by its PyTorch module. Its
    text report is answer first (the core's answer line of accuracy_diff), then its layers.

    .layers: [{"module", "verdict", "worst_channel", "closest_recipe", "onnx_node", ...}];
    .unexpected: the layers that are not EXPECTED; .accuracy_diff: the full result.
    .mismatches: {conv module: sentence} for each fused conv that computes another convolution
    than the model's (geometry: UNEXPECTED) or is of another dtype (MISTRUSTED); each joins its
    layer's verdict and the whole's (through the core), and the answer names the first."""

    def __init__(self, diff: AccuracyDiffResult, names: dict[str, str], fuser: str | None,
                 mismatches: dict[str, tuple[list[str], str | None]] | None = None) -> None:
        super().__init__(diff._core)
        self.accuracy_diff = diff
        self.fuser = fuser
        self._names = names
        self._mismatches = dict(mismatches or {})

    @property
    def mismatches(self) -> dict[str, str]:
        return {m: "; ".join(g + ([d] if d else [])) for m, (g, d) in self._mismatches.items()}

    @property
    def verdict(self) -> Verdict:
        return _core.worst(self._core.verdict, *[v for g, d in self._mismatches.values()
                                                 for v in _mismatch_verdicts(g, d)])

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def answer(self) -> str:
        """The core's answer line of accuracy_diff, or first the fused convs that compute another
        convolution (or in another dtype) than the model's."""
        if not self._mismatches:
            return super().answer()
        (module, text), more = next(iter(self.mismatches.items())), len(self._mismatches) - 1
        return _core.neutralised(f"verdict: {self.verdict}: {module}: {text}"  # one line, names as the core shows them
                                 f"{f' (and {more} more layers, listed below)' if more else ''}")

    @property
    def layers(self) -> list[dict[str, Any]]:
        out = []
        for layer in self.accuracy_diff.layers:
            fold = layer.get("fold") or {}
            out.append({"module": self._names.get(layer["name"], layer["name"]), "verdict": layer["verdict"],
                        "worst_channel": layer.get("worst_channel"), "closest_recipe": layer.get("closest_recipe"),
                        "worst_ratio": fold.get("worst_ratio"), "onnx_node": layer["name"],
                        "observed_node": layer.get("observed_node"), "note": layer.get("observed_note")})
        return self._with_mismatches(out)

    def _with_mismatches(self, layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each layer whose fused conv is mismatched: its verdict joined with the mismatch's (the
        core's worst), the mismatch its note (a layer accuracy_diff did not list is added)."""
        by_module = {x["module"]: x for x in layers}
        for module, (geometry, dtype) in self._mismatches.items():
            x = by_module.get(module)
            if x is None:
                x = {"module": module, "verdict": _core.worst(*_mismatch_verdicts(geometry, dtype)),
                     "worst_channel": None, "closest_recipe": None, "worst_ratio": None, "onnx_node": None,
                     "observed_node": None, "note": None}
                layers.append(x)
            x["verdict"] = _core.worst(x["verdict"], *_mismatch_verdicts(geometry, dtype))
            x["note"] = "; ".join(filter(None, [self.mismatches[module], x["note"]]))
        return layers

    @property
    def unexpected(self) -> list[dict[str, Any]]:
        """The layers that are not EXPECTED (each a dict as in .layers)."""
        return [x for x in self.layers if Verdict(x["verdict"]) is not Verdict.EXPECTED]

    @property
    def reason(self) -> str | None:
        """Why nothing was compared, when no layer was (else None)."""
        if self.layers:
            return None
        return self._no_pairs

    _no_pairs: str | None = None
    notes: list[str] | tuple[str, ...] = ()  # what was not checked, and why

    def to_dict(self) -> dict[str, Any]:
        """accuracy_diff's result, with the verdict that joins the mismatches and the mismatches
        ({conv module: sentence}) when there are any."""
        d = dict(self.accuracy_diff.to_dict())
        if self._mismatches:
            d.update(verdict=str(self.verdict), mismatches=self.mismatches)
        return d

    def to_json(self, indent: int | None = None) -> str:
        import json  # noqa: PLC0415

        return json.dumps(self.to_dict(), indent=indent) if self._mismatches else self.accuracy_diff.to_json(indent)

    def report(self, format: str = "text") -> str:  # noqa: A002
        if format == "json":
            return self.to_json(2)
        if format != "text":  # the core's; a mismatch (which it did not see) said first in Markdown
            core = self._named_for_the_user(self.accuracy_diff.report(format))
            return f"**{self.answer()}**\n\n{core}" if self._mismatches and format == "markdown" else core
        # Answer first, as every result: the core's answer line of accuracy_diff's result (the
        # verdict and its reason, reports/run_answer.hpp), then what was checked.
        rows = [self.answer(), f"  {len(self.layers)} conv+BN layers{', fused by ' + self.fuser if self.fuser else ''}"]
        if self.reason:
            rows.append(f"  {self.reason}")
        rows.extend(f"  note: {n}" for n in self.notes)
        e2e = self.accuracy_diff.get("end_to_end") or {}
        if e2e.get("observed_output"):
            o = e2e["observed_output"]
            rows.append(f"  the fused model's outputs end to end: {o.get('verdict')}")
        shown = 0
        for x in self.layers:  # every layer not EXPECTED; the others up to SHOWN rows in all
            if Verdict(x["verdict"]) is Verdict.EXPECTED and shown >= SHOWN:
                continue
            shown += 1
            ch = "" if x["worst_channel"] is None else f"  channel {x['worst_channel']}"
            ratio = "" if x["worst_ratio"] is None else f"  ratio {x['worst_ratio']:.3g}"
            note = f"  {x['note']}" if x["note"] else ""
            module = _core.neutralised(x["module"])  # before padding: the columns line up
            rows.append(f"  {x['verdict']:<11} {module:<32} {x['closest_recipe'] or '':<14}{ratio}{ch}{note}")
        if shown < len(self.layers):
            rows.append(f"  ... {len(self.layers) - shown} more layers EXPECTED, not shown (.layers lists every one)")
        # Each row one line: module names, notes and the fuser's words neutralised as the core's
        # reports show names (a module named with ESC or a line break cannot drive the terminal).
        return "\n".join(_core.neutralised(row) for row in rows)

    model_name: str | None = None  # the user's model, as the pages name it (its class): check_model sets it

    def _named_for_the_user(self, page: str) -> str:
        """A page of the core's with the files check_model wrote (in a temporary directory gone
        after the call) named as the user's objects: the model by its class, the fused model."""
        for key, word in (("observed", "the fused model"), ("model", self.model_name or "the model")):
            path = (self.accuracy_diff.get(key) or {}).get("path")
            if isinstance(path, str) and path:
                page = page.replace(path, _core.neutralised(word))
        return page

    def _repr_extra(self) -> str:
        bad = self.unexpected
        return f" layers: {len(self.layers)}" + (f", first bad: {bad[0]['module']}" if bad else "")


def _fused_module(model, fused, x):
    """An nn.Module with the fused model's folded parameters, for export: `fused` itself when it
    is one (fuse_modules, fuse_conv_bn_eval, an fx GraphModule); for a frozen ScriptModule or a
    compiled function, a copy of `model` whose conv + BN pairs carry the folded constants read
    from it (frozen_fold / compiled_fold)."""
    import copy  # noqa: PLC0415

    if isinstance(fused, torch.jit.ScriptModule):
        folds, fuser = frozen_fold(fused), "torch.jit.freeze"
    elif isinstance(fused, torch.nn.Module) and not hasattr(fused, "_orig_mod"):
        return fused, None
    else:
        folds, fuser = compiled_fold(fused, x), "torch.compile"
    rebuilt = copy.deepcopy(model).eval()
    _install_folds(rebuilt, folds, x)
    return rebuilt, fuser


def check_model(model: torch.nn.Module, fused: Any, x: torch.Tensor, *, weights_only: bool = _AD["weights_only"],
                output_samples: int = _AD["output_samples"], confidence: float = _AD["confidence"],
                precision: int = _AD["precision"], threads: int = _AD["threads"],
                progress: Callable[[str], object] | None = None,
                keep_dir: str | os.PathLike[str] | None = None) -> ModelCheck:
    """Is `fused` a correct fold of every conv + BatchNorm of `model`, on input `x`?

    fused: the model after a fuser (an nn.Module, an fx GraphModule, a torch.jit.freeze'd
    ScriptModule, or a torch.compile'd model with inductor freezing). Both are exported with
    their BatchNorms kept and checked by accuracy_diff: every folded weight and bias against the
    exact fold and each recipe's bound, and (unless weights_only) every layer on its real input
    and the outputs end to end. Returns a ModelCheck whose layers carry module names
    (`layer2.0.conv1`) and, for a wrong fold, the worst channel. keep_dir: keep the ONNX files."""
    if model is fused:
        raise ValueError("check_model: the fused model is the model itself (fuse a copy: copy.deepcopy(model))")
    if isinstance(model, torch.nn.Module) and model.training:
        warnings.warn("check_model: the model is in training mode; it is checked as in eval mode (running "
                      "statistics, the computation a fold reproduces) and left as it was", stacklevel=2)
    with tempfile.TemporaryDirectory(prefix="foldcheck-torch-") as tmp:
        d = keep_dir or tmp
        os.makedirs(d, exist_ok=True)
        _refuse_other_ranks(model)
        original = export_onnx(model, x, os.path.join(d, "original.onnx"))
        fused_module, fuser = _fused_module(model, fused, x)
        mismatches = _pair_mismatches(model, fused_module, x)
        weights_only, fused_module, note = _as_the_models(model, fused_module, mismatches, weights_only)
        with _runs_on_x(model, fused_module, x):
            observed = export_onnx(fused_module, x, os.path.join(d, "fused.onnx"))
        y, note = (None, note or "weights only: the fused model's outputs were not compared") if weights_only \
            else _output_of(fused, x)
        with _in_users_words(os.fspath(d)):
            diff = _commands.accuracy_diff(original, observed=observed, input=_npy_input(x), observed_output=y,
                                           weights_only=weights_only, output_samples=output_samples,
                                           confidence=confidence, precision=precision, threads=threads,
                                           progress=progress)
        r = ModelCheck(diff, _module_names(original), fuser, mismatches)
        r.notes = [note] if note else []
        r.model_name = type(model).__name__
        if not r.layers:
            r._no_pairs = _why_no_pairs(model, fused_module, x)
        return r


def _refuse_other_ranks(model: torch.nn.Module) -> None:
    """check_model reads the models as ONNX 2-D Conv nodes (accuracy_diff): a Conv1d or Conv3d
    is refused up front, by module name, pointing at check_fold (which checks any rank)."""
    other = [(n, type(m).__name__) for n, m in model.named_modules() if isinstance(m, _CONVS)
             and len(m.kernel_size) != 2]
    if other:
        more = f" (and {len(other) - 1} more: {', '.join(n for n, _ in other[1:4])})" if len(other) > 1 else ""
        raise ValueError(f"check_model: {other[0][0] or 'the model'} is a {other[0][1]}{more}: check_model checks "
                         "models of 2-D convolutions (Conv2d); check each 1-D or 3-D conv + BatchNorm fold with "
                         "check_fold(conv, bn, fused_conv)")


def _pair_mismatches(model: torch.nn.Module, fused: Any, x: torch.Tensor) -> dict[str, tuple[list[str], str | None]]:
    """Each conv + BN pair of `model` whose fused conv (the module of the same name in `fused`:
    fuse_modules, fuse_conv_bn_eval and fx keep names) computes another convolution or is of
    another dtype: {conv name: (geometry, dtype mismatch)} (_fold_mismatches)."""
    if not isinstance(fused, torch.nn.Module):
        return {}
    mods, theirs = dict(model.named_modules()), dict(fused.named_modules())
    out = {}
    for conv, bn in conv_bn_pairs(model, x):
        f = theirs.get(conv)
        f = f[0] if isinstance(f, torch.nn.Sequential) and len(f) and isinstance(f[0], _CONVS) else f
        if isinstance(f, _CONVS):
            geometry, dtype = _fold_mismatches(mods[conv], mods[bn], f)
            if geometry or dtype:
                out[conv] = (geometry, dtype)
    return out


def _as_the_models(model: torch.nn.Module, fused: torch.nn.Module, mismatches: dict[str, Any],
                   weights_only: bool) -> tuple[bool, torch.nn.Module, str | None]:
    """What is exported for accuracy_diff when fused convs are mismatched: a copy of `fused`
    whose mismatched convs have the model's geometry and dtype and their own weight and bias
    values (exactly: a cast up, or none), so that their folds are still judged; weights only,
    since the fused model computes other convolutions. (weights_only, module, note)."""
    import copy  # noqa: PLC0415

    if not mismatches:
        return weights_only, fused, None
    fused = copy.deepcopy(fused)
    mods, theirs = dict(model.named_modules()), dict(fused.named_modules())
    for name in mismatches:
        conv, f = mods[name], theirs[name]
        at = f"{name}.0" if isinstance(f, torch.nn.Sequential) else name
        f = theirs[at]
        if f.weight.shape != conv.weight.shape:
            continue
        restored = copy.deepcopy(conv)
        with torch.no_grad():
            restored.weight = torch.nn.Parameter(f.weight.detach().to(conv.weight.dtype))
            restored.bias = None if f.bias is None else torch.nn.Parameter(f.bias.detach().to(conv.weight.dtype))
        parent, _, attr = at.rpartition(".")
        setattr(theirs[parent] if parent else fused, attr, restored)
    verb = "is" if len(mismatches) == 1 else "are"  # another geometry or dtype than the model's
    return True, fused, (f"the fused model's outputs were not compared (its folded weights were): "
                         f"{', '.join(mismatches)} {verb} not as the model's convolution")


@contextlib.contextmanager
def _runs_on_x(model: torch.nn.Module, fused: torch.nn.Module, x: torch.Tensor) -> Iterator[None]:
    """The fused model's export (a run on x), its framework error said as check_model's: the
    fused model does not run on x, and the dtypes when they are not the model's (a fused model
    cast to float16 whose layers outside the conv + BN pairs were cast too)."""
    try:
        yield
    except RuntimeError as e:
        mine, theirs = ({_name(p.dtype) for p in m.parameters() if p.is_floating_point()} for m in (model, fused))
        dtypes = f": its parameters are {', '.join(sorted(theirs))}, the model's {', '.join(sorted(mine))}" \
            if mine != theirs else ""
        raise ValueError(f"check_model: the fused model does not run on x ({_name(x.dtype)}){dtypes} ({e})") from None


@contextlib.contextmanager
def _in_users_words(d: str) -> Iterator[None]:
    """accuracy_diff's refusals with the files check_model wrote named as the user's objects (the
    model, the fused model, x, the fused model's output), never as temporary paths."""
    try:
        yield
    except ValueError as e:
        words = {os.path.join(d, "original.onnx"): "the model (as exported to ONNX)",
                 os.path.join(d, "fused.onnx"): "the fused model (as exported to ONNX)"}
        text = str(e)
        for path, word in words.items():
            text = text.replace(path, word)
        names = {"input": "x", "observed_output": "the fused model's output on x"}
        text = re.sub(r"\S*foldcheck-[^/\s]*/(input|observed_output)\.npy", lambda m: names[m[1]], text)
        raise type(e)(f"check_model: {text}") from None


def _npy_input(x):
    """x for accuracy_diff's input file: .npy has no bfloat16, so a bfloat16 input goes as the
    float32 holding the same values (exactly); the model reads it in its own type."""
    x = x.detach().cpu()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def _output_of(fused, x):
    """The fused model's own output on x (eval mode, its modes given back), for accuracy_diff's
    end-to-end check of another engine's output: it sees what no fold check can (a changed layer
    without a BatchNorm, a module called twice). (array, None), or (None, why not)."""
    module = fused if isinstance(fused, torch.nn.Module) else getattr(fused, "_orig_mod", None)
    frozen = isinstance(fused, torch.jit.ScriptModule)  # frozen: no modes left to set
    evaluating = _evaluating(module) if isinstance(module, torch.nn.Module) and not frozen \
        else contextlib.nullcontext()
    with evaluating, torch.no_grad():
        y = fused(x)
    if not isinstance(y, torch.Tensor) or y.dtype != torch.float32:
        return None, (f"the fused model's output is a {type(y).__name__}"
                      f"{'' if not isinstance(y, torch.Tensor) else ' of ' + str(y.dtype)}, not one float32 tensor: "
                      "not compared end to end")
    return y.detach().cpu().contiguous().numpy(), None


def _why_no_pairs(model, fused, x):
    """Why the model exported no conv + BatchNorm pair (swapped arguments, or none to fold)."""
    theirs = len(conv_bn_pairs(fused, x)) if isinstance(fused, torch.nn.Module) else 0
    if theirs:
        return (f"the model has no conv + BatchNorm pair but the fused model has {theirs}: are the two swapped? "
                "check_model(model, fused_model, x) takes the original first")
    return "the model has no conv followed by a BatchNorm (nothing to fold, nothing to check)"


# --- folded constants of compiled models -------------------------------------------------

def _conv_order(model, x):
    """The model's convs in the order forward runs them: [(name, module)]."""
    order, hooks = [], []
    for name, m in model.named_modules():
        if isinstance(m, _CONVS):
            hooks.append(m.register_forward_hook(lambda mod, i, o, name=name: order.append((name, mod))))
    _run_hooked(model, x, hooks)
    return order


def _run_hooked(model, x, hooks, mode=None):
    """model(x) once in eval mode (under a torch function `mode` if given), then the hooks removed."""
    try:
        with _evaluating(model), (mode if mode is not None else contextlib.nullcontext()):
            model(x)
    finally:
        for h in hooks:
            h.remove()


def _install_folds(model, folds, x):
    """Give each conv of `model` (forward order) the folded (weight, bias) of `folds` (the fused
    graph's convs, in its order); each BatchNorm of a conv + BN pair becomes an identity."""
    convs = _conv_order(model, x)
    if len(convs) != len(folds):
        raise ValueError(f"the fused model has {len(folds)} convolutions, the model {len(convs)}: cannot pair them")
    pairs = dict(conv_bn_pairs(model, x))
    mods = dict(model.named_modules())
    for (name, conv), (w, b) in zip(convs, folds):
        if tuple(w.shape) != tuple(conv.weight.shape):
            raise ValueError(f"{name}: the fused graph's conv in its place has weight shape {tuple(w.shape)}, the "
                             f"module's is {tuple(conv.weight.shape)}")
        with torch.no_grad():
            conv.weight = torch.nn.Parameter(w.detach().clone().to(conv.weight.dtype))
            conv.bias = None if b is None else torch.nn.Parameter(b.detach().clone().to(conv.weight.dtype))
        if name in pairs:
            parent, _, attr = pairs[name].rpartition(".")
            setattr(mods[parent] if parent else model, attr, torch.nn.Identity())


def frozen_fold(frozen: torch.jit.ScriptModule) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
    """The (weight, bias) of every convolution of a torch.jit.freeze'd module, in graph order:
    constants after freezing (its conv-bn folding has run)."""
    kinds = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution"}
    graph = frozen.graph
    nodes = [n for n in graph.nodes() if n.kind() in kinds]
    if sum(len(graph.findAllNodes(k)) for k in kinds) != len(nodes):  # type: ignore[attr-defined,misc]
        raise ValueError("a convolution inside a loop or branch of the frozen graph: its place is not known")
    return [(_constant(n.inputsAt(1)), _constant(n.inputsAt(2))) for n in nodes]


def _constant(value):
    node = value.node()
    if node.kind() != "prim::Constant":
        raise ValueError("a convolution's weight is not a constant of the frozen graph (was it frozen?)")
    t = node.output().toIValue()
    return t if isinstance(t, torch.Tensor) else None


def compiled_fold(compiled: Callable[..., Any], x: torch.Tensor) -> list[tuple[Any, Any]]:
    """The (weight, bias) of every convolution of a torch.compile'd model after inductor's
    freezing (torch._inductor.config.freezing = True: its constant folding folds each conv + BN),
    in graph order: read from the constants of the graph as the last post-grad pass leaves it
    (after any post_grad_custom_post_pass of the caller's), compiled once here on `x`. Weight
    prepacking is off for this compilation (it would make the constants opaque oneDNN tensors:
    a change of layout after the fold, not of values) and so is the FX graph cache (a cached
    graph runs no pass)."""
    from torch._inductor import config as inductor  # noqa: PLC0415

    folds, theirs = [], inductor.post_grad_custom_post_pass

    def read(graph):
        if theirs is not None:
            theirs(graph)  # type: ignore[operator]  # a callable, as the caller set it
        gm = graph.owning_module
        for node in graph.nodes:
            if node.op == "call_function" and "convolution" in str(node.target):
                folds.append((_fx_value(gm, node.args[1]), _fx_value(gm, node.args[2] if len(node.args) > 2 else None)))
    torch._dynamo.reset()
    patch = {"freezing": True, "post_grad_custom_post_pass": read, "fx_graph_cache": False, "cpp.weight_prepack": False}
    module = getattr(compiled, "_orig_mod", None)
    evaluating = _evaluating(module) if isinstance(module, torch.nn.Module) else contextlib.nullcontext()
    with inductor.patch(patch), evaluating, torch.no_grad():
        compiled(x)
    if not folds:
        raise ValueError("no convolution in the compiled graph (was the model compiled with inductor?)")
    return folds


def _fx_value(gm, arg):
    if arg is None:
        return None
    if getattr(arg, "op", None) != "get_attr":
        raise ValueError(f"a convolution's parameter is not a frozen constant ({arg}): was freezing on?")
    obj = gm
    for part in arg.target.split("."):
        obj = getattr(obj, part)
    return obj
