"""assert_fold_close: torch.testing.assert_close for folded BatchNorms, with a tolerance that is
a proven bound of the operations performed, not a default.

    from foldcheck.testing import assert_fold_close
    assert_fold_close(fused_conv, (conv, bn))                  # a fused layer
    assert_fold_close(fused_model, model, input=x)             # every conv + BN of a model
    assert_fold_close(fused_conv(x), bn(conv(x)), conv=conv, bn=bn, input=x)   # outputs

Each element of the fold may differ from the exact fold w*gamma/sqrt(var+eps) by at most the
a-priori bound alpha*|w| + eta of an engine recipe's chain (unit roundoff u of the dtype; the
bias by its chain's running-error bound); an output by the bound of the conv's accumulation and
the BatchNorm's affine map (diagnose). A fold within some recipe's bound passes; anything else
fails with the worst element, its ratio to the bound, the bound's formula and the likely cause.
torch.testing.assert_close's defaults (rtol 1.3e-6, atol 1e-5 for float32) are absolute for
small weights: a 20 ppm change of one channel passes them; it does not pass this.
"""
from typing import Any

import numpy as np

from . import _arrays, _commands, _core
from ._core import Verdict
from .results import lines_for_people

__all__ = ["assert_fold_close"]



def _is_tensor(x):
    return isinstance(x, np.ndarray) or (hasattr(x, "detach") and hasattr(x, "dtype") and not hasattr(x, "forward"))


def assert_fold_close(actual, expected, *, input=None, conv=None, bn=None, msg=None,  # noqa: A002
                      precision=_commands.FOLD["precision"]):
    """Assert that `actual` is a correct fold of `expected` (see the module's documentation).

    actual / expected:
      * a fused conv / (conv, bn) or nn.Sequential(conv, bn): the fused weight and bias (a
        fuse_modules conv + ReLU passes when its conv is the fold: the ReLU is taken to follow
        bn, which (conv, bn) cannot say; the model form holds it to the model's);
      * a fused model / the original model, with `input`: every conv + BN pair (check_model);
      * output tensors, with conv (optional), bn and input: `actual` against the exact layer
        within its bound (`expected`, the unfused output, is checked the same way), as
        foldcheck.torch.diagnose judges them: the convs it models (a Conv2d of any groups, one
        stride, one dilation, the same zero padding on all sides, 'same' of an odd kernel;
        another is refused by its attribute), in the arithmetic of the output's dtype, a float32
        layer's output given as float64 (its values all float32's) in float32.
    msg: prepended to the failure message."""
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this body
    if _is_tensor(actual) or bn is not None or conv is not None:  # bn= and conv= are the outputs form's
        failure = _outputs(actual, expected, conv, bn, input, precision)
    else:
        import torch  # noqa: PLC0415

        if isinstance(actual, (tuple, list)):
            raise TypeError(f"assert_fold_close: actual is a {type(actual).__name__}; {_SHAPES}")
        pair = _pair(expected, torch, _a_model(actual, input, torch))
        if pair is not None:
            failure = _layer(actual, *pair, precision)
        else:
            if input is None:
                raise ValueError("assert_fold_close on models needs input= (the model's input)")
            failure = _model(actual, expected, input, precision)
    if failure:
        raise AssertionError(f"{msg}\n{failure}" if msg else failure)


_SHAPES = ("expected is the unfused original: (conv, bn), nn.Sequential(conv, bn), or a model with input=; "
           "actual is the fused conv or model")


def _a_model(actual: Any, x: Any, torch: Any) -> bool:
    """Whether `actual` is a fused model: given with input= and not a fused conv (a conv, or a
    fuser's conv + activation such as fuse_modules' ConvReLU2d). A two-module Sequential it is
    compared with is then the model it was fused from, not a (conv, bn) pair."""
    from .torch import _CONVS  # noqa: PLC0415

    if x is None or not isinstance(actual, torch.nn.Module) or isinstance(actual, _CONVS):
        return False
    return not (isinstance(actual, torch.ao.nn.intrinsic._FusedModule) and isinstance(actual[0], _CONVS))


def _pair(expected: Any, torch: Any, model: bool = False) -> tuple[Any, Any] | None:
    """(conv, bn) when `expected` is one layer, None when it is a model (or `model`: the fused
    model is one); anything else refused."""
    from .torch import _BNS, _CONVS  # noqa: PLC0415

    if model and isinstance(expected, torch.nn.Module) and not isinstance(expected, _CONVS + _BNS):
        return None
    if isinstance(expected, torch.nn.Sequential) and len(expected) == 2:
        expected = tuple(expected)
    if isinstance(expected, (tuple, list)):
        if len(expected) == 2 and isinstance(expected[0], _CONVS) and isinstance(expected[1], _BNS):
            return expected[0], expected[1]
        raise TypeError(f"assert_fold_close: expected is a {type(expected).__name__} of "
                        f"{[type(e).__name__ for e in expected]}; {_SHAPES}")
    if isinstance(expected, _CONVS + _BNS) or not isinstance(expected, torch.nn.Module):
        raise TypeError(f"assert_fold_close: expected is a {type(expected).__name__}; {_SHAPES}")
    return None


def _layer(fused, conv, bn, precision):
    """The failure message of a fused conv: the verdicts are check_fold's (explain's on the
    weights, fold_check's on weights and bias), the cause the core's weight-level diagnosis
    (FoldResult.diagnosis, foldcheck._core.diagnose_fold: the slip every weight fits, the
    channels that changed, the bias), each within its rounding-error bound; nothing is judged
    here."""
    from . import torch as fct  # noqa: PLC0415

    r = fct.check_fold(conv, bn, fused, precision=precision)
    if r.passed:
        return None
    fused = fct._fused_conv(fused)
    w, d = r.weights, r.diagnosis
    lines = [f"The fused conv is not a fold of the conv and BatchNorm ({r.verdict})"
             f"{': ' + r.mismatch if r.mismatch else ''}."]
    values_pass = w.passed and r.parameters.passed
    if r.geometry and values_pass:
        lines.append(f"Its weight and bias values are a fold within {r.recipe}'s bound: what it computes besides "
                     "them is what is wrong (a fuser that rebuilt the conv without some of its attributes, or added "
                     "to it?).")
    if r.dtype_mismatch or values_pass:  # values of another dtype: no recipe's bound to cite
        return "\n".join(lines)
    if not w.passed:
        exact, res, bound = w.exact, w.residual_ulp, w.bound_ulp
        i = np.unravel_index(d.weights.worst, exact.shape)
        actual_w = fused.weight.detach().cpu().double().numpy()[i]
        lines.append(f"Worst element: weight{list(map(int, i))} (channel {int(i[0])}): actual {actual_w:.9g}, "
                     f"exact fold "
                     f"{exact[i]:.9g}: {res[i]:+.1f} ULP from it, {d.weights.worst_ratio:.1f} x its bound of "
                     f"{bound[i]:.2f} ULP.")
        lines.append(_weight_bound(w))
        lines.append(f"Likely cause: {r.weights_cause}")
    else:
        lines.extend(_bias_failure(r, d.bias))
    return "\n".join(lines)


def _weight_bound(w):
    """The bound the weights were held to: the closest recipe's, its chain and unit roundoff."""
    bound = w["bound"]
    chain = next((r["chain"] for r in w.recipes if r["name"] == bound.get("recipe")), "")
    u = {"float32": "; u = 2^-24", "float64": "; u = 2^-53"}.get(w["dtype"], "")
    return (f"Bound: {bound['formula']} (the closest recipe, {bound.get('recipe')}: {chain}; a-priori{u}; no engine "
            "recipe's bound holds).")


def _bias_failure(r, bias):
    """The weights are right, the bias is not: which channels, and whether it was dropped (the
    core's diagnosis, `bias`)."""
    f = r.parameters
    ratio = "inf" if f.worst_ratio is None else f"{f.worst_ratio:.3g}"
    return [f"The weights are a correct fold (bit for bit: {', '.join(r.bit_exact_recipes) or 'no recipe'}); "
            f"the bias is "
            f"not: worst channel {f.worst_channel}, {ratio} x the closest recipe's bound ({f.closest_recipe}).",
            "Bound: |b' - ((b - mean)*gamma/sqrt(var+eps) + beta)| <= the running-error bound of the recipe's "
            "bias chain "
            "(a-priori, every rounding of its operations).",
            "Likely cause: " + bias.cause]


def _model(actual, expected, x, precision):
    from . import torch as fct  # noqa: PLC0415

    r = fct.check_model(expected, actual, x, output_samples=16, precision=precision)
    if r.passed:
        return None
    if not r.layers:
        return _core.neutralised(f"Nothing was compared ({r.verdict}): {r.reason}")
    lines = [f"The fused model is not a correct fold of the model ({r.verdict}): "
             f"{len(r.unexpected)} of {len(r.layers)} conv + BatchNorm layers are not."]
    e2e = (r.accuracy_diff.get("end_to_end") or {}).get("observed_output") or {}
    if e2e.get("verdict") is not None and Verdict(e2e["verdict"]) is not Verdict.EXPECTED:
        worst = e2e.get("worst") or {}
        ratio = worst.get("ratio")
        lines.append(f"  its outputs end to end: {e2e['verdict']} (worst element {worst.get('index')}, "
                     f"{'?' if ratio is None else f'{ratio:.3g}'} x the end-to-end bound): a layer changed beyond the "
                     "folds (a conv without a BatchNorm, a module called twice, another operation)")
    for layer in r.unexpected[:5]:
        if layer["note"]:
            lines.append(f"  {layer['module']}: {layer['note']}")
            continue
        ratio = layer["worst_ratio"]
        lines.append(f"  {layer['module']}: channel {layer['worst_channel']}, "
                     f"{'inf' if ratio is None else format(ratio, '.1f')} x the bound of the closest recipe "
                     f"({layer['closest_recipe']})")
    lines.append("Bound: |w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta per weight, and the bias chain's "
                 "running-error "
                 "bound, of each engine recipe (a-priori, u the dtype's unit roundoff).")
    lines.append("Likely cause: see each layer above; foldcheck.torch.check_fold(conv, bn, fused_conv) on one of them "
                 "gives the element-level detail and the slip (eps, var vs std, a changed channel, the bias).")
    return lines_for_people(lines)  # module names and notes as the reports show them


def _outputs(actual, expected, conv, bn, x, precision):
    """The failure message of outputs (None: both pass): each against the exact layer within its
    bound (foldcheck.torch.diagnose), refusals naming actual, expected and input."""
    from . import torch as fct  # noqa: PLC0415

    if bn is None or x is None:
        raise ValueError("assert_fold_close on outputs checks one conv + BN layer: it needs bn= and input= (and "
                         "conv= for a conv + BN layer); for two whole models' outputs, pass the models: "
                         "assert_fold_close(fused_model, model, input=x) checks every conv + BN pair of them")
    x, actual, expected = fct._output_arrays(bn, conv, input=x, actual=actual, expected=expected)
    if conv is not None:
        fct._output_geometry(conv, "assert_fold_close")  # refused in assert_fold_close's words, not diagnose's
    shapes = [problem for which, t in (("actual", actual), ("expected", expected))
              if t is not None for problem in [fct._output_shape_problem(x, t, conv, which, "input")] if problem]
    if shapes:
        return "\n".join(shapes)
    failures = []
    for which, t, said in (("actual", actual, "actual"), ("expected", expected, "expected (the unfused output)")):
        if t is None:
            continue
        with fct._in_module_words({"observed": which, "x": "input"}):
            r = fct.diagnose(bn, x, t, conv=conv, precision=precision)
        if not r.passed:
            failures.append(_output_failure(said, r, tuple(t.shape), _values(t)) + _wider(which, t, fct, bn, conv))
    return "\n".join(failures) or None


def _wider(which, t, fct, bn, conv):
    """The sentence (else "") saying that `t` was judged in its own, wider dtype than the
    layer's: its values are not all the layer's dtype's (diagnose's rule), so no run of the layer
    in its dtype gave them."""
    layer = fct._layer_dtype(bn, conv)
    if t.dtype.kind != "f" or t.dtype.itemsize <= _arrays.numpy_dtype(layer).itemsize or \
            fct._in_layer_dtype(t, layer) is not t:
        return ""
    return (f"\n{which} is {t.dtype} and the layer {layer}: judged in {t.dtype} arithmetic (the modules run in "
            f"{t.dtype}), since not all its values are {layer} values. A {layer} run's output holds {layer} values "
            f"only: if it ran in {layer}, something after it changed them.")


def _values(t):
    return np.asarray(t.detach().cpu().double().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _output_failure(which, r, shape, values):
    g = r["as_given"]
    bad = np.argwhere(~np.isfinite(values))
    if len(bad):  # diagnose's summary says where and why (a value no rounding gives, an overflow)
        first = list(map(int, bad[0]))
        return (f"{which} has {len(bad)} NaN or infinite element(s) (the first at {first}): {r['summary']} "
                f"({r.verdict}).")
    w = g.get("worst_element") or {}
    index = w.get("index")
    where = list(map(int, np.unravel_index(int(index), shape))) if index is not None else "?"
    channel = f" (channel {where[1]})" if isinstance(where, list) and len(where) > 1 else ""
    ratio = g.get("max_ratio_to_bound")
    ratio = ratio if isinstance(ratio, str) else f"{ratio:.3g}"
    lines = [f"{which} is not the layer's output up to rounding ({r.verdict}): worst element {where}{channel}: "
             f"{w.get('observed')!r} vs the exact {w.get('model')!r}, {ratio} x its bound."]
    bound = r.get("bound") or {}
    if "formula" in bound:
        lines.append("Bound: " + bound["formula"])
    if r.best:
        lines.append(f"Likely cause: {r.best}: {r.fix}")
    elif w.get("observed") == 0 and (w.get("model") or 0) < 0 and np.nanmin(values) >= 0:
        lines.append(f"Likely cause: {which} is 0 where the layer's value is negative and has no negative value: an "
                     "activation (a ReLU) applied after the BatchNorm? The layer checked is conv + BN: give the "
                     "BatchNorm's output, or check the fused module itself: assert_fold_close(fused, (conv, bn)).")
    else:
        lines.append("Likely cause: none of the slips diagnose knows (eps, var read as std, batch statistics, a "
                     "missing sqrt, gamma and beta swapped, ...) explains it; a changed weight or channel does not "
                     "show as one: assert_fold_close(fused, (conv, bn)) on the modules names the channel.")
    return "\n".join(lines)
