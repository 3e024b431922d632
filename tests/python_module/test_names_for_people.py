"""Names in every report made for people are neutralised, in the core's reports and in the text
the package builds in Python (issue 40): a node, module, layer, case or engine name holding ESC
(a terminal's colour or erase sequence), BEL, CR (overwrites the line), BS, VT, FF, DEL, NUL, a
TAB or a line feed (which break the report's rows and forge a line "verdict: EXPECTED") is shown
as \\u001B, \\u0007, \\r, ..., \\t, \\n (the core's one rule, reports/neutralise.hpp, bound as
foldcheck._core.neutralised); the JSON keeps every name exact.

What it guards, each member found: accuracy_diff's report(), answer() and str() on a model whose
node names hold controls (and the command's text, Markdown and HTML); engines' report with an
adapter's label and stderr holding ESC; run's reports and an InputError quoting a file name;
foldcheck.torch.ModelCheck's rows, answer and Markdown first line (and its pages name the user's
model, not a temporary path); assert_fold_close's failure message naming modules; repr()."""
import copy
import subprocess

import pytest

import foldcheck
from foldcheck import _core

torch = pytest.importorskip("torch")
import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402

# A name with every kind of control a terminal or a row reacts to; then as every report shows it.
# (NUL ends a node name in PyTorch's ONNX export, and JSON strings with one are refused.)
NAME = "c\x1b[31mRED\x07\r\x08\x0b\x0c\x7f\t\nverdict: EXPECTED z"
SHOWN = "c\\u001B[31mRED\\u0007\\r\\u0008\\u000B\\u000C\\u007F\\t\\nverdict: EXPECTED z"
CONTROLS = [chr(c) for c in range(0x20) if c != 0x0A] + ["\x7f", "\x85", "\x9b", "\u202e"]


def assert_shown(text, shown=SHOWN, lines_of_its_own=True):
    """`text` shows the name escaped, holds no control character (its own line feeds aside) and
    no line the name forged."""
    assert shown in text, text
    assert not [c for c in CONTROLS if c in text], [c for c in CONTROLS if c in text]
    assert "\nverdict: EXPECTED z" not in text  # the line the name would forge
    if not lines_of_its_own:
        assert "\n" not in text


def test_the_rule_is_the_cores_and_one_line():
    assert _core.neutralised(NAME + "\x00") == SHOWN + "\\u0000"
    assert _core.neutralised(SHOWN) == SHOWN  # twice changes nothing
    assert _core.neutralised("layer2.0.conv1 层 طبقة") == "layer2.0.conv1 层 طبقة"
    assert _core.neutralised("a\u202eb\u2028c\x9bd") == "a\\u202Eb\\u2028c\\u009Bd"


def _model(name=NAME):
    torch.manual_seed(0)
    m = torch.nn.Sequential()
    m.add_module(name, torch.nn.Conv2d(2, 3, 3, padding=1))
    m.add_module("bn", torch.nn.BatchNorm2d(3))
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.3, 0.3)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m.eval(), torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(1))


def _fused(m, name=NAME, scale=1 + 1e-3):
    fused = torch.ao.quantization.fuse_modules(copy.deepcopy(m), [[name, "bn"]])
    with torch.no_grad():
        conv = fused.get_submodule(name)
        (conv[0] if isinstance(conv, torch.nn.Sequential) else conv).weight[1] *= scale
    return fused


def test_accuracy_diff_reports_show_node_names_escaped(tmp_path, foldcheck_bin):
    m, x = _model()
    original = fct.export_onnx(m, x, tmp_path / "m.onnx")
    observed = fct.export_onnx(_fused(m), x, tmp_path / "f.onnx")
    r = foldcheck.accuracy_diff(original, observed=observed, weights_only=True)
    assert r.verdict == "UNEXPECTED"
    node = r.layers[0]["name"]
    assert NAME in node  # the JSON: exact
    shown = node.replace(NAME, SHOWN)
    for text in (r.report(), str(r), r.report("markdown"), r.report("html")):
        assert_shown(text, shown)
    assert_shown(r.answer(), shown, lines_of_its_own=False)
    for fmt in ("text", "markdown", "html"):
        p = subprocess.run([foldcheck_bin, "accuracy-diff", original, "--observed", observed, "--weights-only", "-q",
                            "--format", fmt], capture_output=True)
        assert p.returncode == 1
        assert_shown(p.stdout.decode(), shown)


def test_model_check_rows_answer_and_markdown_show_module_names_escaped():
    m, x = _model()
    r = fct.check_model(m, _fused(m), x, weights_only=True)
    assert r.verdict == "UNEXPECTED" and r.layers[0]["module"] == NAME
    assert_shown(r.report())
    assert_shown(str(r))
    assert_shown(r.answer() + "\n" + r.report("markdown").split("\n")[0])
    # A fused conv of another geometry: the answer is built in Python, naming the module.
    fused = _fused(m, scale=1)
    conv = fused.get_submodule(NAME)
    (conv[0] if isinstance(conv, torch.nn.Sequential) else conv).stride = (2, 2)
    g = fct.check_model(m, fused, x, weights_only=True)
    assert g.mismatches and NAME in g.mismatches
    assert_shown(g.answer(), lines_of_its_own=False)
    first = g.report("markdown").split("\n")[0]
    assert first.startswith("**verdict: ") and "\n" not in first
    assert_shown(first, lines_of_its_own=False)
    assert_shown(g.report())
    assert NAME not in repr(g) and "\x1b" not in repr(g)


def test_model_check_pages_name_the_users_model_not_a_temporary_path():
    m, x = _model("conv")
    r = fct.check_model(m, _fused(m, "conv"), x, weights_only=True)
    for page in (r.report("markdown"), r.report("html")):
        assert "foldcheck-torch-" not in page and "original.onnx" not in page
        assert "Sequential" in page
    assert r.report("markdown").split("\n")[0].find("Sequential") >= 0


def test_assert_fold_close_names_modules_escaped():
    m, x = _model()
    with pytest.raises(AssertionError) as e:
        assert_fold_close(_fused(m), m, input=x)
    assert_shown(str(e.value))


def test_run_reports_and_errors_show_case_names_escaped(tmp_path):
    case = {"name": NAME, "seed": 1,
            "conv": {"in_channels": 2, "out_channels": 2, "kernel": 3, "padding": 1},
            "input": {"shape": [1, 2, 4, 4], "init": {"normal": {}}}, "weights": {"init": {"normal": {"std": 0.3}}}}
    r = foldcheck.run(case, attribution=False)
    for text in (r.report("text"), str(r), r.report("markdown"), r.report("html")):
        assert_shown(text)
    assert r["case"]["name"] == NAME
    with pytest.raises(foldcheck.InputError) as e:
        foldcheck.run(tmp_path / "a\x1b[2J\r\tb.json")
    assert "a\\u001B[2J\\r\\tb.json" in str(e.value) and "\x1b" not in str(e.value)


def test_engines_report_shows_an_adapters_output_escaped_and_refuses_a_label_with_controls(tmp_path):
    """An adapter's label is the user's: one with control characters is refused before anything
    runs (engine_list's rule, the error line escaped); what an adapter writes is not, and shows
    escaped in the report while the JSON keeps it exact."""
    from test_engines import residual_model  # noqa: PLC0415 (tests/python: the CLI tests' model)

    residual_model(tmp_path / "m.onnx")
    with pytest.raises(foldcheck.InputError, match="control characters") as refused:
        foldcheck.engines(tmp_path / "m.onnx", adapters={"lab\x1b[31mel\x07": "exit 0"})
    assert "\x1b" not in str(refused.value) and "\x07" not in str(refused.value)
    r = foldcheck.engines(tmp_path / "m.onnx", adapters={"label": "printf 'oops\\033[2J\\r' >&2; exit 3"})
    assert r.verdict == "MISTRUSTED" and "oops\x1b[2J\r" in r.runs[0]["failed"]  # the JSON: exact
    for text in (r.report(), str(r)):
        assert "\x1b" not in text and "\r" not in text
    assert "oops\\u001B[2J\\r" in r.report()
