"""foldcheck.torch and foldcheck.testing with PyTorch's own fusers on torchvision models.

What it guards: every fuser users run — torch.ao.quantization.fuse_modules,
torch.nn.utils.fusion.fuse_conv_bn_eval, torch.fx.experimental.optimization.fuse,
torch.jit.freeze and torch.compile with inductor's freezing — folds ResNet-18 (fresh BatchNorms,
as torchvision makes it) and MobileNetV2 (trained-like BatchNorm statistics) so that
check_model finds every layer EXPECTED, with PyTorch module names; one channel of one fused conv
scaled by (1 + 20e-6) is UNEXPECTED, naming that module and channel, whichever fuser made it.
assert_fold_close passes a correct fold and fails that corruption (which
torch.testing.assert_close's defaults pass); check_fold names the recipe that reproduces a fold
bit for bit; diagnose names a training-mode BatchNorm on a live module.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
import torch.fx.experimental.optimization  # noqa: E402, F811
from torch._inductor import config as inductor  # noqa: E402
from torch_models import REL, by_compile, by_fuse_modules, by_fx, by_jit_freeze, trained_like  # noqa: E402

import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402

# A conv in the middle of each model, and a channel of it, for the corruption.
TARGET = {"resnet18": ("layer2.0.conv1", 7), "mobilenet_v2": ("features.4.conv.1.0", 11)}


@pytest.fixture(scope="module", params=["resnet18", "mobilenet_v2"])
def case(request):
    torch.manual_seed(0)
    model = getattr(torchvision.models, request.param)(weights=None).eval()
    if request.param == "mobilenet_v2":
        trained_like(model, 1)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    return request.param, model, x


def by_fuse_conv_bn_eval(model, x):
    fused = copy.deepcopy(model)
    mods = dict(fused.named_modules())
    for conv, bn in fct.conv_bn_pairs(model):
        for name, new in ((conv, torch.nn.utils.fusion.fuse_conv_bn_eval(mods[conv], mods[bn])),
                          (bn, torch.nn.Identity())):
            parent, _, attr = name.rpartition(".")
            setattr(mods[parent] if parent else fused, attr, new)
    return fused


FUSERS = {"fuse_modules": by_fuse_modules, "fuse_conv_bn_eval": by_fuse_conv_bn_eval, "fx": by_fx,
          "jit.freeze": by_jit_freeze, "torch.compile": by_compile}
# torch.compile takes 10-25 s a model: the slowest fuser (slow_tests.py).
FUSER_PARAMS = [pytest.param(f, marks=pytest.mark.slow) if f == "torch.compile" else f for f in FUSERS]


def scale_channel(w, b, channel):
    with torch.no_grad():
        w[channel] *= 1 + REL
        if b is not None:
            b[channel] *= 1 + REL


def check_corrupted(fuser, model, x, name, channel):
    """check_model on the fuser's fold with one channel of the fused conv `name` scaled."""
    fused = FUSERS[fuser](model, x)
    if fuser in ("jit.freeze",):
        index = [n for n, _ in fct._conv_order(model, x)].index(name)
        scale_channel(*fct.frozen_fold(fused)[index], channel)  # the frozen graph's own constants
        return fct.check_model(model, fused, x, weights_only=True)
    if fuser == "torch.compile":
        index = [n for n, _ in fct._conv_order(model, x)].index(name)

        def corrupt(graph):  # a post-grad pass of the user's that breaks one folded constant
            gm = graph.owning_module
            convs = [n for n in graph.nodes if n.op == "call_function" and "convolution" in str(n.target)]
            args = convs[index].args
            scale_channel(getattr(gm, args[1].target), getattr(gm, args[2].target) if args[2] is not None else None,
                          channel)
        with inductor.patch(post_grad_custom_post_pass=corrupt):
            return fct.check_model(model, fused, x, weights_only=True)
    conv = fused.get_submodule(name)
    scale_channel(conv.weight, conv.bias, channel)
    return fct.check_model(model, fused, x, weights_only=True)


@pytest.mark.parametrize("fuser", FUSER_PARAMS)
def test_every_fuser_folds_every_layer_as_expected(case, fuser):
    name, model, x = case
    r = fct.check_model(model, FUSERS[fuser](model, x), x, weights_only=True)
    assert r.verdict == "EXPECTED", r.report()
    assert len(r.layers) == {"resnet18": 20, "mobilenet_v2": 52}[name]
    assert TARGET[name][0] in [x["module"] for x in r.layers]
    assert all(x["worst_ratio"] <= 1 for x in r.layers)


@pytest.mark.parametrize("fuser", FUSER_PARAMS)
def test_one_channel_scaled_by_20ppm_is_named_by_module_and_channel(case, fuser):
    name, model, x = case
    module, channel = TARGET[name]
    r = check_corrupted(fuser, model, x, module, channel)
    assert r.verdict == "UNEXPECTED", r.report()
    assert [(x["module"], x["worst_channel"]) for x in r.unexpected] == [(module, channel)], r.report()


@pytest.mark.slow
def test_check_model_runs_the_layers_and_the_outputs_too(case):
    name, model, x = case
    r = fct.check_model(model, by_fuse_modules(model, x), x, output_samples=8)
    assert r.verdict == "EXPECTED", r.report()
    assert r.accuracy_diff["end_to_end"]["verdict"] == "EXPECTED"
    assert all(layer.get("activations") for layer in r.accuracy_diff.layers)


def test_check_fold_names_the_bit_exact_recipe(case):
    name, model, x = case
    conv, bn = (model.layer2[0].conv1, model.layer2[0].bn1) if name == "resnet18" else \
        (model.features[4].conv[1][0], model.features[4].conv[1][1])
    r = fct.check_fold(conv, bn, torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn))
    assert r.verdict == "EXPECTED" and r.recipe == "pytorch" and "pytorch" in r.bit_exact_recipes
    bad = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    scale_channel(bad.weight, None, 3)
    r = fct.check_fold(conv, bn, bad)
    assert r.verdict == "UNEXPECTED" and r.worst_channel == 3


def test_check_fold_sees_a_wrong_bias_alone():
    torch.manual_seed(3)
    conv, bn = torch.nn.Conv2d(4, 6, 3, bias=True).eval(), trained_like(torch.nn.BatchNorm2d(6), 4).eval()
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    with torch.no_grad():
        fused.bias[2] += 1e-3
    r = fct.check_fold(conv, bn, fused)
    assert r.weights.verdict == "EXPECTED" and r.parameters.verdict == "UNEXPECTED" and r.worst_channel == 2
    with pytest.raises(AssertionError, match="bias"):
        assert_fold_close(fused, (conv, bn))


def test_assert_fold_close_where_assert_close_defaults_pass_both():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    conv, bn = model.layer2[0].conv1, model.layer2[0].bn1
    good = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    bad = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    scale_channel(bad.weight, None, 7)
    expected = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    torch.testing.assert_close(good.weight, expected.weight)  # passes
    torch.testing.assert_close(bad.weight, expected.weight)   # passes too: 20 ppm of 0.01 is far below atol 1e-5
    assert_fold_close(good, (conv, bn))
    with pytest.raises(AssertionError) as e:
        assert_fold_close(bad, torch.nn.Sequential(conv, bn))
    text = str(e.value)
    for part in ("channel 7", "x its bound", "alpha*|w| + eta", "Likely cause", "1 of 128 channels"):
        assert part in text, text


@pytest.mark.slow
def test_assert_fold_close_on_models_and_outputs():
    torch.manual_seed(0)
    model = trained_like(torchvision.models.resnet18(weights=None), 5).eval()
    x = torch.randn(1, 3, 64, 64)
    fused = by_fuse_modules(model, x)
    assert_fold_close(fused, model, input=x)
    scale_channel(fused.layer3[1].conv2.weight, fused.layer3[1].conv2.bias, 9)
    with pytest.raises(AssertionError, match=r"layer3\.1\.conv2: channel 9"):
        assert_fold_close(fused, model, input=x)
    conv, bn = model.conv1, model.bn1
    with torch.no_grad():
        y = bn(conv(x))
        assert_fold_close(by_fuse_modules(model, x).conv1(x), y, conv=conv, bn=bn, input=x)
        with pytest.raises(AssertionError, match="training_mode_batch_statistics"):
            assert_fold_close(bn.train()(conv(x)), y, conv=conv, bn=bn.eval(), input=x)


def test_diagnose_a_live_module_the_seed_in_three_lines():
    bn = trained_like(torch.nn.BatchNorm2d(16), 6)
    x = torch.randn(8, 16, 10, 10, generator=torch.Generator().manual_seed(7))
    observed = bn.train()(x).detach()          # the user forgot model.eval()
    r = fct.diagnose(bn.eval(), x, observed)
    assert r.best == "training_mode_batch_statistics" and "model.eval()" in r.fix
    assert fct.diagnose(bn, x, bn(x).detach()).verdict == "EXPECTED"


def test_conv_bn_pairs_and_refusals(case):
    name, model, x = case
    assert len(fct.conv_bn_pairs(model)) == {"resnet18": 20, "mobilenet_v2": 52}[name]
    with pytest.raises(ValueError, match="running statistics"):
        fct.bn_parameters(torch.nn.BatchNorm2d(4, track_running_stats=False))
    with pytest.raises(TypeError, match="Conv"):
        fct.check_fold(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 3))


def test_export_keeps_the_batchnorms_and_the_module_names(tmp_path):
    import onnx  # noqa: PLC0415

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    path = fct.export_onnx(model.train(), torch.randn(1, 3, 32, 32), tmp_path / "m.onnx")
    assert model.training  # given back as it came
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert ops.count("BatchNormalization") == 20
    assert "layer4.1.conv2" in fct._module_names(path).values()


TINY = '''
import torch
class TinyNet(torch.nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1, bias=False),
                                        torch.nn.BatchNorm2d(width))
        self.head = torch.nn.Conv2d(width, 2 * width, 1)
        self.head_bn = torch.nn.BatchNorm2d(2 * width)
    def forward(self, x):
        return self.head_bn(self.head(torch.relu(self.stem(x)))).mean((2, 3))
'''


@pytest.mark.parametrize("fuser", ["fuse_conv_bn_eval", "fx"])
def test_export_tool_takes_any_module_by_import_path(tmp_path, root, fuser):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    import foldcheck  # noqa: PLC0415

    (tmp_path / "mynets.py").write_text(TINY)
    tool = [sys.executable, str(root / "tools" / "export_torch.py"), "--model", "mynets:TinyNet", "--kwargs",
            '{"width": 8}', "--input-shape", "2,3,16,16", "--fuser", fuser]
    for out, extra in (("good", []), ("bad", ["--corrupt", "head:3:20e-6"])):
        p = subprocess.run(tool + ["--out", out] + extra, cwd=tmp_path, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert "2 Conv+BN pairs folded" in p.stderr
    good = foldcheck.accuracy_diff(tmp_path / "good" / "TinyNet.onnx",
                                   observed=tmp_path / "good" / "TinyNet_folded.onnx",
                                   input=tmp_path / "good" / "x.npy", output_samples=8)
    assert good.verdict == "EXPECTED", good.report()
    bad = foldcheck.accuracy_diff(tmp_path / "bad" / "TinyNet.onnx", observed=tmp_path / "bad" / "TinyNet_folded.onnx",
                                  weights_only=True)
    assert bad.verdict == "UNEXPECTED" and [x["worst_channel"] for x in bad.layers] == [None, 3]


def small_model(eps=1e-5):
    torch.manual_seed(4)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8, eps=eps), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 16, 1, bias=False), torch.nn.BatchNorm2d(16, eps=eps))
    return trained_like(m, 8).eval()


def fold_by_hand(conv, bn, eps=None, var=None, sqrt=torch.sqrt, bias=True):
    """A conv + BN folded in float32 with the slips users make (eps, var, sqrt, bias)."""
    eps = bn.eps if eps is None else eps
    var = bn.running_var if var is None else var
    s = bn.weight / sqrt(var + eps)
    fused = copy.deepcopy(conv).eval()
    with torch.no_grad():
        fused.weight.copy_(conv.weight * s.reshape(-1, 1, 1, 1))
        b = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        fused.bias = torch.nn.Parameter(((b - bn.running_mean) * s + bn.bias) if bias else torch.zeros_like(b))
    return fused


@pytest.mark.parametrize("slip, words", [
    (dict(eps=1e-5), "eps = 1e-05 where the BatchNorm's eps is 0.001"),
    (dict(var="std"), "the variance read as the standard deviation"),
    (dict(sqrt=lambda v: v), "the square root left out"),
    (dict(bias=False), "the folded bias is missing"),
])
def test_assert_fold_close_names_the_slip(slip, words):
    m = small_model(eps=1e-3)
    conv, bn = m[0], m[1]
    if slip.get("var") == "std":
        slip = dict(var=bn.running_var.sqrt())
    fused = fold_by_hand(conv, bn, **slip)
    with pytest.raises(AssertionError) as e:
        assert_fold_close(fused, (conv, bn))
    assert words in str(e.value), str(e.value)
    assert_fold_close(fold_by_hand(conv, bn), (conv, bn))


def test_a_fused_model_that_is_not_fused_or_swapped_says_why():
    m = small_model()
    x = torch.randn(2, 3, 8, 8)
    r = fct.check_model(m, copy.deepcopy(m), x, weights_only=True)
    assert r.verdict == "UNEXPECTED" and all("not folded" in x["note"] for x in r.unexpected), r.report()
    assert "not folded" in r.report()
    with pytest.raises(AssertionError, match="not folded"):
        assert_fold_close(copy.deepcopy(m), m, input=x)
    fused = by_fuse_modules(m, x)
    swapped = fct.check_model(fused, m, x, weights_only=True)
    assert swapped.verdict == "MISTRUSTED" and "swapped" in swapped.reason and "swapped" in swapped.report()
    with pytest.raises(AssertionError, match="swapped"):
        assert_fold_close(m, fused, input=x)
    with pytest.raises(ValueError, match="the model itself"):
        fct.check_model(m, m, x)


def test_check_model_leaves_the_models_mode_and_statistics_alone():
    m = small_model().train()
    x = torch.randn(2, 3, 8, 8)
    before = copy.deepcopy(m.state_dict())
    fused = by_fuse_modules(m.eval(), x)
    m.train()
    with pytest.warns(UserWarning, match="training mode"):
        r = fct.check_model(m, fused, x, weights_only=True)
    assert r.verdict == "EXPECTED" and all(mod.training for mod in m.modules())
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    # Said in the result too (a warning may be filtered): checked as in eval mode.
    assert any("the model was in training mode: it was checked as in eval mode" in n for n in r.notes), r.notes
    assert "the model was in training mode" in r.report()


@pytest.mark.parametrize("actual, expected", [
    ("fused", "conv"), ("pair", "fused"), ("fused", "bn"), ("fused", "conv_conv"),
])
def test_assert_fold_close_refuses_arguments_in_the_wrong_shape(actual, expected):
    m = small_model()
    conv, bn = m[0], m[1]
    objs = {"fused": fold_by_hand(conv, bn), "conv": conv, "bn": bn, "pair": (conv, bn), "conv_conv": (conv, conv)}
    with pytest.raises(TypeError, match=r"\(conv, bn\)"):
        assert_fold_close(objs[actual], objs[expected])


def test_an_output_failure_names_the_element_in_nchw():
    m = small_model()
    conv, bn = m[0], m[1]
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        y = bn(conv(x))
        bad = y.clone()
        bad[1, 5, 2, 3] += 1e-3
    with pytest.raises(AssertionError) as e:
        assert_fold_close(bad, y, conv=conv, bn=bn, input=x)
    text = str(e.value)
    assert "worst element [1, 5, 2, 3]" in text and "None" not in text, text


class ConvTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.c(self.c(x)))


class Branchy(torch.nn.Module):
    """fx cannot trace it (data-dependent branch); c1's output feeds a pool before bn, c2's an add too."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        self.c2, self.bn2 = torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4)
        self.c3, self.bn3 = torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        if x.sum() > -1e9:
            y = self.bn(torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 1))
        z = self.c2(y)
        return self.bn3(self.c3(self.bn2(z) + z))


def test_pairs_are_only_single_use_modules_and_outputs():
    assert fct.conv_bn_pairs(ConvTwice().eval()) == []
    m = trained_like(Branchy(), 9).eval()
    x = torch.randn(1, 3, 8, 8)
    for k in range(40):  # the same answer every time (no tensor identity reused, whatever sizes come and go)
        assert fct.conv_bn_pairs(m, torch.randn(1 + k % 3, 3, 8 + k % 5, 8)) == [["c3", "bn3"]]
    assert fct.conv_bn_pairs(m, x) == [["c3", "bn3"]]
    assert not m.training


def test_check_model_compares_the_fused_models_outputs_end_to_end():
    m = small_model()
    m.append(torch.nn.Conv2d(16, 4, 1))  # a conv without a BatchNorm: no fold check sees it
    m.eval()
    x = torch.randn(2, 3, 8, 8)
    fused = by_fuse_modules(m, x)
    assert fct.check_model(m, fused, x, output_samples=8).verdict == "EXPECTED"
    with torch.no_grad():
        fused[5].weight *= 1.1
    r = fct.check_model(m, fused, x, output_samples=8)
    assert r.verdict == "UNEXPECTED" and not r.unexpected, r.report()
    assert "end to end: UNEXPECTED" in r.report()
    with pytest.raises(AssertionError, match="outputs end to end: UNEXPECTED"):
        assert_fold_close(fused, m, input=x)
    weights = fct.check_model(m, fused, x, weights_only=True)
    assert weights.verdict == "EXPECTED" and "not compared" in weights.report()


def test_fold_reports_and_a_nan_bias():
    m = small_model()
    conv, bn = m[0], m[1]
    good = fct.check_fold(conv, bn, fold_by_hand(conv, bn))
    assert "verdict: EXPECTED" in str(good) and "bit for bit" in good.report()
    assert '"verdict"' in good.report("json")
    bad = fold_by_hand(conv, bn)
    with torch.no_grad():
        bad.bias[3] = float("nan")
    r = fct.check_fold(conv, bn, bad)
    assert r.verdict == "UNEXPECTED" and r.worst_channel == 3, r.report()
    with pytest.raises(AssertionError, match="bias"):
        assert_fold_close(bad, (conv, bn))


def test_diagnose_refuses_what_it_cannot_model():
    m = small_model()
    conv = torch.nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect").eval()
    x = torch.randn(1, 3, 6, 6)
    with pytest.raises(ValueError, match="zero padding"):
        fct.diagnose(m[1], x, m[1](conv(x)).detach(), conv=conv)


def test_failure_messages_point_at_single_elements_and_nans():
    m = small_model()
    conv, bn = m[0], m[1]
    one = fold_by_hand(conv, bn)
    with torch.no_grad():
        one.weight[5, 1, 2, 0] = -one.weight[5, 1, 2, 0]  # one weight's sign flipped
    with pytest.raises(AssertionError, match=r"channel 5: 1 of 27 weights \(element 15"):
        assert_fold_close(one, (conv, bn))
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        y = bn(conv(x))
        bad = y.clone()
        bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(AssertionError, match=r"1 NaN or infinite element\(s\) \(the first at \[0, 0, 0, 0\]\)"):
        assert_fold_close(bad, y, conv=conv, bn=bn, input=x)


@pytest.mark.parametrize("fuser", ["jit.freeze", "torch.compile"])
def test_check_model_runs_frozen_and_compiled_models_end_to_end(fuser):
    m = small_model()
    x = torch.randn(2, 3, 8, 8)
    r = fct.check_model(m, FUSERS[fuser](m, x), x, output_samples=8)
    assert r.verdict == "EXPECTED" and r.fuser.endswith(fuser) and not r.notes, r.report()
    assert r.accuracy_diff["end_to_end"]["observed_output"]["verdict"] == "EXPECTED"


class SmallNet(torch.nn.Module):
    """Channel counts on both sides of torch.rsqrt's vector width (16 < 32; 40 and 70 leave a
    scalar tail), a conv with a bias, a grouped conv."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.c2, self.b2 = torch.nn.Conv2d(16, 40, 3, bias=False), torch.nn.BatchNorm2d(40)
        self.c3, self.b3 = torch.nn.Conv2d(40, 70, 1, bias=False), torch.nn.BatchNorm2d(70)
        self.c4, self.b4 = torch.nn.Conv2d(70, 70, 3, groups=70, bias=False), torch.nn.BatchNorm2d(70)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        return self.b4(self.c4(torch.relu(self.b3(self.c3(x)))))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fuser", ["fuse_modules", "fuse_conv_bn_eval", "fx"])
def test_a_half_precision_model_is_folded_in_its_own_type_and_checked_so(dtype, fuser):
    """PyTorch's fusers fold a .half()/.bfloat16() module with every operation rounded to it:
    check_fold names `pytorch (<dtype> arithmetic)` bit for bit on every layer, check_model finds
    every layer EXPECTED, and one channel scaled by (1 + 16 eps of the type) is named."""
    torch.manual_seed(3)
    dt = getattr(torch, dtype)
    model = trained_like(SmallNet(), 4).eval().to(dt)
    x = torch.randn(1, 3, 12, 12).to(dt)
    fused = FUSERS[fuser](model, x)
    mods, fmods = dict(model.named_modules()), dict(fused.named_modules())
    for conv, bn in fct.conv_bn_pairs(model):
        r = fct.check_fold(mods[conv], mods[bn], fmods[conv])
        assert r.verdict == "EXPECTED", (conv, r.report())
        assert f"pytorch ({dtype} arithmetic)" in r.bit_exact_recipes, (conv, r.bit_exact_recipes)
    r = fct.check_model(model, fused, x)
    assert r.verdict == "EXPECTED" and len(r.layers) == 4, r.report()
    with torch.no_grad():
        fmods["c3"].weight[33] *= 1 + 16 * torch.finfo(dt).eps  # 8 to 16 ULP: beyond every recipe's bound (~5)
    r = fct.check_model(model, fused, x, weights_only=True)
    assert r.verdict == "UNEXPECTED" and [(u["module"], u["worst_channel"]) for u in r.unexpected] == [("c3", 33)], \
        r.report()


@pytest.mark.parametrize("dynamo", [True, False])
def test_a_default_export_is_mistrusted_with_the_exporters_explanation(tmp_path, foldcheck_bin, dynamo):
    """torch.onnx.export with its defaults folds the BatchNorms itself (both exporters): accuracy-diff has
    nothing to compare, exits 1 and says why and how to export; swapped models are named as such."""
    import subprocess  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    import foldcheck  # noqa: PLC0415
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16)
    default = str(tmp_path / "default.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), default, dynamo=dynamo)
    p = subprocess.run([foldcheck_bin, "accuracy-diff", default, "-q"], capture_output=True, text=True)
    assert p.returncode == 1 and "verdict: MISTRUSTED" in p.stdout, p.stdout + p.stderr
    assert "torch.onnx.export folds them by default" in p.stdout and "TrainingMode.PRESERVE" in p.stdout, p.stdout
    kept = fct.export_onnx(m, x, str(tmp_path / "kept.onnx"))
    r = foldcheck.accuracy_diff(default, observed=kept, weights_only=True)
    assert r.verdict == "MISTRUSTED" and "are the two swapped?" in r.reasoning[0], r.reasoning


def test_check_fold_answers_first_with_the_cores_diagnosis():
    """A slipped fold: the verdict and the core's cause (diagnose_fold: the slip every weight
    fits, eps recovered) are the report's first line; the element listing after it is capped.
    A bias off in one channel is named by the core too."""
    from foldcheck import _core  # noqa: PLC0415
    from foldcheck.results import SHOWN, Result  # noqa: PLC0415

    m = small_model(eps=1e-3)
    conv, bn = m[0], m[1]
    r = fct.check_fold(conv, bn, fold_by_hand(conv, bn, eps=1e-5))
    assert isinstance(r, Result) and r.verdict == "UNEXPECTED"
    slip = r.diagnosis.weights.slip
    assert slip.name == "eps_mismatch" and slip.params["eps_recovered"] == 1e-5, r.diagnosis.weights.cause
    first = str(r).splitlines()[0]
    assert first.startswith("verdict: UNEXPECTED: the weights are not a fold") and "eps = 1e-05" in first, first
    table = [line for line in str(r).splitlines() if line[:5].strip().isdigit()]
    assert len(table) == SHOWN and "more rows not shown" in str(r), str(r)
    bad = fold_by_hand(conv, bn)
    with torch.no_grad():
        bad.bias[2] += 1e-3
    d = fct.check_fold(conv, bn, bad).diagnosis
    assert list(d.bias.off) == [2] and not d.bias.missing and "1 of 8 channels (2)" in d.bias.cause
    assert isinstance(d, _core.FoldDiagnosis) and fct.check_fold(conv, bn, fold_by_hand(conv, bn)).diagnosis is None


def test_model_check_defaults_are_the_cores():
    import inspect  # noqa: PLC0415

    import foldcheck  # noqa: PLC0415
    from foldcheck import _core  # noqa: PLC0415

    d = _core.accuracy_diff_defaults
    assert d["output_samples"] == 32 and d["confidence"] == 0.999 and d["recipe"] == "pytorch"
    for f in (foldcheck.accuracy_diff, fct.check_model):
        params = inspect.signature(f).parameters
        assert params["output_samples"].default == d["output_samples"]
        assert params["confidence"].default == d["confidence"]
    # No number written in Python: every numeric default of check_fold, diagnose and check_model
    # is its C++ command's (the options structs', read through _core).
    for f, cpp in [(fct.check_fold, _core.fold_check_defaults), (fct.diagnose, _core.diagnose_defaults),
                   (fct.check_model, d)]:
        for name, p in inspect.signature(f).parameters.items():
            assert not isinstance(p.default, (int, float)) or p.default == cpp[name], (f.__name__, name)

