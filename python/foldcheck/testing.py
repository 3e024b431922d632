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
import numpy as np

from . import _commands


def _is_tensor(x):
    return hasattr(x, "detach") and hasattr(x, "dtype") and not hasattr(x, "forward")


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

        pair = _pair(expected, torch)
        if pair is not None:
            failure = _layer(actual, *pair, precision)
        else:
            if input is None:
                raise ValueError("assert_fold_close on models needs input= (the model's input)")
            failure = _model(actual, expected, input, precision)
    if failure:
        raise AssertionError(f"{msg}\n{failure}" if msg else failure)


def _pair(expected, torch):
    from .torch import _BNS, _CONVS  # noqa: PLC0415

    if isinstance(expected, (tuple, list)) and len(expected) == 2:
        return tuple(expected)
    if isinstance(expected, torch.nn.Sequential) and len(expected) == 2 and isinstance(expected[0], _CONVS) \
            and isinstance(expected[1], _BNS):
        return expected[0], expected[1]
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
        lines.append(f"Worst element: weight{list(map(int, i))} (channel {int(i[0])}): actual {actual_w:.9g}, exact fold "
                     f"{exact[i]:.9g}: {res[i]:+.1f} ULP from it, {ratio[i]:.1f} x its bound of {bound[i]:.2f} ULP.")
        lines.append(_weight_bound(w))
        lines.append("Likely cause: " + _weight_cause(exact, fused.weight.detach().cpu().double().numpy(), ratio))
    else:
        f = r.parameters
        lines.append(f"The weights are a correct fold (bit for bit: {', '.join(r.bit_exact_recipes) or 'no recipe'}); "
                     f"the {'bias' if f.get('recipes') else 'parameters'} are not: worst channel {f.worst_channel}, "
                     f"{f.worst_ratio if f.worst_ratio is not None else 'inf'} x the closest recipe's bound "
                     f"({f.closest_recipe}).")
        lines.append("Bound: " + f["bound"])
        lines.append("Likely cause: the folded bias b' = (b - mean)*gamma/sqrt(var+eps) + beta is wrong in that channel "
                     "(mean or beta not folded, folded twice, or the conv's own bias dropped).")
    return "\n".join(lines)


def _weight_bound(w):
    """The bound the weights were held to: the closest recipe's, its chain and unit roundoff."""
    bound = w["bound"]
    chain = next((r["chain"] for r in w.recipes if r["name"] == bound.get("recipe")), "")
    u = {"float32": "; u = 2^-24", "float64": "; u = 2^-53"}.get(w["dtype"], "")
    return (f"Bound: {bound['formula']} (the closest recipe, {bound.get('recipe')}: {chain}; a-priori{u}; no engine "
            "recipe's bound holds).")


def _weight_cause(exact, actual, ratio):
    """The pattern of the channels beyond their bound: a few channels (a corrupted or mis-indexed
    channel, or its BatchNorm parameters), or all by one factor (eps, var vs std)."""
    c = exact.shape[0]
    beyond = np.nonzero((np.nan_to_num(ratio, nan=np.inf) > 1).reshape(c, -1).any(axis=1))[0]
    ppm = []
    for ch in beyond[:5]:
        e, a = exact[ch].reshape(-1), actual[ch].reshape(-1)
        k = np.abs(e) > 0
        ppm.append(float(np.median((a[k] - e[k]) / np.abs(e[k]))) * 1e6 if k.any() else float("nan"))
    shown = ", ".join(f"channel {int(ch)} {p:+.3g} ppm" for ch, p in zip(beyond[:5], ppm))
    if len(beyond) == c and c > 1:
        return (f"every channel is off ({shown}, ...): a common factor such as another eps, the variance read as "
                "the standard deviation, or a different BatchNorm's parameters.")
    return (f"{len(beyond)} of {c} channels changed after or during the fold ({shown}); the others are within their "
            "bounds: a corrupted or mis-indexed channel, or that channel's BatchNorm parameters differ.")


def _model(actual, expected, x, precision):
    from . import torch as fct  # noqa: PLC0415

    r = fct.check_model(expected, actual, x, weights_only=True, precision=precision)
    if r.passed:
        return None
    lines = [f"The fused model is not a correct fold of the model ({r.verdict}): "
             f"{len(r.unexpected)} of {len(r.layers)} conv + BatchNorm layers beyond their bounds."]
    for layer in r.unexpected[:5]:
        ratio = layer["worst_ratio"]
        lines.append(f"  {layer['module']}: channel {layer['worst_channel']}, "
                     f"{'inf' if ratio is None else format(ratio, '.1f')} x the bound of the closest recipe "
                     f"({layer['closest_recipe']})")
    lines.append("Bound: |w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta per weight, and the bias chain's running-error "
                 "bound, of each engine recipe (a-priori, u the dtype's unit roundoff).")
    lines.append("Likely cause: those channels changed after or during the fold (fold.check_fold on the module for "
                 "the element-level detail).")
    return "\n".join(lines)


def _outputs(actual, expected, conv, bn, x, precision):
    from . import torch as fct  # noqa: PLC0415

    if bn is None or x is None:
        raise ValueError("assert_fold_close on outputs needs bn= and input= (and conv= for a conv + BN layer)")
    r = fct.diagnose(bn, x, actual, conv=conv, precision=precision)
    failures = []
    if not r.passed:
        failures.append(_output_failure("actual", r))
    if expected is not None:
        e = fct.diagnose(bn, x, expected, conv=conv, precision=precision)
        if not e.passed:
            failures.append(_output_failure("expected (the unfused output)", e))
    return "\n".join(failures) or None


def _output_failure(which, r):
    g = r["as_given"]
    w = g.get("worst_element") or {}
    lines = [f"{which} is not the layer's output up to rounding ({r.verdict}): "
             f"worst element {w.get('index')}: {w.get('observed')!r} vs the exact {w.get('model')!r}, "
             f"{g.get('max_ratio')} x its bound."]
    bound = r.get("bound") or {}
    if "formula" in bound:
        lines.append("Bound: " + bound["formula"])
    if r.best:
        lines.append(f"Likely cause: {r.best}: {r.fix}")
    return "\n".join(lines)
