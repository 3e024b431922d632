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

__all__ = ["assert_fold_close"]



def _is_tensor(x):
    return isinstance(x, np.ndarray) or (hasattr(x, "detach") and hasattr(x, "dtype") and not hasattr(x, "forward"))


def assert_fold_close(actual, expected, *, input=None, conv=None, bn=None, msg=None, precision=256):  # noqa: A002
    """Assert that `actual` is a correct fold of `expected` (see the module's documentation).

    actual / expected:
      * a fused conv / (conv, bn) or nn.Sequential(conv, bn): the fused weight and bias;
      * a fused model / the original model, with `input`: every conv + BN pair (check_model);
      * output tensors, with conv (optional), bn and input: `actual` against the exact layer
        within its bound (`expected`, the unfused output, is checked the same way).
    msg: prepended to the failure message."""
    if _is_tensor(actual):
        failure = _outputs(actual, expected, conv, bn, input, precision)
    else:
        import torch  # noqa: PLC0415

        if isinstance(actual, (tuple, list)):
            raise TypeError(f"assert_fold_close: actual is a {type(actual).__name__}; {_SHAPES}")
        pair = _pair(expected, torch)
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


def _pair(expected: Any, torch: Any) -> tuple[Any, Any] | None:
    """(conv, bn) when `expected` is one layer, None when it is a model; anything else refused."""
    from .torch import _BNS, _CONVS  # noqa: PLC0415

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
    from . import torch as fct  # noqa: PLC0415

    r = fct.check_fold(conv, bn, fused, precision=precision)
    if r.passed:
        return None
    w = r.weights
    exact, res, bound = w.exact, w.residual_ulp, w.bound_ulp
    ratio = np.abs(res) / np.where(bound > 0, bound, np.inf)
    lines = [f"The fused conv is not a fold of the conv and BatchNorm ({r.verdict})."]
    if w.verdict != "EXPECTED":
        i = np.unravel_index(int(np.nanargmax(np.where(np.isnan(ratio), np.inf, ratio))), exact.shape)
        actual_w = fused.weight.detach().cpu().double().numpy()[i]
        lines.append(f"Worst element: weight{list(map(int, i))} (channel {int(i[0])}): actual {actual_w:.9g}, "
                     f"exact fold "
                     f"{exact[i]:.9g}: {res[i]:+.1f} ULP from it, {ratio[i]:.1f} x its bound of {bound[i]:.2f} ULP.")
        lines.append(_weight_bound(w))
        lines.append("Likely cause: " + _weight_cause(exact, fused.weight.detach().cpu().double().numpy(), ratio,
                                                      conv, bn))
    else:
        lines.extend(_bias_failure(r, fused, conv, bn))
    return "\n".join(lines)


def _weight_bound(w):
    """The bound the weights were held to: the closest recipe's, its chain and unit roundoff."""
    bound = w["bound"]
    chain = next((r["chain"] for r in w.recipes if r["name"] == bound.get("recipe")), "")
    u = {"float32": "; u = 2^-24", "float64": "; u = 2^-53"}.get(w["dtype"], "")
    return (f"Bound: {bound['formula']} (the closest recipe, {bound.get('recipe')}: {chain}; a-priori{u}; no engine "
            "recipe's bound holds).")


def _bias_failure(r, fused, conv, bn):
    """The weights are right, the bias is not: which channels, and whether it was dropped."""
    from .torch import bn_parameters  # noqa: PLC0415

    p = {k: (v.detach().double().numpy() if hasattr(v, "detach") else v) for k, v in bn_parameters(bn).items()}
    b = np.zeros(p["mean"].shape) if conv.bias is None else conv.bias.detach().double().numpy()
    exact = (b - p["mean"]) * p["gamma"] / np.sqrt(p["var"] + p["eps"]) + p["beta"]
    actual = np.zeros(exact.shape) if fused.bias is None else fused.bias.detach().double().numpy()
    off = np.nonzero(np.abs(actual - exact) > 1e-5 * np.maximum(np.abs(exact), 1e-30))[0]
    f = r.parameters
    ratio = "inf" if f.worst_ratio is None else f"{f.worst_ratio:.3g}"
    lines = [f"The weights are a correct fold (bit for bit: {', '.join(r.bit_exact_recipes) or 'no recipe'}); "
             f"the bias is "
             f"not: worst channel {f.worst_channel}, {ratio} x the closest recipe's bound ({f.closest_recipe}).",
             "Bound: |b' - ((b - mean)*gamma/sqrt(var+eps) + beta)| <= the running-error bound of the recipe's "
             "bias chain "
             "(a-priori, every rounding of its operations)."]
    if fused.bias is None or (not np.any(actual) and np.any(exact)):
        cause = "the folded bias is missing (zero in every channel): add b' = (b - mean)*gamma/sqrt(var+eps) + beta."
    elif len(off) == len(exact):
        cause = ("the bias is off in every channel: mean or beta not folded (or folded twice), or the conv's own bias "
                 "dropped or added twice.")
    else:
        cause = (f"the bias is off in {len(off)} of {len(exact)} channels ({', '.join(map(str, off[:5]))}): those "
                 "channels' mean or beta, or a corrupted or mis-indexed channel.")
    return lines + ["Likely cause: " + cause]


def _scale_hypotheses(scale, p, u):
    """Per-channel fold scales s = w'/w (each the median over its channel: within a few
    roundings, 8u relative, of the scale the fold used) against common slips: another eps
    (recovered from the scales, and only when it differs from the module's by more than what 8u
    allows), the variance read as the standard deviation, the square root left out. The slip
    whose scale matches every channel within 8u, or None."""
    gamma, var, eps = p["gamma"], p["var"], p["eps"]
    ok = np.isfinite(scale) & (scale != 0)
    if not ok.any():
        return None
    tol = 8 * u

    def fits(model):
        return bool(np.all(np.abs(model[ok] / scale[ok] - 1) < tol))
    e = float(np.median((gamma[ok] / scale[ok]) ** 2 - var[ok]))
    if e > 0 and abs(e - eps) > 4 * tol * float(np.median(var[ok] + e)) and fits(gamma / np.sqrt(var + e)):
        return (f"the fold used eps = {e:.3g} where the BatchNorm's eps is {eps:g} (Keras/TF default 1e-3, "
                "PyTorch/ONNX 1e-5): fold with the module's eps.")
    if fits(gamma / np.sqrt(np.sqrt(var) + eps)):
        return "the variance read as the standard deviation (sqrt(var) + eps under the root): use running_var as is."
    if fits(gamma / (var + eps)):
        return "the square root left out (gamma / (var + eps)): the scale is gamma / sqrt(var + eps)."
    return None


def _channel_change(e, v, ratio, ch):
    """How one channel changed: by a common factor (its median ppm), or in a few elements."""
    out = np.nonzero(ratio > 1)[0]
    if not np.all(np.isfinite(v)):
        return f"channel {ch}: {int(np.sum(~np.isfinite(v)))} NaN or infinite weight(s)"
    if len(out) <= max(1, len(e) // 4):
        i = int(out[np.argmax(ratio[out])])
        return f"channel {ch}: {len(out)} of {len(e)} weights (element {i}: {v[i]:.9g}, exact {e[i]:.9g})"
    k = np.abs(e) > 0
    ppm = float(np.median((v[k] - e[k]) / np.abs(e[k]))) * 1e6 if k.any() else float("nan")
    return f"channel {ch} {ppm:+.3g} ppm"


def _weight_cause(exact, actual, ratio, conv, bn):
    """The pattern of the channels beyond their bound: a slip that changes every channel's scale
    (recovered eps, var vs std, no sqrt), else which channels changed and by how much."""
    from .torch import bn_parameters  # noqa: PLC0415

    c = exact.shape[0]
    beyond = np.nonzero((np.nan_to_num(ratio, nan=np.inf) > 1).reshape(c, -1).any(axis=1))[0]
    w = conv.weight.detach().cpu().double().numpy().reshape(c, -1)
    a = actual.reshape(c, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.array([np.median((a[k] / w[k])[w[k] != 0]) if np.any(w[k] != 0) else np.nan for k in range(c)])
    p = {k: (v.detach().double().numpy() if hasattr(v, "detach") else v) for k, v in bn_parameters(bn).items()}
    u = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(
        str(conv.weight.dtype).replace("torch.", ""), 2.0 ** -24)
    slip = _scale_hypotheses(scale, p, u)
    if slip:
        return slip
    shown = ", ".join(_channel_change(exact[ch].reshape(-1), actual[ch].reshape(-1),
                                      np.nan_to_num(ratio[ch].reshape(-1), nan=np.inf), int(ch)) for ch in beyond[:5])
    if len(beyond) == c and c > 1:
        return (f"every channel is off, each by its own amount ({shown}, ...), matching no common slip (another eps, "
                "the variance read as std, no sqrt): different BatchNorm parameters (another layer's, or stale "
                "running statistics), or a second transformation of the weights.")
    return (f"{len(beyond)} of {c} channels changed after or during the fold ({shown}); the others are within their "
            "bounds: a corrupted or mis-indexed channel, or that channel's BatchNorm parameters differ.")


def _model(actual, expected, x, precision):
    from . import torch as fct  # noqa: PLC0415

    r = fct.check_model(expected, actual, x, output_samples=16, precision=precision)
    if r.passed:
        return None
    if not r.layers:
        return f"Nothing was compared ({r.verdict}): {r.reason}"
    lines = [f"The fused model is not a correct fold of the model ({r.verdict}): "
             f"{len(r.unexpected)} of {len(r.layers)} conv + BatchNorm layers are not."]
    e2e = (r.accuracy_diff.get("end_to_end") or {}).get("observed_output") or {}
    if e2e.get("verdict") not in (None, "EXPECTED"):
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
    return "\n".join(lines)


def _outputs(actual, expected, conv, bn, x, precision):
    from . import torch as fct  # noqa: PLC0415

    if bn is None or x is None:
        raise ValueError("assert_fold_close on outputs needs bn= and input= (and conv= for a conv + BN layer)")
    r = fct.diagnose(bn, x, actual, conv=conv, precision=precision)
    failures = []
    if not r.passed:
        failures.append(_output_failure("actual", r, tuple(actual.shape), _values(actual)))
    if expected is not None:
        e = fct.diagnose(bn, x, expected, conv=conv, precision=precision)
        if not e.passed:
            failures.append(_output_failure("expected (the unfused output)", e, tuple(expected.shape),
                                            _values(expected)))
    return "\n".join(failures) or None


def _values(t):
    return np.asarray(t.detach().cpu().double().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _output_failure(which, r, shape, values):
    g = r["as_given"]
    bad = np.argwhere(~np.isfinite(values))
    if len(bad):
        first = list(map(int, bad[0]))
        return (f"{which} has {len(bad)} NaN or infinite element(s) (the first at {first}); the layer's exact output "
                f"there is finite ({r.verdict}).")
    w = g.get("worst_element") or {}
    index = w.get("index")
    where = list(map(int, np.unravel_index(int(index), shape))) if index is not None else "?"
    ratio = g.get("max_ratio_to_bound")
    ratio = ratio if isinstance(ratio, str) else f"{ratio:.3g}"
    lines = [f"{which} is not the layer's output up to rounding ({r.verdict}): worst element {where}: "
             f"{w.get('observed')!r} vs the exact {w.get('model')!r}, {ratio} x its bound."]
    bound = r.get("bound") or {}
    if "formula" in bound:
        lines.append("Bound: " + bound["formula"])
    if r.best:
        lines.append(f"Likely cause: {r.best}: {r.fix}")
    return "\n".join(lines)
