"""`import foldcheck`: the commands as functions, their typed results, arrays in and out, errors,
the GIL and progress.

What it guards: each function's result is the `foldcheck` command's (the same JSON, timing
aside, and the same verdict); per-element data are read-only numpy views of the result's memory;
float16 / bfloat16 / float32 / float64 arrays and torch tensors go in; bad arguments raise
foldcheck.InputError naming the argument; long work runs with the GIL released, reports
progress, and stops when the progress callable raises."""
import json
import subprocess
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import foldcheck
from foldcheck import _core

TVM_ORIGINAL = np.array([2.1122932], dtype=np.float32)
TVM_OBSERVED = np.array([2.1122828], dtype=np.float32)


def cli_json(foldcheck_bin, *args):
    p = subprocess.run([foldcheck_bin, *args, "--format", "json", "--no-timing"], capture_output=True, text=True)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout), p.returncode


def test_explain_tvm_seed_is_the_commands_result(foldcheck_bin):
    r = foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED)
    assert r.verdict == "EXPECTED" and r.passed and r.exit_code == 0
    assert "tvm" in r.bit_exact_recipes
    assert abs(r.residual_ulp[0]) < 0.6
    cli, code = cli_json(foldcheck_bin, "explain", "--original", "2.1122932", "--observed", "2.1122828")
    assert r.to_dict() == cli and code == r.exit_code
    assert json.loads(r.to_json()) == cli and "verdict: EXPECTED" in r.report()


def test_explain_arrays_are_read_only_views_of_the_result():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(8, 3, 3, 3)).astype(np.float32)
    gamma, var = rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.uniform(0.2, 2, 8).astype(np.float32)
    folded = (w * (gamma / np.sqrt(var + np.float32(1e-5))).reshape(-1, 1, 1, 1)).astype(np.float32)
    r = foldcheck.explain(w, folded, gamma=gamma, var=var)
    a, b = r.residual_ulp, r.arrays["residual_ulp"]
    assert a.shape == w.shape and r.bound_ulp.shape == w.shape and r.exact.shape == w.shape
    assert np.shares_memory(a, b) and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0, 0, 0] = 1
    assert np.all(np.abs(r.residual_ulp) <= r.bound_ulp)
    del r  # the views keep the result alive
    assert np.isfinite(a).all()


def test_explain_names_a_corrupted_channel():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(16, 4, 3, 3)).astype(np.float32)
    folded = (w / np.sqrt(np.float32(1 + 1e-5))).astype(np.float32)
    folded[5] *= np.float32(1 + 20e-6)
    r = foldcheck.explain(w, folded)
    assert r.verdict == "UNEXPECTED" and r.exit_code == 1
    worst = np.unravel_index(np.argmax(np.abs(r.residual_ulp) / r.bound_ulp), w.shape)
    assert worst[0] == 5


def test_fold_check_text_is_answer_first_from_the_core():
    # The answer names the verdict, the closest recipe's ratio and channel; then one row per
    # recipe and the bound — the core's renderer (reports/fold_check_text.cpp), never raw JSON.
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ones, zeros = np.ones(4, np.float32), np.zeros(4, np.float32)
    folded = (w / np.sqrt(np.float32(1 + 1e-5))).astype(np.float32)
    ok = foldcheck.fold_check(w, None, folded, gamma=ones, beta=zeros, mean=zeros, var=ones)
    assert ok.verdict == "EXPECTED"
    assert str(ok).splitlines()[0].startswith("verdict: EXPECTED: every folded weight and bias within pytorch's")
    folded[1] *= np.float32(1.001)
    bad = foldcheck.fold_check(w, None, folded, gamma=ones, beta=zeros, mean=zeros, var=ones)
    text = str(bad)
    assert text.splitlines()[0].startswith("verdict: UNEXPECTED: the folded values are ")
    assert "(worst at channel 1, in the weights)" in text.splitlines()[0]
    assert "{" not in text and text.count("verdict: ") == 1
    rows = [line.split()[0] for line in text.splitlines() if line.endswith("UNEXPECTED")]
    assert rows == ["pytorch", "tvm", "onnxruntime", "onnxoptimizer"]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_explain_takes_every_dtype(dtype):
    w = np.array([0.5, -1.25, 2.0, 0.375], dtype=dtype)
    scale = 1 / np.sqrt(1 + 1e-5)
    folded = (w.astype(np.float64) * scale).astype(dtype)
    r = foldcheck.explain(w, folded)
    assert r["dtype"] == np.dtype(dtype).name and r.verdict == "EXPECTED"


def test_explain_takes_torch_tensors():
    torch = pytest.importorskip("torch")
    w = torch.randn(4, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    r = foldcheck.explain(w, w * torch.rsqrt(torch.tensor(1 + 1e-5)))
    assert r.verdict == "EXPECTED"
    rb = foldcheck.explain(w.bfloat16(), (w.double() / (1 + 1e-5) ** 0.5).bfloat16())
    assert rb["dtype"] == "bfloat16" and rb.verdict == "EXPECTED"


@pytest.mark.parametrize("call, field", [
    (lambda: foldcheck.explain([1.0, 2.0], [1.0]), "observed"),
    (lambda: foldcheck.explain(np.array([np.nan], np.float32), np.array([1], np.float32)), "original"),
    (lambda: foldcheck.explain(np.array([0.1]), np.array([0.1]), dtype="float32"), "original"),
    (lambda: foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED, var=-1.0), "BatchNorm"),
    (lambda: foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED, dtype="float8"), "float8"),
    (lambda: foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED, precision=8), "precision"),
    (lambda: foldcheck.explain(np.zeros(2, np.complex64), np.zeros(2, np.complex64)), "original"),
])
def test_bad_arguments_raise_input_error_naming_them(call, field):
    with pytest.raises((foldcheck.InputError, TypeError)) as e:
        call()
    assert field in str(e.value)
    assert issubclass(foldcheck.InputError, ValueError)


def test_diagnose_the_pytorch_seed_training_mode():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    bn = torch.nn.BatchNorm2d(8)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(8, generator=g) * 0.1)
        bn.running_var.copy_(torch.rand(8, generator=g) + 0.5)
    x = torch.randn(4, 8, 6, 6, generator=g)
    observed = bn.train()(x).detach()  # the bug: training mode
    r = foldcheck.diagnose(x, observed, gamma=bn.weight, beta=bn.bias, mean=bn.running_mean, var=bn.running_var,
                           eps=bn.eps)
    assert r.verdict == "UNEXPECTED" and r.best == "training_mode_batch_statistics"
    assert "model.eval()" in r.fix


def test_run_case_file_and_dict_match_the_command(foldcheck_bin, root):
    path = root / "cases" / "tvm_thread.json"
    r = foldcheck.run(path)
    cli, code = cli_json(foldcheck_bin, "run", str(path))
    assert r.to_dict() == cli and r.exit_code == code == 0
    r2 = foldcheck.run(json.loads(path.read_text()))
    assert r2.verdict == r.verdict and r2["dtypes"] == r["dtypes"]


def test_quant_check_flags_a_wrong_integer():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 2, 3, 3)).astype(np.float32)
    bn = dict(gamma=np.ones(4, np.float32), beta=np.zeros(4, np.float32), mean=np.zeros(4, np.float32),
              var=np.ones(4, np.float32))
    exact = w.astype(np.float64) / np.sqrt(1 + 1e-5)
    scale = 2.0 ** np.ceil(np.log2(np.abs(exact).max() / 127))
    q = np.round(exact / scale).astype(np.int8)
    assert foldcheck.quant_check(w, q, **bn).verdict == "EXPECTED"
    q[1, 0, 1, 1] += 3
    bad = foldcheck.quant_check(w, q, **bn)
    assert bad.verdict == "UNEXPECTED" and bad.exit_code == 1


def test_bisect_internal_pipeline_matches_the_command(foldcheck_bin, root):
    case = str(root / "cases" / "tvm_thread.json")
    r = foldcheck.bisect(case, opt_level=3)
    p = subprocess.run([foldcheck_bin, "bisect", case, "--opt-level", "3", "--format", "json", "--no-timing"],
                       capture_output=True, text=True)
    assert r.to_dict() == json.loads(p.stdout) and r.exit_code == p.returncode


def test_progress_lines_reach_the_callable_and_an_exception_stops_the_run(root):
    lines = []
    foldcheck.run(root / "cases" / "resnet_3x3_64.json", progress=lines.append)
    assert lines and all(isinstance(x, str) for x in lines)

    def stop(line):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        foldcheck.run(root / "cases" / "resnet_3x3_64.json", progress=stop)


def test_the_gil_is_released_during_long_work():
    rng = np.random.default_rng(4)
    w = rng.normal(size=(512, 512, 3, 3)).astype(np.float32)  # 2.4M weights: a second or more of certified folds
    folded = (w / np.sqrt(np.float32(1 + 1e-5))).astype(np.float32)
    ticks, done = [0], threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)
    t = threading.Thread(target=count)
    t.start()
    t0 = time.perf_counter()
    foldcheck.explain(w, folded, threads=1)
    elapsed = time.perf_counter() - t0
    done.set()
    t.join()
    # With the GIL held the counter would not move at all during the call.
    assert elapsed > 0.2 and ticks[0] > 0.25 * elapsed / 0.002, (elapsed, ticks[0])


def test_results_render_in_every_format():
    r = foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED)
    assert json.loads(r.report("json"))["verdict"] == "EXPECTED"
    assert "EXPECTED" in r.report("text") and "EXPECTED" in str(r)
    assert repr(r).startswith("<ExplainResult EXPECTED")
    with pytest.raises(foldcheck.InputError, match="format"):
        r.report("pdf")


def test_the_package_command_runs_the_program(foldcheck_bin):
    import sys  # noqa: PLC0415

    p = subprocess.run([sys.executable, "-m", "foldcheck", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == f"foldcheck {foldcheck.__version__}"


def test_accuracy_diff_and_engines_on_a_model(tmp_path, foldcheck_bin):
    from test_engines import residual_model  # noqa: PLC0415 (tests/python: the CLI tests' model)

    residual_model(tmp_path / "m.onnx")
    x = np.random.default_rng(0).normal(size=(2, 3, 20, 20)).astype(np.float32)
    r = foldcheck.accuracy_diff(tmp_path / "m.onnx", input=x, weights_only=True)
    np.save(tmp_path / "x.npy", x)
    cli, code = cli_json(foldcheck_bin, "accuracy-diff", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy"),
                         "--weights-only")
    assert r.verdict == "EXPECTED" and len(r.layers) == 5 and code == 0
    assert [x["verdict"] for x in r.layers] == [x["verdict"] for x in cli["layers"]]
    e = foldcheck.engines(tmp_path / "m.onnx", ["onnxruntime:basic"], input=x, output_samples=8)
    assert e.verdict == "EXPECTED", e.report()
    with pytest.raises(foldcheck.InputError, match="unknown engine"):
        foldcheck.engines(tmp_path / "m.onnx", ["tensorrt"])


def test_byte_order_and_memory_order_are_taken_care_of():
    be = foldcheck.explain(TVM_ORIGINAL.astype(">f4"), TVM_OBSERVED.astype(">f4"))
    assert be.verdict == "EXPECTED" and abs(be.residual_ulp[0] - 0.29766777) < 1e-6
    with pytest.raises(foldcheck.InputError, match="byte order"):
        foldcheck._core.explain(TVM_ORIGINAL.astype(">f4"), TVM_OBSERVED)
    w = np.asfortranarray(np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32))
    r = foldcheck.explain(w, (w / np.sqrt(np.float32(1 + 1e-5))).astype(np.float32))
    assert r.verdict == "EXPECTED" and r.exact.shape == (4, 3)
    np.testing.assert_allclose(r.exact, w.astype(np.float64) / np.sqrt(1 + 1e-5), rtol=1e-15)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_raising_progress_callable_on_worker_threads_stops_the_run(tmp_path, error):
    """accuracy_diff reports progress from its worker threads: the exception must reach the
    caller (never std::terminate in a thread), as the same exception type."""
    from test_engines import residual_model  # noqa: PLC0415

    residual_model(tmp_path / "m.onnx")
    calls = []

    def cb(line):
        calls.append(line)
        raise error("stop at " + line)
    with pytest.raises(error, match="stop at"):
        foldcheck.accuracy_diff(tmp_path / "m.onnx", threads=2, progress=cb)
    assert len(calls) == 1


@pytest.mark.parametrize("kw, field", [
    (dict(stride=0), "stride"), (dict(dilation=0), "dilation"), (dict(dilation=-1), "dilation"),
    (dict(stride=2 ** 40), "stride"), (dict(padding=-1), "padding"), (dict(threads=5000), "threads"),
])
def test_diagnose_refuses_a_bad_geometry_instead_of_crashing(kw, field):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(1, 2, 5, 5)).astype(np.float32)
    w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    with pytest.raises(foldcheck.InputError, match=field):
        foldcheck.diagnose(x, np.zeros((1, 3, 5, 5), np.float32), weight=w, **kw)


def test_page_formats_are_for_run_and_accuracy_diff(root):
    r = foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED)
    with pytest.raises(foldcheck.InputError, match="run and accuracy_diff"):
        r.report("markdown")
    assert "<html" in foldcheck.run(root / "cases" / "tvm_thread.json").report("html").lower()


def test_explain_refuses_shapes_that_differ_and_channels_that_do_not_match():
    w = np.ones((2, 3), np.float32)
    with pytest.raises(foldcheck.InputError, match="shape"):
        foldcheck.explain(w, w.reshape(3, 2))
    with pytest.raises(foldcheck.InputError, match="output channels"):
        foldcheck.explain(w, w, gamma=np.ones(3, np.float32))


def test_bisect_takes_pass_lists_as_text_and_refuses_bad_thresholds(root):
    case = str(root / "cases" / "tvm_thread.json")
    assert foldcheck.bisect(case, passes="SimplifyInference,FoldScaleAxis").to_dict()["steps"]
    for bad in (dict(threshold_ulp=float("nan")), dict(threshold_ulp=-1), dict(opt_level=99)):
        with pytest.raises(foldcheck.InputError):
            foldcheck.bisect(case, **({"passes": "FoldScaleAxis"} if "opt_level" not in bad else {}), **bad)


def test_verdicts_and_their_judgement_come_from_the_core():
    """foldcheck.Verdict is the C++ enum, in its order; a result's verdict is a member equal to its
    spelling (old comparisons and json.dumps keep working); the policies Python combines verdicts
    with are the C++ judgement module's."""
    V = foldcheck.Verdict
    assert [v.value for v in V] == ["EXPECTED", "SUSPICIOUS", "UNEXPECTED", "MISTRUSTED"]
    assert foldcheck.VERDICTS == tuple(V)
    r = foldcheck.explain(TVM_ORIGINAL, TVM_OBSERVED)
    assert r.verdict is V.EXPECTED and r.verdict == "EXPECTED" and f"{r.verdict}" == "EXPECTED"
    assert json.dumps({"v": r.verdict}) == '{"v": "EXPECTED"}'
    assert _core.worst(V.EXPECTED, "SUSPICIOUS") is V.SUSPICIOUS
    assert _core.worst(V.UNEXPECTED, V.MISTRUSTED) is V.UNEXPECTED  # evidence before doubt
    assert _core.worst(V.SUSPICIOUS, V.MISTRUSTED) is V.MISTRUSTED  # doubt keeps a node from passing
    assert _core.tally([]) is V.MISTRUSTED  # nothing judged is never a pass
    assert _core.tally([V.EXPECTED], also=[V.UNEXPECTED]) is V.UNEXPECTED
    assert _core.tally([], also=[V.EXPECTED]) is V.MISTRUSTED
    assert _core.of_check(failed=False, informative=False) is V.MISTRUSTED
    assert _core.of_check(failed=True, informative=False) is V.UNEXPECTED  # evidence before doubt
    assert _core.of_layer(V.UNEXPECTED, V.MISTRUSTED) is V.UNEXPECTED
    assert _core.of_layer(V.EXPECTED, None) is V.EXPECTED
    assert _core.of_layer() is V.MISTRUSTED  # a layer that judged nothing
    assert _core.of_layer(V.EXPECTED, V.EXPECTED, not_the_layer=True, unmodelled="surely") is V.UNEXPECTED
    assert _core.of_layer(V.UNEXPECTED, V.EXPECTED, unmodelled="surely") is V.MISTRUSTED  # not judged
    assert _core.of_layer(V.SUSPICIOUS, unmodelled="possibly") is V.MISTRUSTED  # its excess may be the op's
    assert _core.of_layer(V.EXPECTED, V.EXPECTED, unmodelled="possibly") is V.EXPECTED
    with pytest.raises(ValueError, match="unmodelled"):
        _core.of_layer(V.EXPECTED, unmodelled="maybe")
    assert [_core.counts_against(v) for v in V] == [False, True, True, False]
    with pytest.raises(ValueError, match="not a verdict"):
        _core.worst("expected")


def signature_defaults(f):
    import inspect  # noqa: PLC0415

    params = inspect.signature(f).parameters.items()
    return {n: p.default for n, p in params if p.default is not inspect.Parameter.empty}


def test_every_default_is_the_cpp_options_structs():
    """Each function's defaults are its C++ command's (the options struct's, default-constructed,
    read through _core.<command>_defaults): every one the core names is the function's default, of
    the same value and type, so no number written in Python can drift from the command line's."""
    from foldcheck import _commands, testing  # noqa: PLC0415

    functions = [(foldcheck.explain, _core.explain_defaults), (foldcheck.diagnose, _core.diagnose_defaults),
                 (foldcheck.fold_check, _core.fold_check_defaults), (foldcheck.quant_check, _core.quant_check_defaults),
                 (foldcheck.run, _core.run_defaults), (foldcheck.bisect, _core.bisect_defaults),
                 (foldcheck.accuracy_diff, _core.accuracy_diff_defaults), (foldcheck.engines, _core.engines_defaults),
                 (testing.assert_fold_close, {"precision": _core.fold_check_defaults["precision"]})]
    for f, cpp in functions:
        ours = signature_defaults(f)
        for name, value in cpp.items():
            assert name in ours and ours[name] == value and type(ours[name]) is type(value), (f.__name__, name)
    assert _core.run_defaults["attribution_elements"] > 0 and _core.bisect_defaults["mode"] == "search"
    assert {_core.explain_defaults["precision"], _core.engines_defaults["precision"]} == {_commands.RUN["precision"]}
    # A default the Python layer writes as a number of its own is one the core does not hold.
    for f, cpp in functions:
        numbers = {n for n, v in signature_defaults(f).items() if isinstance(v, (int, float)) and n not in cpp}
        assert not numbers, (f.__name__, numbers)


BIDI = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
        "\u2069", "\u2028", "\u2029", "\u0085", "\u009b"]


def test_bidi_controls_in_names_are_neutralised_in_the_core_reports(tmp_path):
    # A U+202E in a name reversed the rest of its line in the text, Markdown and HTML reports.
    name = "layer" + "".join(c + "x" for c in BIDI) + "层طبقة"
    case = {"name": name, "seed": 1, "conv": {"in_channels": 2, "out_channels": 2, "kernel": 3, "padding": 1},
            "input": {"shape": [1, 2, 4, 4], "init": {"normal": {}}}, "weights": {"init": {"normal": {"std": 0.3}}}}
    r = foldcheck.run(case, attribution=False)
    for shown in (r.report("text"), str(r), r.report("markdown"), r.report("html")):
        for c in BIDI:
            assert c not in shown and f"\\u{ord(c):04X}x" in shown
        assert "层طبقة" in shown
    assert r["case"]["name"] == name  # JSON: exact
    with pytest.raises(foldcheck.InputError) as e:
        foldcheck.run(tmp_path / f"a{BIDI[7]}b.json")
    assert BIDI[7] not in str(e.value) and "a\\u202Eb.json" in str(e.value)
