"""A fusion check vouches for everything that defines the fused module's computation.

What it guards (issue 40, hardening round 3b, deliverable 1): check_fold, assert_fold_close and
check_model hold a fused module to conv + BatchNorm folded: a module after the conv that no
fuser adds (any activation but fuse_modules' one ReLU, a second ReLU, a subclass), a fused conv
whose class runs another forward or _conv_forward, hooks the conv and BatchNorm do not have, a
parametrization of its weight the conv does not have: each named, UNEXPECTED; what PyTorch's
fusers make (hooks carried over included) passes. diagnose and assert_fold_close on outputs take
lists and refuse nested, float8, quantized tensors by the argument's name (a sparse one is its
values); check_fold refuses a module's float8 tensor by module attribute; an honest float16 fold
whose scale overflows says so; the core's refusals name conv, bn and fused, not its arguments.
"""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.fx.experimental.optimization  # noqa: E402, F811
import torch.nn.utils.parametrize as parametrize  # noqa: E402
from torch_models import Small, by_fuse_modules, layer  # noqa: E402

import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402


def fold(conv, bn):
    return torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)


def unexpected(conv, bn, fused, words):
    """check_fold and assert_fold_close both name `words` first, the verdict UNEXPECTED."""
    r = fct.check_fold(conv, bn, fused)
    assert r.verdict == "UNEXPECTED" and words in r.reason and r.reason in str(r).splitlines()[0], str(r)
    with pytest.raises(AssertionError) as e:
        assert_fold_close(fused, (conv, bn))
    assert words in str(e.value).splitlines()[0], str(e.value)


AFTER = {  # a fused module a fuser never makes for conv + BN: the sentence that names it
    "Sigmoid": (lambda f: torch.nn.Sequential(f, torch.nn.Sigmoid()), "applies Sigmoid after the conv"),
    "Softmax": (lambda f: torch.nn.Sequential(f, torch.nn.Softmax(dim=1)), "applies Softmax after the conv"),
    "PReLU": (lambda f: torch.nn.Sequential(f, torch.nn.PReLU()), "applies PReLU after the conv"),
    "Threshold": (lambda f: torch.nn.Sequential(f, torch.nn.Threshold(0.1, 20.0)), "applies Threshold after"),
    "Hardtanh": (lambda f: torch.nn.Sequential(f, torch.nn.Hardtanh()), "applies Hardtanh after the conv"),
    "LeakyReLU": (lambda f: torch.nn.Sequential(f, torch.nn.LeakyReLU()), "applies LeakyReLU after the conv"),
    "ReLU6": (lambda f: torch.nn.Sequential(f, torch.nn.ReLU6()), "applies ReLU6 after the conv"),
    "Dropout": (lambda f: torch.nn.Sequential(f, torch.nn.Dropout()), "applies Dropout after the conv"),
    "two ReLUs": (lambda f: torch.nn.Sequential(f, torch.nn.ReLU(), torch.nn.ReLU()), "applies ReLU 2 times"),
    "a ReLU subclass": (lambda f: torch.nn.Sequential(f, type("MyReLU", (torch.nn.ReLU,), {})()),
                        "applies MyReLU after the conv"),
    "a Sequential subclass": (lambda f: type("Twice", (torch.nn.Sequential,), {
        "forward": lambda self, x: 2 * torch.nn.Sequential.forward(self, x)})(f, torch.nn.Identity()),
        "the fused module is a Twice, not a Sequential"),
    "ConvReLU2d holding a Sigmoid": (lambda f: _convrelu_with(f, torch.nn.Sigmoid()), "applies Sigmoid after"),
}


def _convrelu_with(f, m):
    fused = torch.ao.nn.intrinsic.ConvReLU2d(f, torch.nn.ReLU())
    fused[1] = m
    return fused


@pytest.mark.parametrize("kind", list(AFTER))
def test_a_module_after_the_conv_that_no_fuser_adds_is_unexpected(kind):
    conv, bn = layer()
    make, words = AFTER[kind]
    fused = make(fold(conv, bn))
    unexpected(conv, bn, fused, words)
    assert fct.check_fold(conv, bn, fused).weights.verdict == "EXPECTED"  # its conv is an honest fold


def test_what_fusers_make_passes():
    conv, bn = layer()
    f = fold(conv, bn)
    for fused in [f, torch.nn.Sequential(f, torch.nn.ReLU()), torch.nn.Sequential(f, torch.nn.Identity()),
                  torch.ao.nn.intrinsic.ConvReLU2d(fold(conv, bn), torch.nn.ReLU())]:
        assert fct.check_fold(conv, bn, fused).verdict == "EXPECTED", fct.check_fold(conv, bn, fused)
        assert_fold_close(fused, (conv, bn))
    m = torch.nn.Sequential(conv, bn, torch.nn.ReLU()).eval()
    by_fuse_modules = torch.ao.quantization.fuse_modules(copy.deepcopy(m), [["0", "1", "2"]])
    assert type(by_fuse_modules[0]) is torch.ao.nn.intrinsic.ConvReLU2d
    assert_fold_close(by_fuse_modules[0], (conv, bn))


class WSConv2d(torch.nn.Conv2d):
    """Weight standardization: each output channel's weights made mean 0, variance 1."""

    def _conv_forward(self, x, weight, bias):
        mean = weight.mean(dim=(1, 2, 3), keepdim=True)
        std = weight.std(dim=(1, 2, 3), keepdim=True)
        return super()._conv_forward(x, (weight - mean) / (std + 1e-5), bias)


class Doubled(torch.nn.Conv2d):
    def forward(self, x):
        return 2 * super().forward(x)


class Tagged(torch.nn.Conv2d):
    """A subclass that changes nothing the call runs."""

    tag = "mine"


def doubled_output(module, inputs, output):
    return 2 * output


def scaled_input(module, inputs):
    return (inputs[0] * 2,)


class Scale(torch.nn.Module):
    def forward(self, w):
        return 1.0 * w


def as_class(conv, cls):
    new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, padding=conv.padding).eval()
    new.load_state_dict(conv.state_dict())
    return new


def with_forward(f):
    f.forward = lambda x: 2 * torch.nn.Conv2d.forward(f, x)
    return f


COMPUTES = {  # a fused conv that computes otherwise than its weights say: the sentence that names it
    "_conv_forward override": (lambda f: as_class(f, WSConv2d),
                               "the fused conv (a WSConv2d) runs WSConv2d._conv_forward, the conv (a Conv2d) "
                               "Conv2d._conv_forward"),
    "forward override": (lambda f: as_class(f, Doubled), "runs Doubled.forward, the conv (a Conv2d) Conv2d.forward"),
    "forward on the instance": (with_forward, "runs a forward set on the module itself"),
    "forward hook": (lambda f: (f.register_forward_hook(doubled_output), f)[1],
                     "has a forward hook doubled_output the conv and BatchNorm do not"),
    "forward pre-hook": (lambda f: (f.register_forward_pre_hook(scaled_input), f)[1],
                         "has a forward pre-hook scaled_input the conv does not"),
    "hook on the Sequential": (lambda f: (lambda s: (s.register_forward_hook(doubled_output), s)[1])(
        torch.nn.Sequential(f, torch.nn.ReLU())), "has a forward hook doubled_output"),
    "parametrization": (lambda f: (parametrize.register_parametrization(f, "weight", Scale()), f)[1],
                        "the fused conv's weight is parametrized by Scale (torch.nn.utils.parametrize), the conv's "
                        "is not parametrized"),
}


@pytest.mark.parametrize("kind", list(COMPUTES))
def test_a_fused_conv_that_computes_otherwise_is_named_and_unexpected(kind):
    conv, bn = layer()
    make, words = COMPUTES[kind]
    unexpected(conv, bn, make(fold(conv, bn)), words)


def test_a_conv_whose_own_pre_hook_the_fused_conv_lost_is_unexpected():
    conv, bn = layer()
    f = fold(conv, bn)  # before the hook: a hand-written fuser's conv without it
    conv.register_forward_pre_hook(scaled_input)
    unexpected(conv, bn, f, "the conv has a forward pre-hook scaled_input the fused conv does not")


def test_the_same_hooks_class_and_parametrization_as_the_convs_pass():
    conv, bn = layer()
    conv.register_forward_pre_hook(scaled_input)
    conv.register_forward_hook(lambda m, i, o: None)  # an observer, kept by the fusers' copy of the conv
    bn.register_forward_hook(lambda m, i, o: None)
    assert fct.check_fold(conv, bn, fold(conv, bn)).verdict == "EXPECTED"
    m = torch.nn.Sequential(conv, bn).eval()
    fused = torch.ao.quantization.fuse_modules(copy.deepcopy(m), [["0", "1"]])  # moves bn's forward hook
    assert fct.check_fold(conv, bn, fused[0]).verdict == "EXPECTED"
    plain, bn = layer()
    tagged = as_class(plain, Tagged)  # a subclass that changes nothing the call runs: the same computation
    assert fct.check_fold(plain, bn, as_class(fold(plain, bn), Tagged)).verdict == "EXPECTED"
    assert fct.check_fold(tagged, bn, fold(plain, bn)).verdict == "EXPECTED"
    f = fold(plain, bn)  # the fold of the parametrized weight (PyTorch's fusers refuse a parametrized conv)
    parametrize.register_parametrization(plain, "weight", Scale())
    parametrize.register_parametrization(f, "weight", Scale())
    assert fct.check_fold(plain, bn, f).verdict == "EXPECTED"


def test_a_conv_with_its_own_forward_is_mistrusted_whatever_the_fused_conv():
    conv, bn = layer()
    ws = as_class(conv, WSConv2d)
    r = fct.check_fold(ws, bn, fold(ws, bn))  # standardization undoes the fold's scale: not conv + BN
    assert r.verdict == "MISTRUSTED" and "run WSConv2d._conv_forward, not Conv2d's" in r.reason, str(r)
    with pytest.raises(AssertionError, match="WSConv2d._conv_forward"):
        assert_fold_close(fold(ws, bn), (ws, bn))


@pytest.mark.parametrize("kind", ["Sigmoid", "forward hook", "_conv_forward override"])
def test_check_model_names_a_fused_module_that_computes_otherwise(kind):
    torch.manual_seed(3)
    m = Small().eval()
    x = torch.randn(1, 3, 6, 6)
    fused = by_fuse_modules(m)
    make, words = {**AFTER, **COMPUTES}[kind]
    fused.b = make(fused.b)
    r = fct.check_model(m, fused, x, output_samples=4)
    assert r.verdict == "UNEXPECTED" and r.answer().startswith("verdict: UNEXPECTED: b: ") and words in r.answer(), \
        r.report()
    with pytest.raises(AssertionError, match="b: "):
        assert_fold_close(fused, m, input=x)


# --- odd kinds of arrays --------------------------------------------------------------

def test_diagnose_takes_lists_rounded_to_the_modules_dtype():
    conv, bn = layer()
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        y = bn(conv(x))
    r = fct.diagnose(bn, x.tolist(), y.tolist(), conv=conv)
    assert r.verdict == "EXPECTED", r.report()
    assert fct.diagnose(bn, x, y.tolist(), conv=conv).verdict == "EXPECTED"
    assert_fold_close(y.tolist(), None, conv=conv, bn=bn, input=x.tolist())
    with pytest.raises(AssertionError, match=r"actual has shape \(1, 6, 5, 4\)"):
        assert_fold_close(y[..., :4].tolist(), None, conv=conv, bn=bn, input=x)


def nested(t):
    return torch.nested.nested_tensor([t[0], t[0][..., :-1]])


ODD = {  # an array no foldcheck function can read exactly: the words that say what it is
    "nested": (nested, "a nested tensor"),
    "float8": (lambda t: t.to(torch.float8_e4m3fn), "a float8_e4m3fn tensor: foldcheck reads float16, bfloat16"),
    "quantized": (lambda t: torch.quantize_per_tensor(t, 0.1, 0, torch.quint8), "quint8 tensor with quantized values"),
    "strings": (lambda t: [["a"]], "a list that is not an array of numbers"),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", list(ODD))
@pytest.mark.parametrize("which", ["x", "observed"])
def test_diagnose_refuses_odd_arrays_by_name(kind, which):
    conv, bn = layer()
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        y = bn(conv(x))
    make, words = ODD[kind]
    args = {"x": x, "observed": y}
    args[which] = make(args[which])
    with pytest.raises(TypeError, match=f"^{which}: ") as e:
        fct.diagnose(bn, args["x"], args["observed"], conv=conv)
    assert words in str(e.value), str(e.value)
    names = {"x": "input", "observed": "actual"}
    with pytest.raises(TypeError, match=f"^{names[which]}: ") as e:
        assert_fold_close(args["observed"], None, conv=conv, bn=bn, input=args["x"])
    assert words in str(e.value), str(e.value)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_sparse_tensor_is_its_values():
    conv, bn = layer()
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        y = bn(conv(x))
    assert fct.diagnose(bn, x.to_sparse(), y.to_sparse(), conv=conv).verdict == "EXPECTED"
    assert_fold_close(y.to_sparse(), None, conv=conv, bn=bn, input=x.to_sparse())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_check_fold_reads_the_modules_tensors_by_their_names():
    conv, bn = layer()
    f = fold(conv, bn)
    with torch.no_grad():
        f8 = copy.deepcopy(f)
        f8.weight = torch.nn.Parameter(f.weight.to(torch.float8_e4m3fn), requires_grad=False)
    with pytest.raises(TypeError, match="^fused.weight: a float8_e4m3fn tensor"):
        fct.check_fold(conv, bn, f8)
    bn8 = copy.deepcopy(bn)
    bn8.running_var = bn.running_var.to(torch.float8_e5m2)
    with pytest.raises(TypeError, match="^bn.running_var: a float8_e5m2 tensor"):
        fct.check_fold(conv, bn8, f)
    sparse = copy.deepcopy(f)
    sparse.weight = torch.nn.Parameter(f.weight.detach().to_sparse(), requires_grad=False)
    assert fct.check_fold(conv, bn, sparse).verdict == "EXPECTED"  # its values exactly


# --- the core's words said as the user's --------------------------------------------------

@pytest.mark.parametrize("module, attribute, words", [
    ("conv", "weight", "conv.weight: "), ("conv", "bias", "conv.bias: "),
    ("bn", "running_var", "bn.running_var: "), ("bn", "weight", "bn.weight: "),
])
def test_check_folds_refusals_name_the_modules(module, attribute, words):
    conv, bn = layer()
    f = fold(conv, bn)
    with torch.no_grad():
        getattr({"conv": conv, "bn": bn}[module], attribute)[0] = float("nan")
    with pytest.raises(ValueError) as e:
        fct.check_fold(conv, bn, f)
    assert str(e.value).startswith(words), str(e.value)
    for core in ("original", "observed_weight", "gamma", "(arguments)"):
        assert core not in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:
        assert_fold_close(f, (conv, bn))
    assert str(e.value).startswith(words), str(e.value)


def test_an_overflowing_float16_fold_says_it_overflows():
    conv, bn = layer(dtype=torch.float16)
    with torch.no_grad():
        bn.weight[2] = 2000.0
        bn.running_var[2] = 1e-4  # gamma / sqrt(var + eps) = 2e5: past float16's 65504
    f = fold(conv, bn)
    r = fct.check_fold(conv, bn, f)
    assert r.verdict != "EXPECTED" and "overflow" in r.reason, str(r)
    with pytest.raises(AssertionError, match="overflow"):
        assert_fold_close(f, (conv, bn))
    assert np.isinf(f.weight[2].detach().float().numpy()).any()
