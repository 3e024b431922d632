"""foldcheck for Keras and TensorFlow Lite: the converter's fold of every conv + BatchNorm of a
Keras model, layer by layer (tensorflow is imported when this module is).

    import foldcheck.keras as fck
    r = fck.check_tflite(model, x)               # converted here with the default options
    r = fck.check_tflite(model, x, tflite=flat)  # a model you converted (bytes or a .tflite path)
    r.verdict, r.layers, r.unexpected; print(r)

The TFLite converter folds each BatchNormalization into the Conv2D or DepthwiseConv2D before
it (w' = w·s, b' = (b − μ)·s + β, s = γ/√(σ² + ε), in its own order: none of foldcheck's
recipes is its bit for bit) and may fuse a following ReLU/ReLU6 into the conv. Every such
pair of the Keras model (_keras_graph.py) is matched to the converted conv at its place —
the conv whose input, in one interpreter run on x, is nearest the Keras conv's input on x
(ties, as for two convs of one input: the nearest folded weights) — and checked:
- that it is the Keras layer's computation: the same stride, dilation and output shape, the
  fused activation Keras applies after the BatchNorm (where Keras says: ReLU, ReLU6, none),
  an input no other tensor of the Keras model is nearer to, an output something uses;
- its folded weights and bias against the exact fold of the Keras layer's weights and
  BatchNorm, with each recipe's rounding-error bound (fold_check);
- its output on its own input (TFLite's default kernels, XNNPACK on CPU; before a fused
  activation, _tflite_model.py) against the Keras layer computed exactly with Keras' own
  padding (diagnose: rounding, or which common bug — an ε not the Keras layer's, ...).
A pair with no converted conv (the converter left its BatchNorm as ops) is MISTRUSTED, never a
pass. So is a layer next to a one-input op the converter folded into the conv as well (a
constant multiply or add: Rescaling or Normalization before the conv, x * 3.0, a Lambda or
another BatchNorm after it; found by values), and a layer beyond its bounds before such an
op that the converter may have split (the BatchNorm's shift moved past a spatial add):
foldcheck models conv + BatchNorm (+ ReLU, ReLU6) only. Pairs it does not model
(SeparableConv2D, Conv1D, Dense, a conv in a nested model apart from its BatchNorm) are
listed and counted as not judged. Ops other than the pairs (a PAD, a concatenation) are not
checked: two same-shape branches whose outputs a converter swapped are not seen.

Import torchvision (if at all) before this module: tensorflow 2.21 loaded first makes
torchvision 0.29's import crash the interpreter.
"""
import contextlib
import io
import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _commands, _core
from . import _tflite_model as tfl
from ._core import Verdict, of_layer, tally
from ._keras_graph import all_ops, conv_bn_pairs, keras_layer, keras_model, layers, record, shown  # noqa: F401
from ._tensorflow import tf
from ._tflite_model import converted_convs  # noqa: F401 (public: a converted model's convs, adapters/tflite_fold.py)
from .results import Result, lines_for_people


def _nearest(a, b):
    """max |a − b| / max |b| (inf for different shapes)."""
    if a is None or b is None or a.shape != b.shape:
        return math.inf
    return float(np.max(np.abs(a.astype(np.float64) - b))) / max(float(np.max(np.abs(b))), np.finfo(float).tiny)


def _tensor(run, index):
    """A tensor of the run, or None where the interpreter kept none (a value nothing uses)."""
    try:
        return run.get_tensor(index)
    except ValueError:
        return None


def _exact_fold(p):
    s = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + p["eps"])
    return p["weight"].astype(np.float64) * s.reshape(-1, 1, 1, 1)


def _match(arrays, keras_inputs, convs, run):
    """Each Keras pair's converted conv (or None), by place: greedily, the conv of its weight
    shape whose input is nearest the Keras conv's (or, where a ZeroPadding2D makes it, that
    padding's input: the converter may merge the two), then whose weights are nearest its
    exact fold. Without per-layer values (run None): by the weights alone."""
    scores = []
    for i, p in enumerate(arrays):
        exact = _exact_fold(p)
        for j, c in enumerate(convs):
            if c["weight"].shape == exact.shape:
                place = min(_nearest(_tensor(run, c["input"]), k) for k in keras_inputs[i]) if run else 0.0
                scores.append((place, _nearest(c["weight"], exact), i, j))
    found, used = [None] * len(arrays), set()
    for _, _, i, j in sorted(scores):
        if found[i] is None and j not in used:
            found[i] = convs[j]
            used.add(j)
    return found


SHAPE_MISMATCH = "the converted conv's input has shape"


def _as_keras_pads(x, p, ctx, keras):
    """The converted conv's input x (NHWC) padded as Keras pads it before its conv — by a
    ZeroPadding2D the converter merged into the conv (x is then that padding's input), then
    by the conv's own SAME or VALID — as NCHW, or (None, why not): with the Keras layer's
    geometry, a converted conv that pads otherwise (the far side for the near one) is seen."""
    conv_in = keras.get(id(ctx["conv"]), (None,))[0]
    pad = ctx["pad"]
    merged = conv_in is not None and x.shape != conv_in.shape
    if merged and pad is not None and id(pad) in keras and x.shape == keras[id(pad)][0].shape:
        (t, b), (left, r) = pad.padding
        x = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)))
    if conv_in is not None and x.shape != conv_in.shape:
        return None, (f"{SHAPE_MISMATCH} {list(x.shape)}, the Keras layer's {list(conv_in.shape)} (a padding or "
                      "reshape of its own outside the conv)")
    (sh, sw), (dh, dw), padding = p["geometry"]
    if sh != sw or dh != dw:
        return None, f"strides {(sh, sw)} / dilations {(dh, dw)} differ by axis: output not checked"
    if padding == "SAME":
        kh, kw = p["weight"].shape[2:]
        x = np.pad(x, ((0, 0), tfl.same_padding(x.shape[1], kh, sh, dh), tfl.same_padding(x.shape[2], kw, sw, dw),
                       (0, 0)))
    return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)), np.float32), None


def _check_output(p, ctx, keras, values, precision, threads):
    """diagnose of the converted conv's output on its own input, held to the Keras layer (its
    padding, stride, dilation), or (None, why not)."""
    x, y, why = values
    if why:
        return None, why
    xin, why = _as_keras_pads(x, p, ctx, keras)
    if why:
        return None, why
    (stride, _), (dilation, _), _ = p["geometry"]
    observed = np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2)))
    r = _commands.diagnose(xin, observed, weight=p["weight"], bias=p["bias"], gamma=p["gamma"], beta=p["beta"],
                           mean=p["mean"], var=p["var"], eps=p["eps"], stride=stride, padding=0,
                           dilation=dilation, precision=precision, threads=threads)
    return r, None


def _misplaced(x, ctx, keras, pool):
    """Why the converted conv's input is not the Keras conv's, or None: some other tensor of
    the Keras model (an op's output, the model's input) is strictly nearer it than the Keras
    conv's input (or that of a ZeroPadding2D merged into it). Nearest, not a tolerance."""
    if x is None:
        return None
    own = [keras[id(op)][0] for op in (ctx["conv"], ctx["pad"], *ctx["before"]) if op is not None and id(op) in keras]
    mine = min((_nearest(x, v) for v in own), default=math.inf)
    if math.isinf(mine):
        return None  # nothing of its shape to compare with: the shape check says so
    name, d = min(((n, _nearest(x, v)) for n, v in pool), key=lambda t: t[1], default=(None, math.inf))
    if d < mine:
        return f"the converted conv reads a tensor nearer Keras' {name} than the Keras conv's own input"
    return None


def _join(*notes):
    return "; ".join(n for n in notes if n) or None


def _mismatches(p, ctx, conv, keras):
    """How the converted conv computes something else than the Keras layer besides its
    numbers: its stride, dilation, output shape (with those equal, the same output shape is
    the same padding: SAME pads (out − 1)·stride + (K − 1)·dilation + 1 − in > 0 where VALID
    has one output fewer; a ZeroPadding2D the converter merged gives the same shape too), its
    fused activation."""
    out = []
    mine = (tuple(conv["stride"]), tuple(conv["dilation"]))
    if mine != p["geometry"][:2]:
        out.append(f"the converted conv has stride {mine[0]}, dilation {mine[1]}; the Keras layer "
                   f"{p['geometry'][0]}, {p['geometry'][1]}")
    keras_out = keras.get(id(ctx["conv"]), (None, None))[1]
    if keras_out is not None and conv["output_shape"] != tuple(keras_out.shape):
        out.append(f"the converted conv's output has shape {list(conv['output_shape'])}, the Keras layer's "
                   f"{list(keras_out.shape)} (padding {conv['padding']} against Keras' {p['geometry'][2]})")
    fused = tfl.ACTIVATIONS.get(conv["activation"], (str(conv["activation"]),))[0]
    if ctx["activation"] is not None and fused != ctx["activation"]:
        out.append(f"the converted conv applies {fused} after it; the Keras layer {ctx['activation']}")
    return out


def _absorbed(ctx, keras, values):
    """The ops next to the pair that the converter folded into this conv as well, each with
    whether that is known: [(where, op, True)] where the converted conv's input is nearer
    Keras' input of an op before than Keras' input of the conv (or of its ZeroPadding2D), or
    its output (before any fused activation) nearer Keras' output of the op after than of the
    BatchNorm; [(where, op, None)] for an op after the BatchNorm otherwise (the converter may
    fold the BatchNorm's scale into the conv and move its shift past a constant op after it),
    and for one before the conv that the values cannot tell: possibly folded. Nearest, not a
    tolerance: a folded constant multiply or add moves them by far more than rounding."""
    x, y, _ = values

    def distances(value, ops, k):
        return [_nearest(value, keras[id(op)][k]) if value is not None and id(op) in keras else math.inf
                for op in ops if op is not None]

    out: list[tuple[str, Any, bool | None]] = []
    for where, others, value, own, k in (("before", ctx["before"], x, (ctx["conv"], ctx["pad"]), 0),
                                         ("after", [ctx["after"]] if ctx["after"] else [], y, (ctx["bn"],), 1)):
        if not others:
            continue
        mine, theirs = min(distances(value, own, k)), distances(value, others, k)
        if min(theirs) < mine:  # folded: every op from the conv to the one whose value is nearest
            out += [(where, op, True) for op in others[:theirs.index(min(theirs)) + 1]]
        elif where == "after" or math.isinf(mine):  # after: it may have split it (the shift moved past the op)
            out.append((where, others[0], None))
    return out


def _unmodelled(absorbed):
    """The layer's unmodelled fact for of_layer (result/judgement.hpp LayerFacts): "surely"
    when the converter folded an op next to it into this conv as well (its values show it),
    "possibly" when it may have, else None."""
    if any(known for _, _, known in absorbed):
        return "surely"
    return "possibly" if absorbed else None


def _absorbed_note(absorbed, base, verdict):
    """Why a conv the converter folded more into (or may have) is not judged, or None: the
    ops, and for one it may have folded, the verdict without them (`base`) that of_layer made
    MISTRUSTED (foldcheck models conv + BatchNorm, + ReLU, ReLU6, only)."""
    def ops(which):
        return " and ".join(f"{op.name} ({type(op).__name__}, {where} the layer)" for where, op, known in absorbed
                            if known is which)

    if _unmodelled(absorbed) == "surely":
        return (f"the converter folded {ops(True)} into this conv as well (its values are nearer Keras' with it "
                "than without), which foldcheck does not model: not judged")
    if absorbed and verdict != base:  # of_layer did not judge it: its excess may be that op's
        return (f"beyond its bounds ({base}) next to {ops(None)}: if that is a constant multiply or add, the "
                "converter folded it into this conv as well, which foldcheck does not model; not judged")
    return None


def _check_layer(name, p, ctx, conv, keras, pool, run_state, precision, threads):
    flat, x_nhwc, run = run_state
    row = {"layer": name, "verdict": of_layer(), "weights": None, "output": None, "note": None}  # nothing judged
    if conv is None:
        row["note"] = "no conv of the converted model carries this layer's fold (its BatchNorm was not folded)"
        return row
    row.update(kind=conv["kind"], activation=tfl.ACTIVATIONS.get(conv["activation"], (str(conv["activation"]),))[0],
               weight_type=conv["weight_type"])
    row["weights"] = _commands.fold_check(p["weight"], p["bias"], conv["weight"], conv["bias"], gamma=p["gamma"],
                                          beta=p["beta"], mean=p["mean"], var=p["var"], eps=p["eps"],
                                          precision=precision, threads=threads)
    values = tfl.conv_values(flat, x_nhwc, run, conv) if run else \
        (None, None, "the interpreter's per-layer values are not its plain run's: output not checked")
    absorbed = _absorbed(ctx, keras, values)
    after_folded = any(w == "after" for w, _, k in absorbed if k)  # then the activation follows that op
    wrong = _mismatches(p, {**ctx, "activation": None} if after_folded else ctx, conv, keras)
    wrong += [w for w in [_misplaced(values[0], ctx, keras, pool)] if w]
    if values[2] and values[2].startswith(tfl.DEAD):
        wrong.append("nothing in the converted model uses this conv's output; Keras uses its layer's")
    if values[0] is not None and not wrong:
        shape_why = _as_keras_pads(values[0], p, ctx, keras)[1]
        wrong += [shape_why] if shape_why and shape_why.startswith(SHAPE_MISMATCH) else []
    row["output"], row["note"] = _check_output(p, ctx, keras, values, precision, threads) if not wrong else \
        (None, "output not checked")
    if conv["weight_type"] != "float32":
        row["note"] = _join(f"weights stored in {conv['weight_type']} (the converter's quantization): held to "
                            "float32's bounds, which quantization leaves by design", row["note"])
    results = [r for r in (row["weights"], row["output"]) if r is not None]
    facts = (row["weights"].verdict, None if row["output"] is None else row["output"].verdict)
    base = of_layer(*facts)  # the layer's numbers alone
    if base == Verdict.MISTRUSTED:  # say why here: the table shows verdicts, not reasons
        row["note"] = _join(row["note"], *(f"{r.command}: {r.get('summary') or r.get('reasoning')}"
                                           for r in results if r.verdict == Verdict.MISTRUSTED))
    # The converted layer not the Keras layer is evidence, whatever its values (UNEXPECTED); an
    # op beside it the converter folded in too leaves it not judged (of_layer's policy).
    row["verdict"] = of_layer(*facts, not_the_layer=bool(wrong), unmodelled=_unmodelled(absorbed))
    note = None if wrong else _absorbed_note(absorbed, base, row["verdict"])
    row["note"] = _join(*wrong, note, row["note"])
    return row


# Names TensorFlow takes everywhere the converter puts them (scopes, variable paths, signature
# arguments); outside them (a space, '卷积', a bidi control, a leading '_' or '>'), Keras 3's
# export refuses the model and the converter's fallback fails inside with "TypeError:
# 'NoneType' object is not callable". Not a rule of its own: used to name the likely cause
# when the converter fails.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _unusual_names(model):
    """The model's names outside _PLAIN_NAME, as "layer 'conv 1'" (repr: controls escaped)."""
    named = [("model", model.name)] + [("input", getattr(t, "name", "")) for t in getattr(model, "inputs", None) or []]
    named += [("nested model" if isinstance(op, tf.keras.Model) else "layer", op.name)
              for op in _layers_and_models(model)]
    return [f"{what} {name!r}" for what, name in named if not _PLAIN_NAME.fullmatch(str(name))]


def _layers_and_models(model):
    """Every layer of the model and every model nested in it."""
    for layer in model.layers:
        yield layer
        if isinstance(layer, tf.keras.Model):
            yield from _layers_and_models(layer)


def _converted(model, fn):
    """convert's work; a failure of the converter is a ValueError naming the model (and the
    names it likely failed on), never TensorFlow's exception from inside."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Keras prints the exported signature
            return bytes(converter.convert())
    except Exception as e:  # the converter raises many kinds, from deep inside: re-raised as one
        names = _unusual_names(model)
        cause = (f"; likely its names, which TensorFlow does not take (ASCII letters, digits, '_', '.', '-' "
                 f"only, not first '_' or '-'): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} (rename "
                 "them)") if names else ""
        said = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e).strip().split("\n")[0][:200])
        raise ValueError(f"{fn}: model {model.name!r}: the TFLite converter cannot convert it ({type(e).__name__}"
                         f"{': ' + said if said else ''}){cause}; or convert it yourself and give tflite=") from e


def convert(model: Any) -> bytes:
    """The TFLite converter's model of `model`, default options (the flatbuffer's bytes).
    model: a built Keras model (TypeError otherwise); a model the converter cannot convert is
    a ValueError naming it (and the names it likely failed on)."""
    return _converted(keras_model(model, "convert"), "convert")


def _flatbuffer(tflite, fn):
    """The converted model a user gave (bytes, or a .tflite file's path) as bytes, refused by
    name unless it is a TFLite flatbuffer (identifier "TFL3" at byte 4): TFLite's own errors
    for b"" or 5 (read as five zero bytes) name no argument."""
    if isinstance(tflite, (str, os.PathLike)):
        try:
            with open(tflite, "rb") as f:
                flat = f.read()
        except OSError as e:
            raise ValueError(f"{fn}: tflite: cannot read {os.fspath(tflite)!r} ({e.strerror or e})") from e
    elif isinstance(tflite, (bytes, bytearray, memoryview)):
        flat = bytes(tflite)
    else:
        raise TypeError(f"{fn}: tflite must be the converted model (bytes) or a .tflite file's path, got "
                        f"{shown(tflite)}")
    if len(flat) < 8 or flat[4:8] != b"TFL3":
        raise ValueError(f"{fn}: tflite is not a TFLite model (a flatbuffer with the identifier TFL3 at byte 4): "
                         f"{len(flat)} bytes" + (f" starting {flat[:8]!r}" if flat else ""))
    return flat


def _taken_by(x):
    """x as float32 NHWC, refused (ValueError) unless it is 4-D, real and finite."""
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise ValueError(f"check_tflite: x must be real numbers, got dtype {a.dtype}")
    x = np.ascontiguousarray(a, np.float32)
    if x.ndim != 4:
        raise ValueError(f"check_tflite: x must be one NHWC input (4-D), got shape {list(x.shape)}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:  # as the command line refuses it: nothing downstream would be a comparison
        raise ValueError(f"check_tflite: x has {'NaN' if np.isnan(x.flat[bad[0]]) else 'an infinity'} at index "
                         f"{int(bad[0])}")
    return x


def _keras_values(model, x, pairs):
    """Every op's input and output as Keras computes them on x, by id (also refusing, as
    ValueError, an x the Keras model does not run on: TFLite's kernels do not all check a
    shape), and the pool of the model's tensors: [(name, value)] of x and every op's output."""
    ops = list(all_ops(model)) + [op for c, b, ctx in pairs for op in (c, b, *ctx["before"], ctx["after"], ctx["pad"])
                                  if op is not None]
    try:
        seen = record(model, x, ops)
    except Exception as e:  # Keras raises many kinds for a shape it does not take
        raise ValueError(f"check_tflite: the Keras model does not run on x of shape {list(x.shape)}: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    names = {id(op): op.name for op in ops}
    pool = [("input", x)] + [(f"{names[i]} output", v[1]) for i, v in seen.items() if v[1] is not None]
    return seen, pool


def check_tflite(model: Any, x: Any, *, tflite: bytes | str | os.PathLike[str] | None = None, eps: float | None = None,
                 precision: int = _commands.DIAGNOSE["precision"],
                 threads: int = _commands.DIAGNOSE["threads"]) -> "TFLiteCheck":
    """Is the TFLite converter's fold of every conv + BatchNorm of `model` correct, layer by
    layer, on input `x`? (see the module's documentation)

    model: a built Keras model (functional or Sequential, channels last; nested models are
    searched); x: one input, NHWC float32, as the model takes it; tflite: the converted model
    (bytes or a path to a .tflite), default: converted here with the converter's default
    options. eps: the BatchNorm epsilon the layers are held to, default each Keras layer's own
    (Keras' default is 1e-3); give 1e-5 to ask whether a model ported from PyTorch computes
    what PyTorch's layers did (diagnose then names eps_mismatch and recovers the eps the
    model used). Returns a TFLiteCheck (.verdict, .layers, .unexpected, .skipped, .report())."""
    # Every argument refused by name before anything runs (model, tflite here; eps, precision
    # and threads by the core's one conversion of numbers, scalars.hpp; x by _taken_by).
    keras_model(model, "check_tflite")
    given = None if tflite is None else _flatbuffer(tflite, "check_tflite")
    held: float | None = None if eps is None else _core.number(eps, "eps", 0.0, True)
    _core.reference_options(precision, threads)
    x_nhwc = _taken_by(x)
    pairs, skipped = conv_bn_pairs(model)
    keras, pool = _keras_values(model, x_nhwc, pairs)
    for c, b, ctx in pairs:
        ctx.update(conv=c, bn=b)
    flat = given if given is not None else _converted(model, "check_tflite")
    arrays: list[dict[str, Any]] = [keras_layer(c, b) for c, b, _ in pairs]
    p: dict[str, Any]
    for p in arrays if held is not None else ():
        p["eps"] = held
    run = tfl.per_layer_run(flat, x_nhwc)
    convs = tfl.converted_convs(flat, run or tfl.run(flat, x_nhwc))
    keras_inputs = {i: [keras.get(id(op), (None,))[0] for op in (c, ctx["pad"]) if op is not None]
                    for i, (c, _, ctx) in enumerate(pairs)}
    rows = [_check_layer(f"{c.name} + {b.name}", p, ctx, conv, keras, pool, (flat, x_nhwc, run), precision, threads)
            for (c, b, ctx), p, conv in zip(pairs, arrays, _match(arrays, keras_inputs, convs, run))]
    return TFLiteCheck(rows, skipped)


class TFLiteCheck(Result):
    """check_tflite's result. .layers: [{"layer": "conv + batchnorm", "verdict", "kind",
    "activation", "weight_type", "weights": FoldCheckResult, "output": DiagnoseResult or None,
    "note"}]; .skipped: [(BatchNorm, why not judged, whether the converter may have folded
    it)]; the verdict is the worst judged layer's (MISTRUSTED when no pair was judged; the
    answer counts the pairs the converter may have folded that were not judged). A Result made
    of the core's results per layer (no one core result of its own): its text report is answer
    first ("check_tflite: VERDICT: why"), then the table of layers."""

    def __init__(self, layers: list[dict[str, Any]],  # noqa: F811 (the parameter, not the helper)
                 skipped: list[tuple[Any, str, bool]]) -> None:
        super().__init__(None)
        self.layers = layers
        self.skipped = skipped

    @property
    def command(self) -> str:
        return "check_tflite"

    @property
    def verdict(self) -> Verdict:
        return tally(r["verdict"] for r in self.layers)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def unexpected(self) -> list[dict[str, Any]]:
        return [r for r in self.layers if Verdict(r["verdict"]) is not Verdict.EXPECTED]

    def to_dict(self) -> dict[str, Any]:
        def part(r: Any) -> Any:
            return None if r is None else r.to_dict()

        return {"command": "check_tflite", "verdict": self.verdict,
                "layers": [{**r, "weights": part(r["weights"]), "output": part(r["output"])} for r in self.layers],
                "skipped": [{"batchnorm": b, "reason": why, "may_be_folded": folded}
                            for b, why, folded in self.skipped]}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @property
    def reason(self) -> str | None:
        return f"{_headline(self)}{_not_judged(self)}"

    def answer(self) -> str:
        return _core.neutralised(f"check_tflite: {self.verdict}: {self.reason}")

    def report(self, format: str = "text") -> str:  # noqa: A002 (the CLI's word)
        if format == "json":
            return self.to_json(2)
        if format != "text":
            raise ValueError(f"check_tflite reports text or json, not {format!r}")
        return "\n".join([self.answer(), self.details()])

    def details(self) -> str:
        return _table(self)

    @property
    def arrays(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"<TFLiteCheck {self.verdict} layers: {len(self.layers)}>"


def _cell(r, key):
    """A result's verdict, worst ratio to its bound and what is closest ("inf"/"nan" as the
    JSON gives a ratio that is not finite)."""
    if r is None:
        return "-"
    v = r.to_dict()
    ratio = v.get("worst_ratio") if key == "fold" else (v.get("as_given") or {}).get("max_ratio_to_bound")
    best = v.get("best") if key == "output" else v.get("closest_recipe")
    shown = "" if ratio is None else f" {ratio:.3g}" if isinstance(ratio, (int, float)) else f" {ratio}"
    return f"{r.verdict}{shown}" + (f" ({best})" if best else "")


def _headline(c):
    n = len(c.layers)
    layers_ = f"{n} conv + BatchNorm layer{'s' if n != 1 else ''}"
    unchecked = sum(r["output"] is None for r in c.layers)
    what = "folded weights and bias, and the layer's output on its own input" if not unchecked else \
        f"folded weights and bias; the output of {unchecked} of them not checked, see the notes"
    if c.verdict is Verdict.EXPECTED:
        return f"{'the' if n == 1 else 'each of the'} {layers_} the converter folded is within its rounding-error " \
               f"bounds ({what})"
    if c.verdict is Verdict.MISTRUSTED:
        not_judged = sum(Verdict(r["verdict"]) is Verdict.MISTRUSTED for r in c.layers)
        return f"{not_judged} of {layers_} not judged (see the notes)" if n else "no conv + BatchNorm layer to judge"
    return f"{len(c.unexpected)} of {layers_} beyond their rounding-error bounds, or not what Keras computes"


def _not_judged(c):
    n = sum(folded for _, _, folded in c.skipped)
    return f"; {n} more conv + BatchNorm pair{'s' if n != 1 else ''} the converter may have folded not judged " \
           "(not modelled, below)" if n else ""


def _table(c):
    """The layers, one row each (and its note), then the pairs not judged; each line neutralised
    (lines_for_people: a layer or op name holding ESC or a line break cannot drive the terminal or
    break the table), the names before padding so that the columns line up."""
    width = max([len(_core.neutralised(r["layer"])) for r in c.layers] + [5])
    lines = ["  worst |error| / bound per layer; weights: the nearest recipe's; output: the layer as given, or the "
             "bug that explains it",
             f"  {'layer':<{width}}  {'op':<24} {'weights':<32} output"]
    for r in c.layers:
        op = f"{r.get('kind', '-')}" + (f"+{r['activation']}" if r.get("activation") not in (None, "NONE") else "")
        lines.append(f"  {_core.neutralised(r['layer']):<{width}}  {op:<24} {_cell(r['weights'], 'fold'):<32} "
                     f"{_cell(r['output'], 'output')}")
        if r["note"]:
            lines.append(f"    note: {r['note']}")
    lines += [f"  not judged: {b}: {why}" for b, why, _ in c.skipped]
    return lines_for_people(lines)


def _input_for(model, path, seed):
    """x from an .npy (NHWC), or drawn from a seeded normal in the model's input shape (batch
    1 where it is free); refuses a model of several inputs or free spatial sizes."""
    if path:
        return np.load(path, allow_pickle=False)
    if len(model.inputs) != 1:
        raise ValueError(f"the model has {len(model.inputs)} inputs; give one with --input")
    shape = [1 if d is None and i == 0 else d for i, d in enumerate(model.inputs[0].shape)]
    if any(d is None for d in shape):
        raise ValueError(f"the model's input shape {tuple(model.inputs[0].shape)} has free sizes; give --input")
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m foldcheck.keras MODEL.keras [--input X.npy | --seed S] [--tflite M.tflite]
    [--eps E] [--format text|json]: check_tflite from the command line; exit 0 EXPECTED,
    1 anything else, 2 bad input."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m foldcheck.keras", description=(
        "Is the TFLite converter's fold of every conv + BatchNorm of a Keras model correct, layer by layer? "
        "Exit 0 EXPECTED, 1 SUSPICIOUS/UNEXPECTED/MISTRUSTED, 2 bad input."))
    ap.add_argument("model", help="a Keras model (.keras or .h5, as tf.keras.models.load_model reads it)")
    ap.add_argument("--input", help="the model's input, NHWC float32 .npy (default: seeded normal, batch 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the default input (default 0)")
    ap.add_argument("--tflite", help="the converted model (default: converted here, the converter's defaults)")
    ap.add_argument("--eps", type=float, help="the BatchNorm epsilon to hold the layers to (default: each layer's)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    a = ap.parse_args(argv)
    try:  # a file that is not what its flag says: bad input, whatever the reader raised
        model = tf.keras.models.load_model(a.model, compile=False)
        x = _input_for(model, a.input, a.seed)
    except Exception as e:  # noqa: BLE001
        ap.exit(2, f"python -m foldcheck.keras: error: {type(e).__name__}: {e}\n")
    try:
        r = check_tflite(model, x, tflite=a.tflite, eps=a.eps)
    except (OSError, ValueError, TypeError, RuntimeError) as e:  # a refused input (foldcheck.InputError too)
        ap.exit(2, f"python -m foldcheck.keras: error: {type(e).__name__}: {e}\n")
    if not a.input and a.format == "text":
        print(f"input: seeded normal {list(x.shape)}, seed {a.seed}")
    print(r.report(a.format))
    return r.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
