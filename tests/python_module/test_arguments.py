"""Every scalar argument of every function, given each wrong kind, is refused in one line naming
the argument, what was given and what is accepted (python/src/scalars.hpp, the one conversion);
the right kinds in numpy's forms (a numpy integer, a numpy float, a 0-d array) are accepted.

Before the conversion layer: threads=-1, seed=-1, precision=None, recipe=None raised pybind11's
TypeError listing the whole C++ signature; threads=True ran on 1 thread; diagnose(dilation=1.7)
ran with dilation 1; accuracy_diff(output_samples=0) was accepted (the command takes 2 to 4096);
check_tflite(eps=np.array(1e-3)) was refused. Refusals are checked before any work is done, so
the calls below are fast.
"""
import numpy as np
import pytest

import foldcheck
from foldcheck import _commands, _core

ONE = np.ones((2, 1, 1, 1), np.float32)
CH = np.ones(2, np.float32)
BN = dict(gamma=CH, beta=CH * 0, mean=CH * 0, var=CH)


def _explain(**kw):
    return foldcheck.explain(np.float32([2.1122932]), np.float32([2.1122828]), **kw)


def _diagnose(**kw):
    x = np.ones((1, 1, 3, 3), np.float32)
    return foldcheck.diagnose(x, x, weight=np.ones((1, 1, 1, 1), np.float32), gamma=1.0, **kw)


def _fold_check(**kw):
    return foldcheck.fold_check(ONE, CH, ONE, CH, **BN, **kw)


def _diagnose_fold(**kw):
    e = foldcheck.explain(ONE, ONE, **BN)
    return _commands.diagnose_fold(e, ONE, CH, ONE, CH, **BN, **kw)


def _quant_check(**kw):
    return foldcheck.quant_check(ONE, **BN, **kw)


def _run(root):
    return lambda **kw: foldcheck.run(root / "cases" / "tvm_thread.json", **kw)


def _accuracy_diff(root):
    return lambda **kw: foldcheck.accuracy_diff(root / "cases" / "models" / "fixture" / "model.onnx", **kw)


def _engines(root):
    return lambda **kw: foldcheck.engines(root / "cases" / "models" / "fixture" / "model.onnx", [], **kw)


def _bisect(root):
    return lambda **kw: foldcheck.bisect(root / "cases" / "tvm_thread.json", **kw)


# Each function's scalar arguments by kind: int (a range), "int?" (None allowed), float, "float?",
# bool, str, "str?". A valid value of each, for the accepted forms.
ARGS = {
    "explain": (_explain, {"precision": ("int", 64), "threads": ("int", 1), "eps": ("float?", 1e-5),
                           "dtype": ("str?", "float32")}),
    "diagnose": (_diagnose, {"stride": ("int", 1), "padding": ("int?", 0), "dilation": ("int", 1),
                             "eps": ("float?", 1e-5), "precision": ("int", 64), "threads": ("int", 1)}),
    "fold_check": (_fold_check, {"eps": ("float?", 1e-5), "precision": ("int", 64), "threads": ("int", 1)}),
    "diagnose_fold": (_diagnose_fold, {"eps": ("float?", 1e-5)}),
    "quant_check": (_quant_check, {"eps": ("float?", 1e-5), "bits": ("int", 8), "per_channel": ("bool", True),
                                   "pow2": ("bool", False), "rounding": ("str", "half_even"),
                                   "precision": ("int", 64), "threads": ("int", 1)}),
    "run": (_run, {"seed": ("int?", 3), "attribution": ("bool", False), "attribution_elements": ("int", 10),
                   "precision": ("int", 64), "threads": ("int", 1)}),
    "accuracy_diff": (_accuracy_diff, {"seed": ("int", 3), "output_samples": ("int", 4),
                                       "weights_only": ("bool", True), "recipe": ("str", "pytorch"),
                                       "attribution": ("bool", False), "attribution_elements": ("int", 10),
                                       "confidence": ("float", 0.9), "precision": ("int", 64),
                                       "threads": ("int", 1)}),
    "engines": (_engines, {"seed": ("int", 3), "confidence": ("float", 0.9), "channel_samples": ("int", 2),
                           "output_samples": ("int", 2), "timeout": ("float", 5.0), "precision": ("int", 64),
                           "threads": ("int", 1)}),
    "bisect": (_bisect, {"opt_level": ("int?", 2), "mode": ("str", "linear"), "threshold_ulp": ("float?", 2.0),
                         "dtype": ("str?", "float32"), "seed": ("int", 3), "timeout": ("float", 5.0),
                         "precision": ("int", 64), "threads": ("int", 1)}),
}
NEEDS_ROOT = {"run", "accuracy_diff", "engines", "bisect"}


def _wrong(kind):
    """The wrong values of an argument of `kind`."""
    base = kind.rstrip("?")
    wrong = {"str_for_number": "3", "list": [1, 2], "array": np.array([1.0, 2.0])}
    if not kind.endswith("?"):
        wrong["none"] = None
    if base == "int":
        wrong |= {"bool": True, "numpy_bool": np.bool_(True), "float": 1.7, "integral_float": 2.0, "negative": -1,
                  "numpy_float": np.float64(2.0), "huge": 2**70}
    elif base == "float":
        wrong |= {"bool": True, "nan": float("nan"), "inf": float("inf"), "complex": 1 + 0j}
    elif base == "bool":
        wrong |= {"int": 1, "zero": 0, "str": "yes"}
    else:
        wrong = {"int": 3, "bytes": b"x"} | ({} if kind.endswith("?") else {"none": None})
    return wrong


def _accepted(kind, valid):
    """numpy's forms of a valid value of `kind`."""
    base = kind.rstrip("?")
    if base == "int":
        return {"numpy_integer": np.int64(valid), "zero_d_array": np.array(valid), "numpy_uint": np.uint16(valid)}
    if base == "float":
        return {"numpy_float": np.float32(valid), "zero_d_array": np.array(valid), "numpy_float64": np.float64(valid)}
    if base == "bool":
        return {"numpy_bool": np.bool_(valid)}
    return {}


CASES = [(f, a, kind, valid) for f, (_, args) in ARGS.items() for a, (kind, valid) in args.items()]


def _call(function, root):
    make = ARGS[function][0]
    return make(root) if function in NEEDS_ROOT else make


@pytest.mark.parametrize("function, argument, kind, valid", CASES, ids=[f"{f}-{a}" for f, a, _, _ in CASES])
def test_every_wrong_kind_is_refused_naming_the_argument(function, argument, kind, valid, root):
    call = _call(function, root)
    for label, value in _wrong(kind).items():
        with pytest.raises(ValueError) as e:
            call(**{argument: value})
        message = str(e.value)
        assert message.startswith(f"{argument}:"), (label, message)
        assert "\n" not in message and "(self" not in message and "Invoked with" not in message, (label, message)
        if argument not in ("eps",) or not isinstance(value, (list, np.ndarray)):
            assert "must be" in message and repr(value)[:12] in message, (label, message)


@pytest.mark.parametrize("function, argument, kind, valid", CASES, ids=[f"{f}-{a}" for f, a, _, _ in CASES])
def test_numpy_forms_of_a_right_value_are_accepted(function, argument, kind, valid, root):
    # The argument is taken; a later one (precision, converted after every other) is then
    # refused, so no work is done. threads is last: there the call runs (fast functions only).
    call = _call(function, root)
    for label, value in _accepted(kind, valid).items():
        if argument == "threads":
            if function in NEEDS_ROOT:
                continue
            call(**{argument: value})
            continue
        later = "threads" if argument == "precision" else "precision"
        if later not in ARGS[function][1]:  # diagnose_fold: eps is its only scalar
            call(**{argument: value})
            continue
        with pytest.raises(ValueError) as e:
            call(**{argument: value, later: "bad"})
        assert str(e.value).startswith(f"{later}:"), (label, str(e.value))


def test_ranges_are_the_commands():
    with pytest.raises(foldcheck.InputError,
                       match=r"^output_samples: must be an integer from 2 to 4096, got 0 \(int\)$"):
        foldcheck.accuracy_diff("model.onnx", output_samples=0)
    with pytest.raises(foldcheck.InputError, match=r"^threads: must be an integer from 0 to 1024, got True \(bool\)$"):
        _explain(threads=True)
    with pytest.raises(foldcheck.InputError, match=r"^dilation: must be an integer from 1 to 1048576, got 1.7"):
        _diagnose(dilation=1.7)
    assert _core.number(np.array(1e-3), "eps", 0.0, True) == pytest.approx(1e-3)


# Issue 40: the engines' names, own adapters and Python, and bisect's pass lists, refused by
# name before anything runs. Before: engines(m, [None]) and python=123 raised pybind11's
# TypeError listing the C++ signature, engines(m, 5) list()'s TypeError, adapters=[...] an
# AttributeError; adapters={"e": None} (or bytes) ran the shell command "None" (b'...'), and a
# label holding '=' ran as label 'a' with command "b=CMD".
def _engines_call(root):
    """engines on the fixture model."""
    model = root / "cases" / "models" / "fixture" / "model.onnx"
    return lambda *names, **kw: foldcheck.engines(model, *names, **kw)


ENGINES_REFUSED = [
    ("names-none", ([None],), {}, "engines[0]: must be a str, got None (NoneType)"),
    ("names-int", (5,), {}, "engines: must be a str or a list of str, got 5 (int)"),
    ("names-bytes", ([b"onnxruntime"],), {}, "engines[0]: must be a str"),
    ("names-second", (["onnxruntime", 3],), {}, "engines[1]: must be a str, got 3 (int)"),
    ("adapters-list", ((),), {"adapters": ["a=true"]}, "adapters: must be a dict of str to str, got ['a=true'] (list)"),
    ("adapters-none-value", ((),), {"adapters": {"e": None}}, "adapters['e']: must be a str, got None (NoneType)"),
    ("adapters-bytes-value", ((),), {"adapters": {"e": b"touch MARK"}}, "adapters['e']: must be a str, got b'touch"),
    ("adapters-int-key", ((),), {"adapters": {3: "touch MARK"}}, "adapters (a key): must be a str, got 3 (int)"),
    ("adapters-label-eq", ((),), {"adapters": {"a=b": "touch MARK"}}, "`adapters` 'a=b': a label holds no '='"),
    ("adapters-label-empty", ((),), {"adapters": {"": "touch MARK"}}, "`adapters` '': a label is empty or blank"),
    ("adapters-label-blank", ((),), {"adapters": {" \t": "touch MARK"}}, "a label is empty or blank"),
    ("adapters-label-newline", ((),), {"adapters": {"a\nb": "touch MARK"}},
     "`adapters` 'a\\x0ab': a label holds no control characters"),
    ("adapters-command-blank", ((),), {"adapters": {"a": "  "}}, "`adapters` 'a': its command is empty or blank"),
    ("adapters-command-nul", ((),), {"adapters": {"a": "true\0touch MARK"}},
     "adapters['a']: must be a str without NUL characters"),
    ("python-int", ((),), {"adapters": {"a": "touch MARK"}, "python": 123}, "python: must be a str, got 123 (int)"),
    ("python-missing", ((),), {"adapters": {"a": "touch MARK"}, "python": "/no/such/python"},
     "python: /no/such/python: not a file"),
    ("python-empty", ((),), {"adapters": {"a": "touch MARK"}, "python": ""}, "python: : not a file"),
]


@pytest.mark.parametrize("label, args, kw, message", ENGINES_REFUSED, ids=[c[0] for c in ENGINES_REFUSED])
def test_engines_refuses_each_wrong_engine_adapter_and_python_by_name(root, tmp_path, label, args, kw, message):
    mark = tmp_path / "ran"
    if "adapters" in kw and isinstance(kw["adapters"], dict):
        kw = {**kw, "adapters": {k: v.replace("MARK", str(mark)) if isinstance(v, str) else v
                                 for k, v in kw["adapters"].items()}}
    with pytest.raises(ValueError) as e:
        _engines_call(root)(*args, **kw)
    text = str(e.value)
    assert message in text, (label, text)
    assert "\n" not in text and "Invoked with" not in text and "(self" not in text, (label, text)
    assert not mark.exists(), label  # refused before anything ran


def test_engines_takes_a_name_a_tuple_and_a_path_python(root, tmp_path):
    # The accepted forms are not refused: a str is one name; a tuple a list; a PathLike python.
    import pathlib  # noqa: PLC0415

    mark = tmp_path / "ran"
    adapter = {"mine": f"touch {mark}"}
    for names in ("nosuch", ("nosuch",)):
        with pytest.raises(ValueError, match="unknown engine 'nosuch'"):
            _engines_call(root)(names, adapters=adapter, python=pathlib.Path(foldcheck.__file__))
    r = _engines_call(root)(adapters=adapter, timeout=30)
    assert mark.exists() and r.verdict == "MISTRUSTED"  # it ran: no manifest


@pytest.mark.parametrize("argument", ["passes", "disabled"])
def test_bisect_refuses_pass_lists_by_name(root, argument):
    for value, message in ((5, f"{argument}: must be a str or a list of str, got 5 (int)"),
                           ([None], f"{argument}[0]: must be a str, got None (NoneType)"),
                           (["A", b"B"], f"{argument}[1]: must be a str")):
        with pytest.raises(ValueError) as e:
            foldcheck.bisect(root / "cases" / "tvm_thread.json", **{argument: value})
        assert message in str(e.value) and "Invoked with" not in str(e.value), (value, str(e.value))


# Issue 40: `progress` that is not callable was called at the run's first status line, raising
# "TypeError: 'int' object is not callable" from inside it (check_model only after its exports).
@pytest.mark.parametrize("bad", [3, "print", [print]], ids=["int", "str", "list"])
@pytest.mark.parametrize("make", [_run, _accuracy_diff, _engines, _bisect])
def test_progress_that_is_not_callable_is_refused_by_name_before_the_run(root, make, bad):
    with pytest.raises(TypeError, match=r"^progress: must be a callable taking a status line \(str\), or None; "
                                        rf"got {type(bad).__name__}$"):
        make(root)(progress=bad)


def test_check_models_progress_is_refused_before_anything_is_exported():
    torch = pytest.importorskip("torch")
    import foldcheck.torch as fct  # noqa: PLC0415

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    with pytest.raises(TypeError, match="^progress: must be a callable"):
        fct.check_model(model, torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), torch.randn(1, 3, 8, 8), progress=3)


@pytest.mark.parametrize("where", ["file", "under_a_file", "proc"])
def test_check_models_keep_dir_that_cannot_be_a_directory_is_refused_by_name(tmp_path, where):
    """keep_dir naming a file, a path under a file, or a place no directory can be made: a
    ValueError naming keep_dir, not os.makedirs' raw FileExistsError/NotADirectoryError."""
    torch = pytest.importorskip("torch")
    import foldcheck.torch as fct  # noqa: PLC0415

    (tmp_path / "f").write_text("x")
    keep = {"file": tmp_path / "f", "under_a_file": tmp_path / "f" / "d", "proc": "/proc/foldcheck-none/d"}[where]
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    with pytest.raises(ValueError, match="^check_model: keep_dir .* is not a directory it can make or use"):
        fct.check_model(model, torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), torch.randn(1, 3, 8, 8), keep_dir=keep)
