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
import inspect
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

__all__ = ["check_fold", "check_model", "diagnose", "conv_bn_pairs", "export_onnx", "bn_parameters", "frozen_fold",
           "compiled_fold", "FoldResult", "ModelCheck"]

from . import _arrays, _commands, _core
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
        raise TypeError(f"bn: expected a torch.nn.BatchNorm1d/2d/3d, got {type(bn).__name__}")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("bn: this BatchNorm tracks no running statistics (track_running_stats=False): it always "
                         "normalizes with batch statistics, and no fold reproduces it")
    c = bn.num_features
    dev = dict(dtype=bn.running_mean.dtype)
    gamma = bn.weight.detach() if bn.weight is not None else torch.ones(c, **dev)
    beta = bn.bias.detach() if bn.bias is not None else torch.zeros(c, **dev)
    return dict(gamma=gamma, beta=beta, mean=bn.running_mean.detach(), var=bn.running_var.detach(), eps=float(bn.eps))


# The user's words for the core's argument names (its errors start "FIELD: "): the modules'
# tensors, as check_fold, assert_fold_close and diagnose take them.
_BN_WORDS = {"gamma": "bn.weight", "beta": "bn.bias", "mean": "bn.running_mean", "var": "bn.running_var",
             "eps": "bn.eps"}
_FOLD_WORDS = {"original": "conv.weight", "weight": "conv.weight", "bias": "conv.bias", "observed": "fused.weight",
               "observed_weight": "fused.weight", "observed_bias": "fused.bias", **_BN_WORDS}
_DIAGNOSE_WORDS = {"weight": "conv.weight", "bias": "conv.bias", **_BN_WORDS}


@contextlib.contextmanager
def _in_module_words(words: dict[str, str]) -> Iterator[None]:
    """The core's refusals (foldcheck.InputError) with its argument names said as the user's
    objects: "original: ..." of check_fold's conv reads "conv.weight: ..."."""
    try:
        yield
    except ValueError as e:
        names = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
        text = re.sub(rf"^BatchNorm \(arguments\): ({names}) ", r"\1: ", str(e))  # the BatchNorm loader's
        text = re.sub(rf"(?<![\w.])({names})(?=:|'s\b)", lambda m: words[m[1]], text)
        raise type(e)(text) from None


def _bn_arrays(bn: torch.nn.Module) -> dict[str, Any]:
    """bn_parameters as the arrays the core reads, each refused by its module attribute's name
    (bn.running_var: a float8_e4m3fn tensor ...) when no array holds it (_arrays.as_array)."""
    return {k: v if k == "eps" else _arrays.as_array(v, _BN_WORDS[k]) for k, v in bn_parameters(bn).items()}


def _conv_arrays(conv: torch.nn.Module, what: str) -> tuple[Any, Any]:
    """A conv's weight and bias (None) as the arrays the core reads, refused by name (what.weight)
    when no array holds them."""
    if not isinstance(conv, _CONVS):
        raise TypeError(f"{what}: expected a torch.nn.Conv1d/2d/3d (channels on axis 0), got {type(conv).__name__}")
    return (_arrays.as_array(conv.weight, f"{what}.weight"),
            None if conv.bias is None else _arrays.as_array(conv.bias, f"{what}.bias"))


# --- what a fused conv computes besides its weights ----------------------------------------
# A fold changes a conv's weight and bias values and nothing else: every other thing that
# defines its computation must be the conv's, and its dtype too (the recipes replay a fold in
# the modules' dtype). check_fold, assert_fold_close, check_model and diagnose hold a fused
# module to that through _fold_mismatches: its conv's geometry (_geometry), what runs after the
# conv (only what a fuser makes: Identity, fuse_modules' conv + ReLU), the methods its call runs
# (its class's forward, _conv_forward, ...), its hooks and its parametrizations (_computation).

_CONV_RELUS = (torch.ao.nn.intrinsic.ConvReLU1d, torch.ao.nn.intrinsic.ConvReLU2d, torch.ao.nn.intrinsic.ConvReLU3d)
# What a module's call runs: torch.nn.Module's call machinery, then forward (a conv's forward
# then its _conv_forward). A class or instance that defines one of these computes otherwise.
_CALL_PATH = ("__call__", "_wrapped_call_impl", "_call_impl", "forward", "_conv_forward", "__getattr__")


def _class_name(cls: type, *others: type) -> str:
    """A class as a sentence names it: its __qualname__, or its module's too (module.qualname)
    when another class of the sentence (`others`) has the same name: two classes called Fused,
    a user's class called ReLU or Sequential, are told apart."""
    clash = any(o is not cls and o.__qualname__ == cls.__qualname__ for o in others)
    return f"{cls.__module__}.{cls.__qualname__}" if clash else cls.__qualname__


def _fused_parts(fused: Any) -> tuple[torch.nn.Module, list[torch.nn.Module]]:
    """(the conv, the modules after it) of what a fuser returns for one conv + BN: the conv
    itself (nothing after it), or a Sequential (fuse_modules' ConvReLU2d, a Sequential(conv,
    Identity)) whose first module is the conv. What the modules after it compute is
    _after_conv's to judge."""
    if isinstance(fused, torch.nn.Sequential) and len(fused) and isinstance(fused[0], _CONVS):
        return fused[0], list(fused)[1:]
    return fused, []


def _fused_conv(fused: torch.nn.Module, what: str = "fused") -> torch.nn.Module:
    """The conv inside what a fuser returns for one conv + BN (_fused_parts). A conv + BatchNorm
    kept apart (ConvBn2d, made by fuse_modules in training mode) is not a fold and is refused,
    naming it."""
    conv, after = _fused_parts(fused)
    if any(isinstance(m, _BNS) for m in after):
        raise TypeError(f"{what}: a {type(fused).__name__} that keeps its BatchNorm apart from the conv (not "
                        "folded: fuse_modules_qat keeps it for training; fold an eval model with fuse_modules)")
    return conv


def _after_conv(fused: torch.nn.Module, after: list[torch.nn.Module], relu_after: bool | None) -> list[str]:
    """What the fused module computes after its conv that conv + BatchNorm does not, one sentence
    each. A fuser adds Identity, and fuse_modules' conv + BatchNorm + ReLU (the documented use: a
    ConvReLU1d/2d/3d, or a Sequential(conv, nn.ReLU) exactly) one ReLU: that of the model, which
    applies one to the BatchNorm's output (relu_after True); one where the model applies none
    (False) is another computation; None: not known (check_fold's conv and bn: the ReLU is taken
    to follow them, and _relu_note says so). Anything else (another activation, a second ReLU, a
    subclass of either, a Sequential subclass) is another computation."""
    out = []
    known = (torch.nn.Sequential, torch.nn.ReLU, torch.nn.Identity)  # a user's class of one of their names: told apart
    if after and type(fused) is not torch.nn.Sequential and type(fused) not in _CONV_RELUS:
        out.append(f"the fused module is a {_class_name(type(fused), *known)}, not a Sequential: it runs its own "
                   "code around the conv")
    relus = [m for m in after if type(m) is torch.nn.ReLU]
    if len(relus) > 1:
        out.append(f"the fused module applies ReLU {len(relus)} times after the conv; conv + BatchNorm does not")
    elif relus and relu_after is False:
        out.append("the fused module applies ReLU after the conv; the model applies none to its BatchNorm's output")
    out += [f"the fused module applies {_class_name(type(m), *known)} after the conv; conv + BatchNorm does not"
            for m in after if type(m) not in (torch.nn.Identity, torch.nn.ReLU) and not isinstance(m, _BNS)]
    return out


def _computation(conv: torch.nn.Module, bn: torch.nn.Module, fused: torch.nn.Module,
                 relu_after: bool | None = None) -> list[str]:
    """How the fused module (`fused`: a conv, or a fuser's Sequential around one) computes other
    than conv + bn besides its geometry, one sentence each: what runs after the conv
    (_after_conv; relu_after: whether the model applies a ReLU to bn's output, None if not
    known), the methods its call runs (_methods), its hooks (_hooks) and its parametrizations
    (_parametrizations)."""
    f, after = _fused_parts(fused)
    own = [f"the fused module's {_class_name(type(m))} has its own {name} (set on the module)"
           for m in [fused, *after] if m is not f for name in _CALL_PATH if name in vars(m)]
    return _after_conv(fused, after, relu_after) + own + _methods(conv, f) + _hooks(conv, bn, fused, f, after) + \
        _parametrizations(conv, f)


def _relu_note(fused: torch.nn.Module) -> str | None:
    """The sentence saying what check_fold takes on trust: the one ReLU a fused module applies
    after its conv (fuse_modules' conv + BatchNorm + ReLU) follows the BatchNorm in the original,
    which conv + bn, as given, do not say; None without one."""
    if sum(type(m) is torch.nn.ReLU for m in _fused_parts(fused)[1]) != 1:
        return None
    return ("the fused module applies a ReLU after the conv (fuse_modules' conv + BatchNorm + ReLU): taken to follow "
            "the BatchNorm in the original, which conv + bn do not say (check_model(model, fused_model, x) sees "
            "whether it does)")


def _resolved(m: torch.nn.Module, name: str, named: Callable[[type], str]) -> tuple[Any, str]:
    """(the function a call of m.`name` runs, where it comes from: 'Conv2d._conv_forward' (its
    class as `named` names it), or 'a forward set on the module itself')."""
    own = vars(m).get(name)
    if own is not None:
        return getattr(own, "__func__", own), f"a {name} set on the module itself"
    owner = next((c for c in type(m).__mro__ if name in vars(c)), None)
    return (None, f"no {name}") if owner is None else (vars(owner)[name], f"{named(owner)}.{name}")


def _naming(*modules: torch.nn.Module) -> Callable[[type], str]:
    """_class_name among the classes of the modules and their bases (all a sentence may name)."""
    pool = [c for m in modules for c in type(m).__mro__]
    return lambda c: _class_name(c, *pool)


def _methods(conv: torch.nn.Module, fused: torch.nn.Module) -> list[str]:
    """The methods of the fused conv's call path that are not the conv's: a subclass overriding
    forward or _conv_forward (weight standardization), a forward set on the instance, or the
    conv's own such methods lost. The same class, or one that overrides none of them (a
    parametrized conv's class), computes the same."""
    out, named = [], _naming(conv, fused)
    for name in _CALL_PATH:
        (mine, where), (theirs, their_where) = _resolved(conv, name, named), _resolved(fused, name, named)
        if mine is not theirs:
            out.append(f"the fused conv (a {named(type(fused))}) runs {their_where}, the conv (a "
                       f"{named(type(conv))}) {where}")
    return out


def _own_forward(conv: torch.nn.Module, fused: torch.nn.Module) -> str | None:
    """The sentence naming a conv whose class runs its own forward or _conv_forward (not its
    torch.nn class's), the fused conv the same: the fold's weights are checked, not what that
    forward computes with them (a weight-standardizing conv undoes the fold's scale), so no
    bound judges the fusion (MISTRUSTED). None for a torch.nn conv, or when _methods names the
    difference."""
    base, named = next(c for c in type(conv).__mro__ if c.__module__.startswith("torch.nn.modules")), _naming(conv)
    own = [where for name in _CALL_PATH for fn, where in [_resolved(conv, name, named)]
           if fn is not getattr(base, name, None)]
    if not own or _methods(conv, fused):
        return None
    return (f"the conv and the fused conv run {', '.join(own)}, not {named(base)}'s: their weights are a fold's "
            "or not, but what that code computes with them is not known (check the fold of a torch.nn conv)")


def _unseen_computation(conv: torch.nn.Module, bn: torch.nn.Module, fused: torch.nn.Module) -> str | None:
    """The sentence naming what conv + bn compute that their parameters do not say, which
    check_fold (no run) cannot see: a BatchNorm whose class runs its own forward (not its
    torch.nn class's) or with a forward set on the instance, and hooks of the conv or the
    BatchNorm that the fused module does not carry and that may change the output (not an
    observer: _returns_none). The fold of
    their parameters is checked, not that it computes what they do (MISTRUSTED); check_model,
    which runs the model, sees it. None when there is nothing of the kind."""
    named = _naming(bn)
    base = next(c for c in type(bn).__mro__ if c.__module__.startswith("torch.nn.modules"))
    out = [f"the BatchNorm runs {where}, not {named(base)}'s" for name in ("forward", "__call__")
           for fn, where in [_resolved(bn, name, named)] if fn is not getattr(base, name, None)]
    carried = {id(h) for m in fused.modules() for d in (m._forward_pre_hooks, m._forward_hooks) for h in d.values()}
    hooks = [(who, kind, h) for who, m in (("conv", conv), ("BatchNorm", bn))
             for kind, d in (("forward pre-hook", m._forward_pre_hooks), ("forward hook", m._forward_hooks))
             for h in d.values() if not (who == "conv" and kind == "forward pre-hook") and not _returns_none(h)]
    every = [h for _, _, h in hooks]
    # A BatchNorm's hook carried by the fused module sees the same output; a conv's forward hook
    # that may change its output runs before the BatchNorm in the model, after the fold in the
    # fused module: carried or not, not the same computation.
    out += [f"the {who} has a {kind} {_hook_name(h, every)} the fused module does not (it may change the output)"
            for who, kind, h in hooks if id(h) not in carried]
    out += [f"the conv's forward hook {_hook_name(h, every)} may change its output, which the model's BatchNorm then "
            "normalizes: in the fused module it runs after the fold" for who, kind, h in hooks
            if id(h) in carried and who == "conv" and kind == "forward hook"]
    if not out:
        return None
    return ("; ".join(out) + ": the fold of their parameters is checked, not that it computes what they do; "
            "check_model(model, fused_model, x) runs them")


def _returns_none(hook: Any) -> bool:
    """Whether a hook (a Python function, a bound method) returns None wherever it returns, read
    from its bytecode: an observer, which cannot replace its module's input or output (a hook's
    result replaces it only when not None; a change made in place is not seen). Any other
    callable: False (not known)."""
    import dis  # noqa: PLC0415

    code = getattr(getattr(hook, "__func__", hook), "__code__", None)
    if code is None or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE):
        return False
    ins = list(dis.get_instructions(code))
    for k, i in enumerate(ins):
        if i.opname == "RETURN_CONST" and i.argval is not None:
            return False
        if i.opname == "RETURN_VALUE" and not (k and ins[k - 1].opname == "LOAD_CONST" and ins[k - 1].argval is None):
            return False
    return True


def _hook_name(h: Any, hooks: list[Any]) -> str:
    """A hook as a sentence names it: its qualified name, with its module's when another of the
    `hooks` in question has the same one (two functions called hook, in two modules)."""
    def name(f: Any) -> str:
        return getattr(f, "__qualname__", None) or type(f).__qualname__
    clash = any(o is not h and name(o) == name(h) for o in hooks)
    return f"{getattr(h, '__module__', None) or type(h).__module__}.{name(h)}" if clash else name(h)


def _hooks(conv: torch.nn.Module, bn: torch.nn.Module, fused: torch.nn.Module, f: torch.nn.Module,
           after: list[torch.nn.Module]) -> list[str]:
    """The forward hooks and forward pre-hooks of the fused module (its conv, its Sequential, the
    modules after the conv) that change what it computes from conv + bn's. A pre-hook sees the
    conv's input: the fused module's must be the conv's, every one (fuse_conv_bn_eval's copy of
    the conv keeps them, fuse_modules moves them to its ConvReLU too). A forward hook sees the
    output: the fused module's may be the conv's (kept by the copy) or the BatchNorm's (moved by
    fuse_modules), the same callables; any other hook is the fused module's own computation.
    (A hook the fused module lacks that only observes is no change: forward hooks of the conv
    or BatchNorm are not required of it.)"""
    mods = [fused, f, *after]
    pre = {id(h): h for m in mods for h in m._forward_pre_hooks.values()}
    post = {id(h): (h, m) for m in mods for h in m._forward_hooks.values()}
    mine_pre = {id(h): h for h in conv._forward_pre_hooks.values()}
    allowed_post = {id(h) for m in (conv, bn) for h in m._forward_hooks.values()}
    own_pre = {id(h) for m in after for h in m._forward_pre_hooks.values()}  # after the conv: none is the conv's
    hooks = [h for m in (conv, bn, *mods) for d in (m._forward_pre_hooks, m._forward_hooks) for h in d.values()]
    out = [f"the fused module has a forward pre-hook {_hook_name(h, hooks)} the conv does not"
           for i, h in pre.items() if i not in mine_pre or i in own_pre]
    out += [f"the conv has a forward pre-hook {_hook_name(h, hooks)} the fused conv does not"
            for i, h in mine_pre.items() if i not in pre]
    return out + [f"the fused module has a forward hook {_hook_name(h, hooks)} the conv and BatchNorm do not"
                  for i, (h, _) in post.items() if i not in allowed_post]


def _parametrized(m: torch.nn.Module) -> dict[str, tuple[type, ...]]:
    """{tensor name: its parametrizations' classes} (torch.nn.utils.parametrize)."""
    plists = getattr(m, "parametrizations", None) if torch.nn.utils.parametrize.is_parametrized(m) else None
    return {k: tuple(type(p) for p in plist) for k, plist in (plists or {}).items()}


def _parametrizations(conv: torch.nn.Module, fused: torch.nn.Module) -> list[str]:
    """The fused conv's tensors parametrized otherwise than the conv's (torch.nn.utils.parametrize:
    its weight computed by a module at each call): by other parametrization classes (classes,
    not names: two of one name are told apart), or one of the two not parametrized."""
    mine, theirs = _parametrized(conv), _parametrized(fused)
    pool = [c for p in (mine, theirs) for classes in p.values() for c in classes]

    def said(p: dict[str, tuple[type, ...]], k: str) -> str:
        return f"parametrized by {', '.join(_class_name(c, *pool) for c in p[k])}" if k in p else "not parametrized"
    return [f"the fused conv's {k} is {said(theirs, k)} (torch.nn.utils.parametrize), the conv's is {said(mine, k)}"
            for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]


def _padding(conv: ConvModule) -> tuple[tuple[int, int], ...]:
    """The values added before and after each spatial dimension, as the conv's forward pads:
    for padding_mode 'zeros' its padding ('valid' none, 'same' d*(k-1) in all, the extra one
    after, as PyTorch pads it); for any other mode _reversed_padding_repeated_twice, which
    _conv_forward gives F.pad (padding is then not read: a value inconsistent with it is what
    the conv computes, _padded_by)."""
    if conv.padding_mode != "zeros" and not conv.transposed:  # a ConvTranspose pads with zeros or refuses to run
        return _padded_by(conv)
    return _declared_padding(conv)


def _declared_padding(conv: ConvModule) -> tuple[tuple[int, int], ...]:
    """What the conv's padding attribute means, per spatial dimension (before, after)."""
    if conv.padding == "valid":
        return tuple((0, 0) for _ in conv.kernel_size)
    if conv.padding == "same":
        total = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
        return tuple((t // 2, t - t // 2) for t in total)
    return tuple((int(p), int(p)) for p in conv.padding)


def _padded_by(conv: ConvModule) -> tuple[tuple[int, int], ...]:
    """F.pad's (before, after) per dimension from _reversed_padding_repeated_twice (its pairs
    are the last dimension's first), first spatial dimension first: a dimension it leaves out
    unpadded, one beyond the spatial ones (a channel) kept, so that it differs."""
    rp = [int(p) for p in conv._reversed_padding_repeated_twice]
    pairs = [(rp[i], rp[i + 1]) for i in range(0, len(rp) - 1, 2)][::-1]
    return tuple([(0, 0)] * (len(conv.kernel_size) - len(pairs)) + pairs)


def _geometry(conv: ConvModule) -> dict[str, Any]:
    """What defines a conv's computation besides its weight and bias values, in a form where two
    convs that compute the same compare equal: padding as the forward pads (_padding: 'same' is
    its numbers; for a padding_mode other than zeros, _reversed_padding_repeated_twice's), a
    dilation along a kernel of size 1 read as 1, padding_mode read only where it pads."""
    padding = _padding(conv)
    return {"kind": f"{'ConvTranspose' if conv.transposed else 'Conv'}{len(conv.kernel_size)}d",
            "in_channels": conv.in_channels, "out_channels": conv.out_channels, "groups": conv.groups,
            "kernel_size": tuple(conv.kernel_size), "stride": tuple(conv.stride), "padding": padding,
            "dilation": tuple(d if k > 1 else 1 for d, k in zip(conv.dilation, conv.kernel_size)),
            "padding_mode": conv.padding_mode if any(any(p) for p in padding) else "zeros",
            "output_padding": tuple(getattr(conv, "output_padding", ())) if conv.transposed else ()}


def _shown(conv: ConvModule, key: str) -> str:
    """An attribute as the user wrote it (padding 'same' with the numbers it means; padding that
    is not what the conv pads by, with _reversed_padding_repeated_twice, which it pads by)."""
    if key == "kind":
        return f"a {type(conv).__name__}"
    if key == "padding":
        pad, declared = _padding(conv), _declared_padding(conv)
        said = f"{conv.padding!r} {_numbers(declared)}" if isinstance(conv.padding, str) else _numbers(declared)
        if pad == declared:
            return said
        return (f"{said} but _reversed_padding_repeated_twice {tuple(conv._reversed_padding_repeated_twice)}, "
                f"by which padding_mode {conv.padding_mode!r} pads: {_numbers(pad)}")
    value = getattr(conv, key)
    return repr(value) if isinstance(value, str) else f"{value}"


def _numbers(pad: tuple[tuple[int, int], ...]) -> str:
    """Padding as PyTorch writes it: one number per dimension when before and after are equal."""
    return f"{tuple(a for a, _ in pad) if all(a == b for a, b in pad) else pad}"


def _fold_mismatches(conv: ConvModule, bn: torch.nn.Module, fused: torch.nn.Module,
                     relu_after: bool | None = None) -> tuple[list[str], str | None]:
    """How `fused` (a conv, or a fuser's Sequential around one: _fused_parts) computes something
    else than a fold of conv + bn can: (one sentence each: the geometry it changed, "the fused
    conv has stride (2, 2), the conv (1, 1)", then the rest of its computation, _computation,
    relu_after: whether the model applies a ReLU to bn's output, None if not known;
    the dtype mismatch, or None). Another computation is UNEXPECTED whatever the weights; a
    fused conv of another dtype than the conv's is a fold no recipe replays (each folds in the
    modules' dtype), so no bound judges it (MISTRUSTED, named as such). The sentences quote names
    the user's code chose (a class, a hook function): shown through the one neutraliser of names
    (_core.neutralised: control and bidi characters escaped), as every report shows names."""
    f = _fused_parts(fused)[0]
    mine, theirs = _geometry(conv), _geometry(f)  # type: ignore[arg-type]  # a conv: the callers checked
    words = {"kind": "is", "padding_mode": "has padding_mode"}
    geometry = [f"the fused conv {words.get(k, 'has ' + k.replace('_', ' '))} {_shown(f, k)}, "  # type: ignore[arg-type]
                f"the conv {_shown(conv, k)}" for k in mine if mine[k] != theirs[k]
                and not (k == "padding_mode" and f.padding_mode == conv.padding_mode)]  # one pads nothing: said
    unknown = [t for t in (_dtype_mismatch(conv, bn, f), _own_forward(conv, f)) if t]  # type: ignore[arg-type]
    said = [_core.neutralised(s) for s in geometry + _computation(conv, bn, fused, relu_after)]
    return said, _core.neutralised("; ".join(unknown)) if unknown else None


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


def _fused_conv_verdict(judged: Verdict | None, geometry: list[str], *mistrusted: str | None) -> Verdict:
    """A fused conv's verdict by the core's per-layer judge (of_layer): `judged` what its
    comparisons found (None: nothing compared); another geometry is another computation
    (not_the_layer: UNEXPECTED whatever else); a reason its fold cannot be judged (a dtype no
    recipe folds in, an operation a fuser folded into it besides its BatchNorm) leaves it not
    judged (unmodelled surely: MISTRUSTED whatever its comparisons show, as they are not of
    a fold any recipe models)."""
    return _core.of_layer(judged, not_the_layer=bool(geometry),
                          unmodelled="surely" if any(mistrusted) else None)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class FoldResult(Result):
    """check_fold's result: the folded weights (explain: the recipes that reproduce them bit for
    bit, residuals in ULP) and the weights with the bias (each recipe's bound). The verdict is
    the worse of the two; when it is not EXPECTED, .diagnosis is the core's cause (the slip the
    weights are, the channels that changed, or the bias), and the report's first line says it.

    .geometry: how the fused module computes other than conv + BatchNorm (its conv's stride,
    padding, padding_mode, dilation, groups, ...; a module after the conv no fuser adds; a
    forward its class overrides; hooks; a parametrization: _fold_mismatches; one sentence each,
    the verdict UNEXPECTED whatever the weights); .dtype_mismatch: the sentence naming a fold no
    bound judges (MISTRUSTED): a fused conv of another dtype than the conv's (no recipe folds in
    one dtype and casts to another), a conv whose class runs its own forward. Either comes first
    in the reason. .notes: what the check took on trust, one sentence each (a fused ReLU taken to
    follow the BatchNorm: _relu_note); a pass's reason says them."""

    def __init__(self, weights: ExplainResult, parameters: FoldCheckResult,
                 diagnose: Callable[[], Any] | None = None, geometry: list[str] | None = None,
                 dtype_mismatch: str | None = None, notes: list[str] | None = None) -> None:
        super().__init__(parameters._core)
        self.weights = weights
        self.parameters = parameters
        self._diagnose = diagnose
        self._diagnosis: Any = None
        self.geometry = list(geometry or [])
        self.dtype_mismatch = dtype_mismatch
        self.notes = list(notes or [])

    @property
    def verdict(self) -> Verdict:
        return _fused_conv_verdict(_core.worst(self.weights.verdict, self.parameters.verdict), self.geometry,
                                   self.dtype_mismatch)

    @property
    def mismatch(self) -> str | None:
        """The sentence saying how the fused module is not conv + BatchNorm folded (.geometry, the
        dtype), or None."""
        parts = self.geometry + ([self.dtype_mismatch] if self.dtype_mismatch else [])
        if not parts:
            return None
        return ("the fused module computes other than conv + BatchNorm: " if self.geometry else "") + "; ".join(parts)

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
    def weights_cause(self) -> str | None:
        """The core's cause of weights that are not a fold (None when they are): explain's
        reasoning when a recipe reproduces them bit for bit (nothing changed after the fold: the
        recipe's own arithmetic is what failed, an intermediate that overflowed float16), else
        the weight-level diagnosis's (the slip every weight fits, the channels that changed)."""
        if self.weights.passed:
            return None
        reasoning = self.weights.to_dict().get("reasoning") or []
        if self.bit_exact_recipes and reasoning:
            return " ".join(reasoning)
        return self.diagnosis.weights.cause

    @property
    def reason(self) -> str | None:
        if self.passed:
            return "; ".join([f"the weights and bias are a fold within {self.recipe}'s bound"
                              f"{' (its fold bit for bit)' if self.bit_exact_recipes else ''}", *self.notes])
        if self.mismatch:
            return self.mismatch
        d = self.diagnosis
        if d is None:
            return None
        if not self.weights.passed:
            return f"the weights are not a fold of the conv and BatchNorm: {self.weights_cause}"
        return f"the weights are, the bias is not: {d.bias.cause}"

    def answer(self) -> str:
        """The verdict with the cause above (the weights and the bias together), not the answer
        of the parameters' check alone that the core gives for fold_check."""
        return f"verdict: {self.verdict}" + (f": {self.reason}" if self.reason else "")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "geometry": self.geometry, "dtype_mismatch": self.dtype_mismatch,
                "notes": self.notes, "weights": self.weights.to_dict(), "fold": self.parameters.to_dict()}

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
        lines = ([f"mismatch: {self.mismatch}"] if self.mismatch else []) + [f"note: {n}" for n in self.notes]
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
        geometry, _ = _fold_mismatches(conv, bn, fused)  # both convs (_conv_arrays)
        raise ValueError(f"fused: weight shape {tuple(fw.shape)}, the conv's is {tuple(w.shape)}"
                         f"{': ' + '; '.join(geometry) if geometry else ''}")
    return dict(weight=w, bias=b, observed_weight=fw, observed_bias=fb, **_bn_arrays(bn))


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
    .dtype_mismatch). So is anything else the fused module computes that conv + BN does not: a
    module after the conv (only Identity and fuse_modules' conv + ReLU are a fuser's: its
    ConvReLU1d/2d/3d or a Sequential(conv, nn.ReLU), whose conv is checked), a forward or
    _conv_forward the conv's class does not run, hooks the conv and BatchNorm do not have, a
    parametrization of its weight the conv does not have (named in .geometry). Whether a ReLU
    follows bn in the original is not known from conv and bn: a fused module's one ReLU is taken
    to follow it (fuse_modules' conv + BatchNorm + ReLU), said in .notes and the answer;
    check_model, which sees the model, holds it to whether the model applies one."""
    a = _fold_arrays(conv, bn, _fused_conv(fused))
    geometry, dtype_mismatch = _fold_mismatches(conv, bn, fused)  # conv: checked above
    unseen = _unseen_computation(conv, bn, fused)
    if unseen:
        dtype_mismatch = "; ".join(filter(None, [dtype_mismatch, _core.neutralised(unseen)]))
    notes = [_core.neutralised(n) for n in [_relu_note(fused)] if n]
    p = {k: a[k] for k in ("gamma", "beta", "mean", "var", "eps")}
    with _in_module_words(_FOLD_WORDS):
        weights = _commands.explain(a["weight"], a["observed_weight"], precision=precision, threads=threads, **p)
        parameters = _commands.fold_check(a["weight"], a["bias"], a["observed_weight"], a["observed_bias"],
                                          precision=precision, threads=threads, **p)

    def diagnosis() -> Any:
        with _in_module_words(_FOLD_WORDS):
            return _commands.diagnose_fold(weights, **a)
    return FoldResult(weights, parameters, diagnosis, geometry, dtype_mismatch, notes)


def diagnose(bn: torch.nn.Module, x: torch.Tensor, observed: torch.Tensor, *, conv: ConvModule | None = None,
             precision: int = _commands.DIAGNOSE["precision"],
             threads: int = _commands.DIAGNOSE["threads"]) -> DiagnoseResult:
    """Why does `observed` differ from what `bn` (eval mode: its running statistics), after
    `conv` if given, computes on `x`? The layer as given, then the common bugs: training-mode
    batch statistics, eps mismatch, variance read as std, missing sqrt, gamma/beta swapped,
    NHWC read as NCHW, ... Returns a DiagnoseResult (.best, .fix, .hypotheses).
    x, observed: tensors, numpy arrays or lists (a list rounded to the modules' dtype, as the
    command line rounds values typed as text).
    conv: a Conv2d of any groups with one stride and one dilation for both axes and the same
    zero padding on all four sides: numbers, 'valid', or 'same' where PyTorch pads so (an odd
    dilated kernel extent: (k-1)*d/2 a side); another is refused, naming its attribute.
    The arithmetic judged is observed's dtype, except that an observed wider than the layer's
    dtype (the conv weight's, else the BatchNorm's) whose every value is a value of the layer's
    dtype is judged in the layer's: a float32 layer's output given as float64 (y.double(), a
    float64 numpy array of it) is its float32 output. Values the layer's dtype cannot hold come
    from a wider computation (the modules run in float64) and are judged in observed's dtype."""
    p = _bn_arrays(bn)
    kw: dict[str, Any] = {}
    if conv is not None:
        w, b = _conv_arrays(conv, "conv")
        kw = dict(weight=w, bias=b, **_output_geometry(conv, "diagnose"))
    x, observed = _output_arrays(bn, conv, x=x, observed=observed)
    problem = _output_shape_problem(x, observed, conv)
    if problem:
        raise ValueError(f"diagnose: {problem}")
    observed = _in_layer_dtype(observed, _layer_dtype(bn, conv))
    with _in_module_words(_DIAGNOSE_WORDS):
        return _commands.diagnose(x, observed, precision=precision, threads=threads, **kw, **p)


# The convs the outputs checks (diagnose, assert_fold_close on outputs) model, and by caller
# what checks another conv: its fold, on the weights.
_OUTPUT_CONVS = ("a Conv2d (any groups) with one stride and one dilation for both axes and the same zero padding on "
                 "all four sides (numbers, 'valid', or 'same' with an odd dilated kernel extent)")
_ON_THE_WEIGHTS = {"diagnose": "check_fold(conv, bn, fused_conv) checks its fold on the weights",
                   "assert_fold_close": "assert_fold_close(fused_conv, (conv, bn)) checks its fold on the weights "
                                        "(foldcheck.torch.check_fold)"}


def _output_geometry(conv: ConvModule, caller: str) -> dict[str, int]:
    """conv's stride, padding and dilation as the core's diagnose takes them (one number each;
    it reads the groups from the weight's shape), or a refusal naming `caller` (diagnose,
    assert_fold_close), the attribute and its value, the convs modelled and what checks this one
    instead. Padding is resolved as PyTorch pads ('same': (k-1)*d split, the odd one after); a
    dilation along a kernel of size 1 changes nothing and is not compared."""
    def refuse(what: str) -> ValueError:
        said = "diagnose" if caller == "diagnose" else f"{caller} on outputs"
        return ValueError(_core.neutralised(f"{said}: {what}; outputs are checked for {_OUTPUT_CONVS}. "
                                            f"{_ON_THE_WEIGHTS[caller]}"))

    if len(conv.kernel_size) != 2:
        raise refuse(f"conv is a {type(conv).__name__}, not a Conv2d (NCHW)")
    pad = _padding(conv)
    if conv.padding_mode != "zeros" and any(any(p) for p in pad):
        raise refuse(f"conv.padding_mode is {conv.padding_mode!r}, not zeros")
    if len(set(conv.stride)) > 1:
        raise refuse(f"conv.stride is {tuple(conv.stride)}: the axes' strides differ")
    dilations = {d for d, k in zip(conv.dilation, conv.kernel_size) if k > 1}
    if len(dilations) > 1:
        raise refuse(f"conv.dilation is {tuple(conv.dilation)} (kernel_size "
                     f"{tuple(conv.kernel_size)}): the axes' dilations differ")
    if any(a != b for a, b in pad):
        raise refuse(f"conv.padding is {conv.padding!r}, which PyTorch pads as {pad} (before, after) per axis: "
                     "more after than before (an even dilated kernel extent)")
    if len({a for a, _ in pad}) > 1:
        raise refuse(f"conv.padding is {_shown(conv, 'padding')}: the axes' paddings differ")
    return dict(stride=int(conv.stride[0]), padding=int(pad[0][0]), dilation=int(next(iter(dilations), 1)))


def _layer_dtype(bn: torch.nn.Module, conv: ConvModule | None) -> str:
    """The dtype conv + BatchNorm computes in: the conv weight's, else the BatchNorm's."""
    return _name((conv.weight if conv is not None else bn_parameters(bn)["mean"]).dtype)


def _in_layer_dtype(observed: Any, dtype: str) -> Any:
    """observed (an array) in the layer's dtype when it is wider and every value is a value of
    the layer's dtype (the layer's output widened: nothing is lost); else as it is."""
    import numpy as np  # noqa: PLC0415

    layer = _arrays.numpy_dtype(dtype)
    if observed.dtype.kind != "f" or observed.dtype.itemsize <= layer.itemsize:
        return observed
    with np.errstate(over="ignore"):  # beyond the layer's range: inf, not equal, kept as it is
        narrowed = observed.astype(layer)
    return narrowed if np.array_equal(narrowed.astype(observed.dtype), observed, equal_nan=True) else observed


def _output_arrays(bn: torch.nn.Module, conv: ConvModule | None, **values: Any) -> list[Any]:
    """An input and outputs of conv + bn as the arrays the core reads, each refused by its
    argument's name when no array holds it (_arrays.as_array: a nested tensor, a float8 one, an
    array of strings); a list is rounded to the modules' dtype (the conv's, else the BatchNorm's)."""
    if conv is not None and not isinstance(conv, _CONVS):
        raise TypeError(f"conv: expected a torch.nn.Conv1d/2d/3d (channels on axis 0), got {type(conv).__name__}")
    return [_arrays.as_array(v, name, list_dtype=_layer_dtype(bn, conv)) for name, v in values.items()]


def _output_shape_problem(x: Any, observed: Any, conv: ConvModule | None, what: str = "observed",
                          x_what: str = "x") -> str | None:
    """Why `observed` cannot be the output of `conv` (if given) + BatchNorm on `x`, by its shape:
    the shapes, the conv named, and which one-attribute change of the conv's geometry (stride,
    padding, dilation: a fused conv that lost or changed one) would give the observed shape."""
    if conv is None:
        return None  # the core's own refusal names the shapes of a BatchNorm alone
    got = tuple(observed.shape)
    want = _conv_output_shape(x.shape, conv.out_channels, conv.kernel_size, conv.stride, _padding(conv), conv.dilation)
    if got == want:
        return None
    text = f"{what} has shape {got}; the conv ({conv}) gives {want} on {x_what} of shape {tuple(x.shape)}"
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

class _LayerTracer(torch.fx.Tracer):
    """fx's tracer with every conv and BatchNorm a module call (a leaf), a subclass of the user's
    too: fx's default traces through a class defined outside torch.nn (its forward inlined to
    F.conv2d), so a conv subclass was no conv to pair, and a fused conv of another forward was
    never compared."""

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, (*_CONVS, *_BNS)) or super().is_leaf_module(m, module_qualified_name)


def _traced(model: torch.nn.Module) -> torch.fx.GraphModule:
    """model traced by fx, its convs and BatchNorms module calls (_LayerTracer)."""
    return torch.fx.GraphModule(model, _LayerTracer().trace(model))


def conv_bn_pairs(model: torch.nn.Module, example: torch.Tensor | None = None) -> list[list[str]]:
    """The [conv, bn] module-name pairs of a model where the BatchNorm takes the conv's output,
    nothing else does, and each module is called once (what fuse_modules may fuse). Found by
    torch.fx tracing; a model fx cannot trace needs `example` (an input), and its pairs are then
    found by running it once, counting every use of each conv's output."""
    try:
        gm = _traced(model)
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


# A fused conv's mismatches in check_model: (its geometry's sentences: another computation,
# UNEXPECTED; the reasons its fold could not be judged: MISTRUSTED, one sentence each).
Mismatch = tuple[list[str], list[str]]


class _InUsersWords(AccuracyDiffResult):
    """accuracy_diff's result as check_model gives it: every text of the core's (its answer,
    reports, the JSON's strings) with what `said` pairs (the core's words, the user's) said in
    the user's words: the files check_model wrote (temporary, gone after the call) as what they
    hold (the model by its class, the fused model, x), a sentence check_model says otherwise.
    Texts for people show the user's words through the neutraliser, the JSON exact."""

    def __init__(self, diff: AccuracyDiffResult, said: list[tuple[str, str]]) -> None:
        super().__init__(diff._core)
        self._said = said

    def in_words(self, text: str, exact: bool = False) -> str:
        for core, users in self._said:
            text = text.replace(core, users if exact else _core.neutralised(users))
            for shown in _SHOWN:  # as a page shows it: neutralised, then escaped for Markdown or HTML
                text = text.replace(shown(_core.neutralised(core)), shown(_core.neutralised(users)))
        return text

    def to_dict(self) -> dict[str, Any]:
        if self._dict is None:
            import json  # noqa: PLC0415

            self._dict = _each_string(json.loads(self._core.to_json(-1)), lambda t: self.in_words(t, exact=True))
        return self._dict

    def to_json(self, indent: int | None = None) -> str:
        import json  # noqa: PLC0415

        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, separators=(",", ":") if indent is None
                          else None)

    def answer(self) -> str:
        return self.in_words(super().answer())

    def details(self) -> str:
        return self.in_words(super().details())

    def report(self, format: str = "text") -> str:  # noqa: A002
        return self.to_json(2) if format == "json" else self.in_words(super().report(format))


# How the core's pages show a text: as it is, escaped for Markdown (&, <, >), escaped for HTML.
_SHOWN: tuple[Callable[[str], str], ...] = (
    lambda t: t, lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
    lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    .replace("'", "&#39;"))


def _each_string(value: Any, change: Callable[[str], str]) -> Any:
    """A parsed JSON value with `change` applied to each string in it."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _each_string(v, change) for k, v in value.items()}
    return [_each_string(v, change) for v in value] if isinstance(value, list) else value


_EXPORTED = "check_model exported both models with their BatchNorms kept (foldcheck.torch.export_onnx)."


class ModelCheck(Result):
    """check_model's result: accuracy_diff's, with each layer named by its PyTorch module. Its
    text report is answer first (the core's answer line of accuracy_diff, or check_model's own:
    a fused conv that computes otherwise, why nothing was compared, what a weights-only check
    checked), then its layers. No text of it names a file check_model wrote: the model is named
    by its class, the fused model and x as such (_InUsersWords).

    .layers: [{"module", "verdict", "worst_channel", "closest_recipe", "onnx_node", ...}];
    .unexpected: the layers that are not EXPECTED; .accuracy_diff: the full result (in the
    user's words as well).
    .mismatches: {conv module: sentence} for each fused conv that computes another convolution
    than the model's (geometry: UNEXPECTED) or whose fold could not be judged (another dtype, an
    operation its fuser folded into it besides its BatchNorm: MISTRUSTED); each joins its
    layer's verdict and the whole's (through the core), and the answer names the first."""

    def __init__(self, diff: AccuracyDiffResult, names: dict[str, str], fuser: str | None,
                 mismatches: dict[str, Mismatch] | None = None, *, model_name: str | None = None,
                 weights_only: bool = False, no_pairs: str | None = None, notes: list[str] | None = None) -> None:
        super().__init__(diff._core)
        self._diff = diff
        self._words: _InUsersWords | None = None
        self.fuser = fuser
        self._names = names
        self._mismatches = dict(mismatches or {})
        # Each mismatch's verdict alone (nothing of it compared): what it adds to the whole, and
        # whether it leads the answer.
        self._alone = {m: _fused_conv_verdict(None, g, *r) for m, (g, r) in self._mismatches.items()}
        self.model_name = model_name  # the user's model, as the pages name it (its class)
        self.weights_only = weights_only  # no output compared: the answer then says what was
        self._no_pairs = no_pairs  # why the model has no conv + BatchNorm pair
        self.notes = list(notes or [])  # what was not checked, and why

    @property
    def mismatches(self) -> dict[str, str]:
        return {m: "; ".join(g + r) for m, (g, r) in self._mismatches.items()}

    @property
    def verdict(self) -> Verdict:
        # The core judged each layer it was given as unmodelled (check_model); a fused conv of
        # another geometry, or one the core did not list, joins by the per-layer judge.
        listed = {self._names.get(x["name"], x["name"]) for x in self.accuracy_diff.layers}
        return _core.tally([self._core.verdict, *[self._alone[m] for m, (g, _) in self._mismatches.items()
                                                  if g or m not in listed]])

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def accuracy_diff(self) -> AccuracyDiffResult:
        """accuracy_diff's result in the user's words (_InUsersWords)."""
        if self._words is None:
            self._words = _InUsersWords(self._diff, self._said())
        return self._words

    def _said(self) -> list[tuple[str, str]]:
        """[(the core's words, the user's)]: the core's reasoning where check_model gives its own
        reason (_own_reason; the core's further sentences, advice on exporting, said as what
        check_model did), then the files check_model wrote as what they hold."""
        d, own = self._diff.to_dict(), self._own_reason()
        core = self._diff.reasoning or [self._diff.answer().partition(f"verdict: {self._core.verdict}: ")[2]]
        e2e = d.get("end_to_end") or {}
        files = [((d.get("model") or {}).get("path"), self.model_name or "the model"),
                 ((d.get("observed") or {}).get("path"), "the fused model"), (e2e.get("input"), "x"),
                 ((e2e.get("observed_output") or {}).get("path"), "the fused model's output on x")]
        reasons = [(core[0], own), *[(c, _EXPORTED) for c in core[1:]]] if own and core[0] else []
        # The core's sentences name a layer by its ONNX node ("Layer /c1/Conv is UNEXPECTED",
        # "closest: layer /c1/Conv, its ..."): said by the module, as the table names it.
        layers = [(f"{w} {node}{end}", f"{w} {module}{end}") for node, module in self._names.items() if node != module
                  for w, end in (("Layer", " is "), ("layer", ", "), ("layer", " is "))]
        return reasons + layers + [(f, w) for f, w in files if isinstance(f, str) and f]

    def _own_reason(self) -> str | None:
        """check_model's reason in place of the core's: why nothing was compared (the core's
        names a file and ONNX export's defaults, which check_model did not use); else None (the
        core's names what it judged: weights only, the folded parameters alone)."""
        return None if self._diff.layers else self._no_pairs

    def answer(self) -> str:
        """The core's answer line of accuracy_diff in the user's words (_InUsersWords, the reason
        check_model gives in place of the core's: _own_reason), or first the fused convs that
        compute another convolution (or in another dtype) than the model's, when one of them is
        the verdict's cause (a layer found wrong leads over one that could not be judged, which
        the answer then counts)."""
        verdict = self.verdict
        leading = [m for m, v in self._alone.items() if v == verdict]
        if not leading:
            own = self._own_reason()
            core = f"verdict: {verdict}: {own}" if own else self.accuracy_diff.answer()
            more = len(self._mismatches)
            return _core.neutralised(core + (f" (and {more} layer(s) not judged, listed below)" if more else ""))
        module, more = leading[0], len(self._mismatches) - 1
        return _core.neutralised(f"verdict: {verdict}: {module}: {self.mismatches[module]}"  # one line
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
        for module, (geometry, reasons) in self._mismatches.items():
            x = by_module.get(module)
            if x is None:
                x = {"module": module, "verdict": self._alone[module],
                     "worst_channel": None, "closest_recipe": None, "worst_ratio": None, "onnx_node": None,
                     "observed_node": None, "note": None}
                layers.append(x)
            x["verdict"] = _fused_conv_verdict(x["verdict"], geometry, *reasons)
            said = x["note"] or ""  # the reasons the core was given (unmodelled) are in its note already
            x["note"] = "; ".join(filter(None, [*geometry, *(r for r in reasons if r not in said), x["note"]]))
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

    def details(self) -> str:
        return self.accuracy_diff.details()

    def report(self, format: str = "text") -> str:  # noqa: A002
        if format == "json":
            return self.to_json(2)
        if format != "text":  # the core's; a mismatch (which it did not see) said first in Markdown
            core = self.accuracy_diff.report(format)
            return f"**{self.answer()}**\n\n{core}" if self._mismatches and format == "markdown" else core
        # Answer first, as every result: the core's answer line of accuracy_diff's result (the
        # verdict and its reason, reports/run_answer.hpp), then what was checked.
        rows = [self.answer(), f"  {len(self.layers)} conv+BN layers{', fused by ' + self.fuser if self.fuser else ''}"]
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

    def _repr_extra(self) -> str:
        bad = self.unexpected
        return f" layers: {len(self.layers)}" + (f", first bad: {bad[0]['module']}" if bad else "")


class _FusedConv(NamedTuple):
    """One conv of a fused model as check_model reads it, in the order forward runs it: its
    weight and bias values; `geometry`: a conv module computing what it computes (a fused
    module's own), the graph node's arguments (stride, padding, dilation, groups, ...: a
    stand-in conv is built from them against the model's, _stand_in), or None when they could
    not be read; `absorbed`: the operations after it the fuser folded into it, in order
    ("batch_norm" for a whole BatchNorm, "part of a BatchNorm", "mul", "add", ...), None when
    that could not be told; `bn_after`: whether the fused model still applies a BatchNorm after
    it (not folded; a model fused before it was frozen or compiled has none left to fold)."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    geometry: torch.nn.Module | dict[str, Any] | None
    absorbed: list[str] | None
    bn_after: bool = False


class _Fused(NamedTuple):
    """What check_model exports for the fused model, and what it found reading it: `module` (the
    fused nn.Module itself, or a copy of the model carrying its folds), `fuser` (the fuser read,
    or None), `mismatches` ({conv module: Mismatch}) and `changed` (the convs whose fused conv
    computes another convolution or in another dtype: the fused model's outputs are then not
    the model's computation, and are not compared); `notes`: what was taken on trust."""
    module: torch.nn.Module
    fuser: str | None
    mismatches: dict[str, Mismatch]
    changed: list[str]
    notes: tuple[str, ...] = ()


def _fused_module(model: torch.nn.Module, fused: Any, x: torch.Tensor) -> _Fused:
    """The fused model for export, conv by conv against the model: `fused` itself when its
    convs have the model's module names (fuse_modules, fuse_conv_bn_eval, an fx GraphModule);
    else (a frozen ScriptModule, a compiled model, a module of other names) a copy of `model`
    carrying the folds read from it, paired with the model's convs in forward order (_rebuilt)."""
    if isinstance(fused, torch.jit.ScriptModule):
        convs, fuser = _frozen_convs(fused, model, x), "torch.jit.freeze"
    elif not isinstance(fused, torch.nn.Module) or hasattr(fused, "_orig_mod"):
        convs, fuser = _compiled_convs(fused, x), "torch.compile"
    elif _names_pair(model, fused):
        mismatches, notes = _pair_mismatches(model, fused, x)
        return _Fused(fused, None, mismatches, list(mismatches), notes)  # each a geometry or dtype of its own
    else:
        convs, fuser = _module_convs(model, fused, x), None
    return _rebuilt(model, convs, fuser, x)


def check_model(model: torch.nn.Module, fused: Any, x: torch.Tensor, *, weights_only: bool = _AD["weights_only"],
                output_samples: int = _AD["output_samples"], confidence: float = _AD["confidence"],
                precision: int = _AD["precision"], threads: int = _AD["threads"],
                progress: Callable[[str], object] | None = None,
                keep_dir: str | os.PathLike[str] | None = None, arithmetic: str = _AD["arithmetic"]) -> ModelCheck:
    """Is `fused` a correct fold of every conv + BatchNorm of `model`, on input `x`?

    fused: the model after a fuser (an nn.Module, an fx GraphModule, a torch.jit.freeze'd
    ScriptModule, or a torch.compile'd model with inductor freezing). Both are exported with
    their BatchNorms kept and checked by accuracy_diff: every folded weight and bias against the
    exact fold and each recipe's bound, and (unless weights_only) every layer on its real input
    and the outputs end to end. Returns a ModelCheck whose layers carry module names
    (`layer2.0.conv1`) and, for a wrong fold, the worst channel. A fused conv of another
    geometry than the model's conv is UNEXPECTED, one of another dtype or into which the fuser
    folded more than its BatchNorm (torch.jit.freeze's and inductor's conv-add/sub/mul/div
    folding) MISTRUSTED, each named by module; so is a fused conv + ReLU where the model applies
    no ReLU to the BatchNorm's output (UNEXPECTED). A fused module whose module names are not the
    model's is paired with it conv by conv in forward order. model: the eager module (a
    ScriptModule is refused, as is a fused one not frozen, saying what to pass). A model whose
    convs pad otherwise than with zeros (padding_mode reflect, replicate, circular) has outputs
    foldcheck does not run: refused up front by module unless weights_only, which checks its
    folds. Its texts name the model by its class, never the files it writes. keep_dir: keep the
    ONNX files. arithmetic: "float32", or "bf16" / "fp16": the fused model's output is computed
    under torch.autocast("cpu", dtype=torch.bfloat16 / torch.float16) (operands converted, every
    activation stored in that type) and judged end to end with a bound that models it."""
    if arithmetic not in _AUTOCAST:
        raise ValueError(f"check_model: arithmetic {arithmetic!r}: expected one of {', '.join(map(repr, _AUTOCAST))}")
    _commands.checked_progress(progress)
    _refuse_arguments(model, fused, x)
    if model is fused:
        raise ValueError("check_model: the fused model is the model itself (fuse a copy: copy.deepcopy(model))")
    training = ("the model was in training mode: it was checked as in eval mode (running statistics, the computation "
                "a fold reproduces; in training mode its BatchNorms use each batch's statistics, which no fold "
                "reproduces) and left as it was") if model.training else None
    if training:
        warnings.warn("check_model: " + training, stacklevel=2)
    with tempfile.TemporaryDirectory(prefix="foldcheck-torch-") as tmp:
        d = keep_dir or tmp
        try:  # keep_dir: a directory to make or reuse; a file, or a place no directory can be, refused by name
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise ValueError(f"check_model: keep_dir {os.fspath(d)!r} is not a directory it can make or use "
                             f"({e.strerror})") from None
        _refuse_other_ranks(model)
        name = _class_name(type(model))
        _refuse_padding_not_run(model, name, weights_only)
        with _framework_errors("model", x, d):
            original = export_onnx(_zero_padded(model) if weights_only else model, x, os.path.join(d, "original.onnx"))
        with _framework_errors("fused", x, d):
            f = _fused_module(model, fused, x)
        weights_only, fused_module, note = _as_the_models(model, f, weights_only)
        with _runs_on_x(model, fused_module, x):
            observed = export_onnx(_zero_padded(fused_module) if weights_only else fused_module, x,
                                   os.path.join(d, "fused.onnx"))
        with _framework_errors("fused", x, d):
            y, note = (None, note or "weights only: the fused model's outputs were not compared") if weights_only \
                else _output_of(fused, x, _AUTOCAST[arithmetic])
        with _in_users_words(os.fspath(d), name):
            diff = _commands.accuracy_diff(original, observed=observed, input=_npy_input(x), observed_output=y,
                                           arithmetic=arithmetic,
                                           weights_only=weights_only, output_samples=output_samples,
                                           confidence=confidence, precision=precision, threads=threads,
                                           progress=progress, unmodelled=_unmodelled_layers(original, f.mismatches))
        no_pairs = _why_no_pairs(model, fused_module, x, name) if not diff.layers and not f.mismatches else None
        return ModelCheck(diff, _module_names(original), f.fuser, f.mismatches, model_name=name,
                          weights_only=weights_only, no_pairs=no_pairs,
                          notes=[n for n in (training, note, *f.notes) if n])


def _unmodelled_layers(onnx_path: str, mismatches: dict[str, Mismatch]) -> dict[str, str]:
    """{ONNX layer name: why} for each fused conv whose fold cannot be judged (a dtype no recipe
    folds in, an op its fuser folded into it besides its BatchNorm): the core judges those
    layers (unmodelled: MISTRUSTED, whatever the stand-in's comparisons show), not this module."""
    node_of = {module: node for node, module in _module_names(onnx_path).items()}
    return {node_of[m]: "; ".join(reasons) for m, (_, reasons) in mismatches.items() if reasons and m in node_of}


def _refuse_arguments(model: Any, fused: Any, x: Any) -> None:
    """check_model's arguments by kind, before anything runs: `model` an nn.Module, `fused` a
    fused model (an nn.Module, a frozen ScriptModule, a compiled model or function: callable),
    `x` a floating-point torch.Tensor; anything else a TypeError naming the argument and what
    it is."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"check_model: model is {_what(model)}: expected the original torch.nn.Module, with its "
                        "BatchNorms")
    if not callable(fused):  # an nn.Module, or a compiled model or function
        hint = " (a state_dict is not a model: load it into a copy of the model)" if isinstance(fused, dict) else ""
        raise TypeError(f"check_model: fused is {_what(fused)}{hint}: expected the fused model (a torch.nn.Module, a "
                        "torch.jit.freeze'd ScriptModule or a torch.compile'd model)")
    _refuse_scripted(model, fused)
    if not isinstance(x, torch.Tensor):
        hint = " (torch.from_numpy(x))" if type(x).__module__ == "numpy" else ""
        raise TypeError(f"check_model: x is {_what(x)}: expected a torch.Tensor, the model's input{hint}")
    if not x.is_floating_point():
        raise TypeError(f"check_model: x is a tensor of {_name(x.dtype)}, shape {tuple(x.shape)}: expected a "
                        "floating-point input (x.float())")


def _refuse_scripted(model: Any, fused: Any) -> None:
    """The ScriptModules check_model cannot read, refused by argument, saying what to pass: a
    scripted or traced `model` (its convs and BatchNorms are compiled modules, no torch.nn ones
    to pair and compare; a frozen one has its BatchNorms folded already) and a `fused` one not
    frozen (its convs are compiled modules, its folds not in its graph). A frozen `fused` is read
    from its graph (_frozen_convs)."""
    if isinstance(model, torch.jit.ScriptModule):
        what = ("a frozen ScriptModule (torch.jit.freeze): its BatchNorms are folded already" if _frozen(model) else
                "a ScriptModule (torch.jit.script or trace): its convs and BatchNorms are compiled modules, not "
                "torch.nn ones check_model can pair and compare")
        raise TypeError(f"check_model: model is {what}; pass the eager torch.nn.Module it was made from (and a "
                        "frozen one as fused)")
    if isinstance(fused, torch.jit.ScriptModule) and not _frozen(fused):
        raise TypeError("check_model: fused is a ScriptModule that is not frozen (torch.jit.script or trace alone): "
                        "its convs are compiled modules whose folds check_model does not read; pass the eager fused "
                        "model, or torch.jit.freeze(scripted.eval()) (freezing folds each conv + BatchNorm into "
                        "constants of its graph, which check_model reads)")


def _frozen(module: torch.jit.ScriptModule) -> bool:
    """Whether a ScriptModule is torch.jit.freeze'd: its parameters are constants of its graph,
    none left as attributes."""
    return next(module.parameters(), None) is None


def _what(obj: Any) -> str:
    """What an argument is, for a refusal: `None`, `a dict`, `a numpy.ndarray of shape (2, 3)`."""
    if obj is None:
        return "None"
    kind = type(obj)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"
    shape = getattr(obj, "shape", None)
    return f"a {name}" + (f" of shape {tuple(shape)}" if isinstance(shape, tuple) else "")


@contextlib.contextmanager
def _framework_errors(what: str, x: torch.Tensor, d: str | os.PathLike[str]) -> Iterator[None]:
    """A failure while `what` ("model" or "fused") is exported, frozen-graph read, compiled or
    run on x, said as check_model's ValueError naming it and x: the framework's first line
    without its exception type or check_model's temporary directory; check_model's own refusals
    (prefixed "check_model:") pass through."""
    try:
        yield
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError, AttributeError, AssertionError) as e:
        text = str(e).strip()
        if text.startswith("check_model:"):
            raise
        first = (text.splitlines() or [type(e).__name__])[0].replace(os.fspath(d), "<check_model's directory>")
        if isinstance(e, ValueError) and not type(e).__module__.startswith("torch"):
            raise ValueError(f"check_model: {what}: {first}") from None  # foldcheck's own reading of it
        raise ValueError(f"check_model: {what} does not run on x (a {_name(x.dtype)} tensor of shape "
                         f"{tuple(x.shape)}): {first}") from None


def _padding_not_run(model: torch.nn.Module) -> list[str]:
    """The convs whose padding foldcheck's model runner does not run, one phrase each ("c pads
    with padding_mode 'reflect'"): it pads with zeros (a Conv's pads), and PyTorch exports any
    other padding_mode as an F.pad of integer shape arithmetic and Slice or a reflect/edge Pad,
    which it does not read."""
    return [f"{n or 'the model'} pads with padding_mode {m.padding_mode!r}" for n, m in model.named_modules()
            if isinstance(m, _CONVS) and m.padding_mode != "zeros" and any(any(p) for p in _padding(m))]


def _refuse_padding_not_run(model: torch.nn.Module, name: str, weights_only: bool) -> None:
    """A model whose outputs foldcheck cannot run (_padding_not_run) is refused up front unless
    weights_only, naming the module and saying what does check it."""
    pads = [] if weights_only else _padding_not_run(model)
    if pads:
        more = f" (and {len(pads) - 1} more)" if len(pads) > 1 else ""
        raise ValueError(_core.neutralised(
            f"check_model: {pads[0]}{more}: foldcheck runs models padded with zeros only, so the outputs of {name} "
            "cannot be run and compared; check_model(model, fused, x, weights_only=True) checks its folded weights "
            "and biases, every conv + BatchNorm"))


def _zero_padded(module: torch.nn.Module) -> torch.nn.Module:
    """The module as a weights-only check exports it: the module itself, or, when some of its
    convs pad in a way foldcheck does not read (_padding_not_run), a copy whose convs pad with
    zeros as much (padding_mode 'zeros': a Conv's pads). No output is run: the folds read are
    the same, and each conv's padding_mode is compared by _fold_mismatches beforehand."""
    import copy  # noqa: PLC0415

    if not _padding_not_run(module):
        return module
    out = copy.deepcopy(module)
    for m in out.modules():
        if isinstance(m, _CONVS) and m.padding_mode != "zeros":
            pad, m.padding_mode = _padding(m), "zeros"
            m.padding = tuple(a for a, _ in pad) if all(a == b for a, b in pad) else m.padding
    return out


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


def _named_conv(mods: dict[str, torch.nn.Module], name: str) -> torch.nn.Module | None:
    """The conv of that name: the module itself, or the conv first in a fuser's Sequential."""
    f = mods.get(name)
    return f[0] if isinstance(f, torch.nn.Sequential) and len(f) and isinstance(f[0], _CONVS) else f


def _names_pair(model: torch.nn.Module, fused: torch.nn.Module) -> bool:
    """Whether every conv of `model` has a conv of the same name in `fused` (fuse_modules,
    fuse_conv_bn_eval and fx keep the model's names; a hand-built fused model may not)."""
    theirs = dict(fused.named_modules())
    return all(isinstance(_named_conv(theirs, n), _CONVS) for n, m in model.named_modules() if isinstance(m, _CONVS))


def _pair_mismatches(model: torch.nn.Module, fused: Any, x: torch.Tensor) -> tuple[dict[str, Mismatch],
                                                                                   tuple[str, ...]]:
    """Each conv + BN pair of `model` whose fused conv (the module of the same name in `fused`)
    computes another convolution or is of another dtype: ({conv name: (geometry, [dtype
    mismatch])} (_fold_mismatches; a fused ReLU held to whether the model applies one after the
    BatchNorm, _relu_after), the notes of fused ReLUs taken on trust where that is not known)."""
    mods, theirs, pairs = dict(model.named_modules()), dict(fused.named_modules()), conv_bn_pairs(model, x)
    relu_after = _relu_after(model, [bn for _, bn in pairs])
    out, notes = {}, []
    for conv, bn in pairs:
        f = theirs.get(conv)
        if f is not None and isinstance(_fused_parts(f)[0], _CONVS):  # its Sequential too: what runs after it
            geometry, dtype = _fold_mismatches(mods[conv], mods[bn], f, relu_after[bn])
            if geometry or dtype:
                out[conv] = (geometry, [dtype] if dtype else [])
            note = _relu_note(f) if relu_after[bn] is None else None
            notes += [f"{conv}: {note}"] if note else []
    return out, tuple(notes)


def _relu_after(model: torch.nn.Module, bns: list[str]) -> dict[str, bool | None]:
    """{BatchNorm module name: whether the model applies a ReLU to its output, which nothing else
    takes (what fuse_modules' conv + BatchNorm + ReLU computes)}, read from the model's fx graph;
    None for each when fx cannot trace the model."""
    try:
        gm = _traced(model)
    except Exception:  # noqa: BLE001  # fx cannot trace data-dependent Python: not known
        return dict.fromkeys(bns)
    mods = dict(gm.named_modules())

    def relu(n: Any) -> bool:
        return (n.op == "call_module" and type(mods.get(n.target)) is torch.nn.ReLU) or \
            (n.op == "call_function" and n.target in _RELU_FUNCTIONS) or (n.op == "call_method" and
                                                                          n.target in ("relu", "relu_"))
    found = {n.target: len(n.users) == 1 and relu(next(iter(n.users)))
             for n in gm.graph.nodes if n.op == "call_module" and n.target in bns}
    return {bn: found.get(bn) for bn in bns}


_RELU_FUNCTIONS = (torch.relu, torch.relu_, torch.nn.functional.relu, torch.nn.functional.relu_)


def _as_the_models(model: torch.nn.Module, fused: _Fused, weights_only: bool) -> tuple[bool, torch.nn.Module,
                                                                                        str | None]:
    """What is exported for accuracy_diff when fused convs compute another convolution or in
    another dtype (fused.changed): a copy of the fused module whose changed convs have the
    model's geometry and dtype and their own weight and bias values (exactly: a cast up, or
    none), so that their folds are still judged; weights only, since the fused model computes
    other convolutions. (weights_only, module, note)."""
    import copy  # noqa: PLC0415

    if not fused.changed:
        return weights_only, fused.module, None
    module = copy.deepcopy(fused.module)
    mods, theirs = dict(model.named_modules()), dict(module.named_modules())
    for name in fused.changed:
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
        setattr(theirs[parent] if parent else module, attr, restored)
    verb = "is" if len(fused.changed) == 1 else "are"  # another geometry or dtype than the model's
    return True, module, (f"the fused model's outputs were not compared (its folded weights were): "
                          f"{', '.join(fused.changed)} {verb} not as the model's convolution")


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
def _in_users_words(d: str, model: str) -> Iterator[None]:
    """accuracy_diff's refusals with the files check_model wrote named as the user's objects (the
    model by its class, `model`; the fused model, x, the fused model's output), never as
    temporary paths."""
    try:
        yield
    except ValueError as e:
        words = {os.path.join(d, "original.onnx"): f"the model {_core.neutralised(model)} (as exported to ONNX)",
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


# check_model's arithmetics: the autocast dtype each computes the fused model's output in.
_AUTOCAST: dict[str, torch.dtype | None] = {"float32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _output_of(fused, x, autocast=None):
    """The fused model's own output on x (eval mode, its modes given back), for accuracy_diff's
    end-to-end check of another engine's output: it sees what no fold check can (a changed layer
    without a BatchNorm, a module called twice). autocast: a dtype to run it under
    torch.autocast("cpu", dtype) (its 16-bit output is returned as float32, exactly). (array,
    None), or (None, why not)."""
    module = fused if isinstance(fused, torch.nn.Module) else getattr(fused, "_orig_mod", None)
    frozen = isinstance(fused, torch.jit.ScriptModule)  # frozen: no modes left to set
    evaluating = _evaluating(module) if isinstance(module, torch.nn.Module) and not frozen \
        else contextlib.nullcontext()
    casting = torch.autocast("cpu", dtype=autocast) if autocast is not None else contextlib.nullcontext()
    with evaluating, torch.no_grad(), casting:
        y = fused(x)
    if autocast is not None and isinstance(y, torch.Tensor) and y.dtype == autocast:
        y = y.float()  # its values exactly
    if not isinstance(y, torch.Tensor) or y.dtype != torch.float32:
        return None, (f"the fused model's output is a {type(y).__name__}"
                      f"{'' if not isinstance(y, torch.Tensor) else ' of ' + str(y.dtype)}, not one float32 tensor: "
                      "not compared end to end")
    return y.detach().cpu().contiguous().numpy(), None


def _why_no_pairs(model, fused, x, name):
    """Why the model (its class: `name`) exported no conv + BatchNorm pair: swapped arguments,
    no BatchNorm, or BatchNorms that take no conv's output alone (named)."""
    theirs = len(conv_bn_pairs(fused, x)) if isinstance(fused, torch.nn.Module) else 0
    if theirs:
        return (f"the model ({name}) has no conv + BatchNorm pair but the fused model has {theirs}: are the two "
                "swapped? check_model(model, fused_model, x) takes the original first")
    bns = [n for n, m in model.named_modules() if isinstance(m, _BNS)]
    if not bns:
        return f"the model ({name}) has no BatchNorm: nothing to fold, nothing to check"
    more = f" (and {len(bns) - 3} more)" if len(bns) > 3 else ""
    return (f"the model ({name}) has no conv followed by a BatchNorm: its BatchNorm{'s' if len(bns) > 1 else ''} "
            f"{', '.join(bns[:3])}{more} take{'' if len(bns) > 1 else 's'} no conv's output alone (nothing to fold, "
            "nothing to check)")


# --- fused models read conv by conv (frozen, compiled, of other module names) ----------------
# A fused model whose convs do not carry the model's module names is read as its convs in the
# order forward runs them (_FusedConv: values, geometry, what its fuser folded into each) and
# paired with the model's convs in that order; a copy of the model carries the folds that can
# be judged (_rebuilt). The folds PyTorch's own fusers make beyond conv + BN — torch.jit.freeze's
# conv-add/sub/mul/div folding (optimize_numerics), inductor's binary folding — are read from
# the graphs (what follows each conv before freezing and no longer after) and MISTRUSTED.

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


def _module_convs(model: torch.nn.Module, fused: torch.nn.Module, x: torch.Tensor) -> list[_FusedConv]:
    """The convs of a fused nn.Module whose module names are not the model's (hand-built), in
    the order forward runs them: each its own module as its geometry; its BatchNorm counts as
    folded when the model's conv in its place has one and this conv has none after it."""
    mine = [n for n, _ in _conv_order(model, x)]
    paired, kept = {c for c, _ in conv_bn_pairs(model, x)}, {c for c, _ in conv_bn_pairs(fused, x)}
    theirs = _conv_order(fused, x)
    mine += [""] * max(0, len(theirs) - len(mine))
    return [_FusedConv(m.weight.detach(), None if m.bias is None else m.bias.detach(), m,
                       ["batch_norm"] if name in paired and their_name not in kept else [], their_name in kept)
            for name, (their_name, m) in zip(mine, theirs)]


def _rebuilt(model: torch.nn.Module, convs: list[_FusedConv], fuser: str | None, x: torch.Tensor) -> _Fused:
    """A copy of `model` carrying the fused model's convs, paired with its own in forward order,
    and the mismatches found: a conv's geometry or dtype against the model's (_fold_mismatches)
    and what its fuser folded into it besides its BatchNorm (_absorbed_beyond). A conv whose
    fold can be judged gets the fused weight and bias (its BatchNorm, when the fuser folded it,
    an identity); any other keeps the model's conv and BatchNorm, judged by its mismatch."""
    import copy  # noqa: PLC0415

    order = _conv_order(model, x)
    if len(order) != len(convs):
        raise ValueError(f"check_model: the fused model has {len(convs)} convolutions, the model {len(order)}: "
                         "cannot pair them")
    pairs, mods = dict(conv_bn_pairs(model, x)), dict(model.named_modules())
    rebuilt = copy.deepcopy(model).eval()
    theirs = dict(rebuilt.named_modules())
    mismatches, changed = {}, []
    for (name, conv), f in zip(order, convs):
        bn = mods[pairs[name]] if name in pairs else None
        geometry, dtype = _conv_mismatches(conv, bn, f)
        beyond = _absorbed_beyond(f, bn is not None, fuser or "the fuser")
        if geometry or dtype or beyond:
            mismatches[name] = (geometry, [r for r in (dtype, beyond) if r])
            changed += [name] if geometry or dtype else []
        if beyond is None and tuple(f.weight.shape) == tuple(conv.weight.shape):
            _install(rebuilt, theirs, name, f, None if f.bn_after else pairs.get(name))
    return _Fused(rebuilt, fuser, mismatches, changed)


def _install(rebuilt: torch.nn.Module, mods: dict[str, torch.nn.Module], name: str, f: _FusedConv,
             bn: str | None) -> None:
    """The conv `name` of `rebuilt` given f's weight and bias (in its own dtype); the BatchNorm
    `bn` (one its fuser folded into it) an identity."""
    conv: Any = mods[name]
    with torch.no_grad():
        conv.weight = torch.nn.Parameter(f.weight.detach().clone().to(conv.weight.dtype))
        conv.bias = None if f.bias is None else torch.nn.Parameter(f.bias.detach().clone().to(conv.weight.dtype))
    if bn is not None:
        parent, _, attr = bn.rpartition(".")
        setattr(mods[parent] if parent else rebuilt, attr, torch.nn.Identity())


def _conv_mismatches(conv: ConvModule, bn: torch.nn.Module | None, f: _FusedConv) -> tuple[list[str], str | None]:
    """How the fused conv f computes another convolution than the model's `conv`, or in another
    dtype (for a conv + BN pair: a fold no recipe replays): _fold_mismatches' sentences."""
    fused = f.geometry if isinstance(f.geometry, torch.nn.Module) else _stand_in(conv, f)
    if not isinstance(fused, _CONVS):
        return [], None
    geometry, dtype = _fold_mismatches(conv, bn if bn is not None else conv, fused)
    return geometry, dtype if bn is not None else None


def _stand_in(conv: ConvModule, f: _FusedConv) -> torch.nn.Module | None:
    """A conv on the meta device computing what a graph's conv node computes (its arguments in
    f.geometry, its weight's shape and dtype), for _fold_mismatches against the model's `conv`.
    A padding the graph applies apart (a pad node before the conv, for a padding_mode other than
    zeros or an uneven 'same') is not read: the model's is taken. None if they make no conv."""
    g, w = f.geometry, f.weight
    if not isinstance(g, dict):
        return None
    rank, groups, transposed = w.dim() - 2, int(g["groups"]), bool(g.get("transposed"))
    kinds = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d) if transposed else _CONVS
    out, into = (w.shape[1] * groups, w.shape[0]) if transposed else (w.shape[0], w.shape[1] * groups)
    kw: dict[str, Any] = dict(stride=tuple(g["stride"]), dilation=tuple(g["dilation"]), groups=groups,
                              padding=g["padding"] if isinstance(g["padding"], str) else tuple(g["padding"]))
    if transposed:
        kw["output_padding"] = tuple(g.get("output_padding") or (0,) * rank)
    if conv.padding_mode != "zeros" or any(a != b for a, b in _padding(conv)):
        kw.update(padding=conv.padding, padding_mode=conv.padding_mode)
    kind: Any = kinds[rank - 1]
    try:
        stand_in = kind(into, out, tuple(w.shape[2:]), bias=f.bias is not None, device="meta", dtype=w.dtype, **kw)
    except (ValueError, TypeError, RuntimeError, IndexError):
        return None
    if conv.padding_mode != "zeros":  # what the model's conv pads by (_padding), as the graph's pad node does
        stand_in._reversed_padding_repeated_twice = conv._reversed_padding_repeated_twice
    return stand_in


def _absorbed_beyond(f: _FusedConv, paired: bool, fuser: str) -> str | None:
    """The sentence saying what a fuser folded into a conv besides its BatchNorm (PyTorch's own
    folds: torch.jit.freeze's conv-add/sub/mul/div folding, inductor's binary folding, a
    BatchNorm folded in part), or that it could not be told; None when it folded the conv's
    BatchNorm or nothing. No recipe models those folds: the conv's fold is not judged."""
    if f.absorbed is None:
        return (f"which operations {fuser} folded into this conv could not be told (its graph could not be "
                "compared with the model's): its fold was not judged (the model's conv stands in its place)")
    ops = [op for op in f.absorbed if not (paired and op == "batch_norm")]
    if not ops:
        return None
    names = [op if op.startswith("part") else f"{'an' if op[0] in 'aeiou' else 'a'} {op}" for op in ops]
    alone = "the conv and its BatchNorm" if paired else "the conv"
    return (f"{fuser} folded {' and '.join(names)} after it into this conv"
            f"{' besides its BatchNorm' if 'batch_norm' in f.absorbed and paired else ''}: its weights are not a "
            f"fold of {alone} alone, and no recipe models {'that' if len(ops) == 1 else 'those'}; its fold was not "
            "judged (the model's conv stands in its place)")


# torch.jit.freeze: a conv node's kinds, and the kinds freezing folds into a conv after it.
_JIT_CONVS = ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode")
_FOLDABLE = ("batch_norm", "add", "sub", "mul", "div")


def _jit_convs(graph: Any) -> list[Any]:
    nodes = [n for n in graph.nodes() if n.kind() in _JIT_CONVS]
    if sum(len(graph.findAllNodes(k)) for k in _JIT_CONVS) != len(nodes):
        raise ValueError("a convolution inside a loop or branch of the frozen graph: its place is not known")
    return nodes


def frozen_fold(frozen: torch.jit.ScriptModule) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
    """The (weight, bias) of every convolution of a torch.jit.freeze'd module, in graph order:
    constants after freezing (its conv-bn folding has run)."""
    return [(_constant(n.inputsAt(1)), _constant(n.inputsAt(2))) for n in _jit_convs(frozen.graph)]


def _constant(value):
    node = value.node()
    if node.kind() != "prim::Constant":
        raise ValueError("a convolution's weight is not a constant of the frozen graph (was it frozen?)")
    t = node.output().toIValue()
    return t if isinstance(t, torch.Tensor) else None


def _frozen_convs(frozen: torch.jit.ScriptModule, model: torch.nn.Module, x: torch.Tensor) -> list[_FusedConv]:
    """The convs of a torch.jit.freeze'd module, in graph order: its constants, each node's
    geometry, and the operations freezing folded into it — those that follow the conv in the
    model frozen without its folds (optimize_numerics=False: no conv-bn, conv-add/sub or
    conv-mul/div folding) and no longer do in the frozen graph (_unfolded_chains)."""
    nodes = _jit_convs(frozen.graph)
    chains = [_jit_chain(n) for n in nodes]
    unfolded = _unfolded_chains(model, x, chains)
    out = []
    for i, n in enumerate(nodes):
        w = _constant(n.inputsAt(1))
        if w is None:
            raise ValueError("a convolution's weight is not a tensor constant of the frozen graph")
        absorbed = None if unfolded is None else unfolded[i][:len(unfolded[i]) - len(chains[i])]
        out.append(_FusedConv(w, _constant(n.inputsAt(2)), _jit_geometry(n), absorbed, "batch_norm" in chains[i]))
    return out


def _jit_chain(node: Any) -> list[str]:
    """The operations freezing may fold that take a conv node's output one after the other (each
    the only user of the one before), by kind: ["batch_norm", "mul", ...]."""
    kinds, out = [], node.output()
    while len(out.uses()) == 1:
        user = out.uses()[0].user
        kind = user.kind().removeprefix("aten::").rstrip("_")
        if kind not in _FOLDABLE or user.outputsSize() != 1:
            break
        kinds.append(kind)
        out = user.output()
    return kinds


def _jit_geometry(node: Any) -> dict[str, Any] | None:
    """A frozen conv node's geometry from its constant arguments (None if one is not constant):
    conv1d/2d/3d and _convolution_mode (stride, padding, dilation, groups), _convolution (with
    transposed and output_padding)."""
    args = [node.inputsAt(i) for i in range(node.inputsSize())]
    if any(a.node().kind() != "prim::Constant" for a in args[3:]):
        return None
    v = [a.toIValue() for a in args]
    if node.kind() == "aten::_convolution":
        return dict(stride=v[3], padding=v[4], dilation=v[5], transposed=v[6], output_padding=v[7], groups=v[8])
    return dict(stride=v[3], padding=v[4], dilation=v[5], groups=v[6])


def _unfolded_chains(model: torch.nn.Module, x: torch.Tensor, chains: list[list[str]]) -> list[list[str]] | None:
    """The chains (_jit_chain) of the model's convs frozen without PyTorch's folds, scripted or
    else traced, when they correspond to the frozen graph's (as many convs, each of the frozen
    chains an end of the unfolded one: folds remove what follows a conv from the front); what
    the folds removed is then their difference. None if neither corresponds."""
    import copy  # noqa: PLC0415

    for make in (torch.jit.script, lambda m: torch.jit.trace(m, (x,))):
        try:
            with _quiet_export(), torch.no_grad():
                graph = torch.jit.freeze(make(copy.deepcopy(model).eval()), optimize_numerics=False).graph
            theirs = [_jit_chain(n) for n in _jit_convs(graph)]
        except Exception:  # noqa: BLE001  # not scriptable (or traceable): the other way, or none
            continue
        if len(theirs) == len(chains) and all(len(t) >= len(c) and t[len(t) - len(c):] == c
                                              for t, c in zip(theirs, chains)):
            return theirs
    return None


def compiled_fold(compiled: Callable[..., Any], x: torch.Tensor) -> list[tuple[Any, Any]]:
    """The (weight, bias) of every convolution of a torch.compile'd model after inductor's
    freezing (torch._inductor.config.freezing = True: its constant folding folds each conv + BN),
    in graph order: read from the constants of the graph as the last post-grad pass leaves it
    (after any post_grad_custom_post_pass of the caller's), compiled once here on `x`
    (_compiled_convs: the caller's compiled object and settings are left as they were)."""
    return [(c.weight, c.bias) for c in _compiled_convs(compiled, x)]


def _compiled_convs(compiled: Callable[..., Any], x: torch.Tensor) -> list[_FusedConv]:
    """The convs of a torch.compile'd model after inductor's freezing, in graph order: the
    constants of the last post-grad graph, each node's geometry, and the operations freezing
    folded into it — those that follow it with a constant operand before freezing (read by a
    joint_custom_post_pass, after any of the caller's) and are gone after. Compiled here with
    the FX graph cache off (a cached graph runs no pass) and weight prepacking off where it is
    not already set up (a conv packed for oneDNN is read back dense: the same values), and
    without leaving a trace (_as_it_was)."""
    from torch._inductor import config as inductor  # noqa: PLC0415

    before: list[list[list[tuple[str, str]]]] = []  # per graph, per conv: [(node name, operation)]
    convs: list[_FusedConv] = []
    pre, post = inductor.joint_custom_post_pass, inductor.post_grad_custom_post_pass

    def chains(graph):
        if pre is not None:
            pre(graph)  # type: ignore[operator]  # a callable, as the caller set it
        constant = _constant_nodes(graph)
        before.append([_fx_chain(n, constant) for n in graph.nodes if n.target is torch.ops.aten.convolution.default])

    def read(graph):
        if post is not None:
            post(graph)  # type: ignore[operator]
        found = [c for c in (_fx_conv(graph.owning_module, n) for n in graph.nodes) if c is not None]
        mine = before[len(before) - 1] if before else []
        names = {n.name for n in graph.nodes}
        known = len(mine) == len(found)
        convs.extend(c._replace(absorbed=_gone(mine[i], names) if known else None,
                                bn_after=known and any(op == "batch_norm" and n in names for n, op in mine[i]))
                     for i, c in enumerate(found))
    patch = {"freezing": True, "joint_custom_post_pass": chains, "post_grad_custom_post_pass": read,
             "fx_graph_cache": False, "cpp.weight_prepack": False}
    module = getattr(compiled, "_orig_mod", None)
    evaluating = _evaluating(module) if isinstance(module, torch.nn.Module) else contextlib.nullcontext()
    with _as_it_was(), inductor.patch(patch), evaluating, torch.no_grad():
        compiled(x)
    if not convs:
        raise ValueError("no convolution in the compiled graph (was the model compiled with inductor?)")
    return convs


@contextlib.contextmanager
def _as_it_was() -> Iterator[None]:
    """A compilation of foldcheck's that leaves no trace: dynamo's caches cleared before (so the
    caller's compiled object compiles again, under foldcheck's settings) and after (so it runs
    the caller's compilation again, never foldcheck's); inductor's freezing patterns, set up
    once per process under the settings of the first freezing compilation, set up again by the
    caller's next one when foldcheck's was that first (it would have left weight prepacking off
    for the rest of the process)."""
    init = _freezing_init()
    first = init is not None and init.cache_info().currsize == 0
    torch._dynamo.reset()
    try:
        yield
    finally:
        torch._dynamo.reset()
        if first:
            init.cache_clear()


def _freezing_init() -> Any:
    """inductor's lazy setup of its freezing patterns (a functools.cache), or None."""
    try:
        from torch._inductor.fx_passes import freezing_patterns  # noqa: PLC0415
    except ImportError:
        return None
    init = getattr(freezing_patterns, "lazy_init", None)
    return init if hasattr(init, "cache_info") and hasattr(init, "cache_clear") else None


def _constant_nodes(graph: Any) -> set[Any]:
    """The nodes of a graph before freezing that are constants once it is frozen: parameters and
    buffers (placeholders their AOT description says so; without descriptions, every
    placeholder but the last, the input), get_attr nodes, and what is computed from those."""
    holders = [n for n in graph.nodes if n.op == "placeholder"]
    if any("desc" in n.meta for n in holders):
        params = {n for n in holders if type(n.meta.get("desc")).__name__.startswith(("Param", "Buffer"))}
    else:
        params = set(holders[:-1])
    constant: set[Any] = set()
    for n in graph.nodes:
        if n in params or n.op == "get_attr" or (n.op == "call_function" and
                                                 all(a in constant for a in n.all_input_nodes)):
            constant.add(n)
    return constant


def _fx_chain(conv: Any, constant: set[Any]) -> list[tuple[str, str]]:
    """The binary operations with a constant operand that take a conv node's output one after
    the other (each the only user of the one before): what inductor's binary folding may fold
    into it. [(node name, "batch_norm" for one of a BatchNorm module's, else the operation)]."""
    chain, node = [], conv
    while len(node.users) == 1:
        user = next(iter(node.users))
        parts = str(user.target).split(".")
        if user.op != "call_function" or parts[0] != "aten" or parts[1] not in _FOLDABLE[1:] or \
                any(a not in constant for a in user.all_input_nodes if a is not node):
            break
        stack = list((user.meta.get("nn_module_stack") or {}).values())
        chain.append((user.name, "batch_norm" if stack and "BatchNorm" in str(stack[-1][-1]) else parts[1]))
        node = user
    return chain


def _gone(chain: list[tuple[str, str]], names: set[str]) -> list[str]:
    """What of a conv's chain (_fx_chain) freezing folded into it, in order: a BatchNorm's
    operations as one ("batch_norm"; "part of a BatchNorm" when some of them are left), each
    other operation by its name."""
    bn = [name for name, op in chain if op == "batch_norm"]
    whole = all(name not in names for name in bn)
    out: list[str] = []
    for name, op in chain:
        label = op if op != "batch_norm" or whole else "part of a BatchNorm"
        if name not in names and not (op == "batch_norm" and label in out):
            out.append(label)
    return out


def _fx_conv(gm: Any, node: Any) -> _FusedConv | None:
    """A conv of the graph after freezing (absorbed: to be read), or None: an aten.convolution
    with its constants, or a conv inductor packed for oneDNN (its weight an opaque oneDNN
    tensor, read back dense; its arguments weight, bias, padding, stride, dilation, groups)."""
    if node.op != "call_function":
        return None
    a = node.args
    if node.target is torch.ops.aten.convolution.default:
        return _FusedConv(_fx_value(gm, a[1]), _fx_value(gm, a[2]), dict(
            stride=a[3], padding=a[4], dilation=a[5], transposed=a[6], output_padding=a[7], groups=a[8]), [])
    for i, arg in enumerate(a[:3]):
        w = _fx_value(gm, arg) if getattr(arg, "op", None) == "get_attr" else None
        if isinstance(w, torch.Tensor) and w.is_mkldnn and w.dim() >= 3:
            rest = list(a[i + 1:i + 6])
            geometry = dict(zip(("padding", "stride", "dilation", "groups"), rest[1:])) \
                if len(rest) == 5 and isinstance(rest[4], int) else None
            return _FusedConv(w.to_dense(), _fx_value(gm, rest[0] if rest else None), geometry, [])
    return None


def _fx_value(gm, arg):
    if arg is None:
        return None
    if getattr(arg, "op", None) != "get_attr":
        raise ValueError(f"a convolution's parameter is not a frozen constant ({arg}): was freezing on?")
    obj = gm
    for part in arg.target.split("."):
        obj = getattr(obj, part)
    return obj
