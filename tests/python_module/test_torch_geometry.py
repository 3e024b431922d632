"""A fusion check vouches for the whole computation of a fused conv, not its weights alone.

What it guards (issue 40, findings 1, 6, 7, 8, 12): a fused conv whose geometry is not the
conv's (stride, padding, dilation, padding_mode, groups with the same weight shape, 1-D and 3-D
alike) is UNEXPECTED in check_fold, fails assert_fold_close (layer and model form) and is named
by module in check_model, whatever its weight values; 'same' padding equal to its numbers
passes; a float32 fold cast to float16/bfloat16 is named as a dtype mismatch (MISTRUSTED), while
an honest 16-bit fold of 16-bit modules passes; check_model refuses Conv1d/Conv3d up front by
module name; no error names a temporary file; assert_fold_close(fused_model, model, input=x)
takes fuse_modules' fused Sequential as a model.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
import torch.fx.experimental.optimization  # noqa: E402, F811
from torch_models import Small, by_fuse_modules, by_fx, layer, rebuilt, trained_like  # noqa: E402

import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402

CHANGES = {
    "stride": (dict(stride=2), "stride (2, 2), the conv (1, 1)"),
    "padding": (dict(padding=0), "padding (0, 0), the conv (1, 1)"),
    "padding_asymmetric": (dict(padding=(1, 0)), "padding (1, 0), the conv (1, 1)"),
    "dilation": (dict(dilation=2), "dilation (2, 2), the conv (1, 1)"),
    "reflect": (dict(padding_mode="reflect"), "padding_mode 'reflect', the conv 'zeros'"),
    "circular": (dict(padding_mode="circular"), "padding_mode 'circular', the conv 'zeros'"),
    "replicate": (dict(padding_mode="replicate"), "padding_mode 'replicate', the conv 'zeros'"),
    "groups": (dict(in_channels=8, groups=2), "groups 2, the conv 1"),  # the same weight shape (6, 4, 3, 3)
    "valid": (dict(padding="valid"), "padding 'valid' (0, 0), the conv (1, 1)"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_fused_conv_of_other_geometry_is_unexpected_and_named(change):
    conv, bn = layer(2)
    geometry, words = CHANGES[change]
    fused = rebuilt(conv, bn, **geometry)
    r = fct.check_fold(conv, bn, fused)
    assert r.verdict == "UNEXPECTED" and words in r.reason and r.reason in str(r).splitlines()[0], str(r)
    assert r.weights.verdict == "EXPECTED"  # the values are an honest fold: the geometry alone fails
    with pytest.raises(AssertionError, match="computes other than conv . BatchNorm") as e:
        assert_fold_close(fused, (conv, bn))
    assert words in str(e.value) and "what it computes besides them is what is wrong" in str(e.value), str(e.value)


@pytest.mark.parametrize("same", [dict(padding="same"), dict(padding=1, dilation=(1, 1)),
                                  dict(padding=1, padding_mode="zeros")])
def test_the_same_computation_written_otherwise_passes(same):
    conv, bn = layer(2)
    r = fct.check_fold(conv, bn, rebuilt(conv, bn, **same))
    assert r.verdict == "EXPECTED" and not r.geometry, r.report()
    one = torch.nn.Conv2d(4, 6, 1, padding_mode="reflect").eval()  # unpadded: its padding_mode pads nothing
    assert fct.check_fold(one, bn, rebuilt(one, bn, padding_mode="zeros", dilation=3)).verdict == "EXPECTED"


@pytest.mark.parametrize("rank", [1, 3])
def test_1d_and_3d_folds_pass_and_their_geometry_is_checked_too(rank):
    conv, bn = layer(rank, rank=rank)
    assert fct.check_fold(conv, bn, torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)).verdict == "EXPECTED"
    r = fct.check_fold(conv, bn, rebuilt(conv, bn, stride=2))
    assert r.verdict == "UNEXPECTED" and f"stride {(2,) * rank}" in r.reason, r.reason


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_float32_fold_cast_to_16_bits_is_named_as_a_dtype_mismatch(dtype):
    conv, bn = layer(2)
    cast = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn).to(getattr(torch, dtype))
    r = fct.check_fold(conv, bn, cast)
    assert r.verdict == "MISTRUSTED" and r.dtype_mismatch, r.report()
    assert str(r).splitlines()[0].startswith(f"verdict: MISTRUSTED: the fused conv is {dtype}, the conv and BatchNorm "
                                             "float32"), str(r)
    with pytest.raises(AssertionError, match=f"the fused conv is {dtype}"):
        assert_fold_close(cast, (conv, bn))
    back = torch.nn.utils.fusion.fuse_conv_bn_eval(conv.to(getattr(torch, dtype)), bn.to(getattr(torch, dtype)))
    r = fct.check_fold(conv, bn, back)  # conv and bn were cast in place: modules and fold of one dtype
    assert r.verdict == "EXPECTED" and not r.dtype_mismatch, r.report()


def small(rank=2):
    torch.manual_seed(5)
    m = Small(rank)
    trained_like(m.a_bn, 1)
    trained_like(m.b_bn, 2)
    return m.eval(), torch.randn((1, 3) + (6,) * rank)


@pytest.mark.parametrize("fuser", [by_fuse_modules, by_fx])
@pytest.mark.parametrize("change", ["stride", "padding", "reflect", "groups", "dilation"])
def test_check_model_names_the_layer_whose_geometry_changed(fuser, change):
    m, x = small()
    fused = fuser(m)
    assert fct.check_model(m, fused, x, output_samples=4).verdict == "EXPECTED"
    geometry, words = CHANGES[change]
    b = fused.get_submodule("b")
    if change == "groups":  # b: 4 inputs; 2 groups over 8 would not run on a's 4 outputs: a alone is not enough
        geometry = dict(in_channels=8, groups=2)
    with torch.no_grad():
        new = rebuilt(m.b, m.b_bn, **geometry)
        new.weight.copy_(b.weight)
        new.bias.copy_(b.bias)
    fused.b = new
    r = fct.check_model(m, fused, x, output_samples=4)
    assert r.verdict == "UNEXPECTED" and [u["module"] for u in r.unexpected] == ["b"], r.report()
    assert r.answer().startswith("verdict: UNEXPECTED: b: the fused conv has") and words in r.report(), r.report()
    assert "foldcheck-" not in r.report()
    d = r.to_dict()
    assert d["verdict"] == r.verdict and "b" in d["mismatches"] and '"mismatches"' in r.report("json")
    with pytest.raises(AssertionError) as e:
        assert_fold_close(fused, m, input=x)
    assert "b: the fused conv has " in str(e.value) and words in str(e.value), str(e.value)


def test_check_model_names_a_fused_model_cast_to_half():
    m, x = small()
    fused = by_fuse_modules(m)
    fused.b.half()
    r = fct.check_model(m, fused, x, output_samples=4)
    assert r.verdict == "MISTRUSTED" and "b: the fused conv is float16" in r.answer(), r.report()
    whole = fct.check_model(m, by_fuse_modules(m).half(), x)  # every layer a pair: each named
    assert whole.verdict == "MISTRUSTED" and [u["module"] for u in whole.unexpected] == ["a", "b"], whole.report()
    more = torch.nn.Sequential(m, torch.nn.Conv2d(6, 2, 1)).eval()  # a conv outside the pairs, cast too
    cast = torch.ao.quantization.fuse_modules(copy.deepcopy(more), [["0.a", "0.a_bn"], ["0.b", "0.b_bn"]]).half()
    with pytest.raises(ValueError, match="the fused model does not run on x .float32.: its parameters are float16"):
        fct.check_model(more, cast, x)


@pytest.mark.parametrize("rank", [1, 3])
def test_check_model_refuses_other_ranks_up_front_by_module(rank):
    m, x = small(rank)
    with pytest.raises(ValueError, match=rf"check_model: a is a Conv{rank}d \(and 1 more: b\).*check_fold") as e:
        fct.check_model(m, by_fuse_modules(m), x)
    assert "foldcheck-" not in str(e.value) and ".onnx" not in str(e.value)


class Wrapped(torch.nn.Module):
    def __init__(self, inner, cut=False):
        super().__init__()
        self.inner, self.cut = inner, cut

    def forward(self, x):
        y = self.inner(x)
        return y[..., :-1] if self.cut else y


def test_check_models_refusals_name_the_users_objects_not_temporary_files():
    m, x = small()
    fused = by_fuse_modules(m)
    fused.b_bn = torch.nn.Conv2d(6, 5, 1)  # a layer the model does not have: the two cannot be matched
    with pytest.raises(ValueError, match="cannot match the fused model") as e:
        fct.check_model(m, fused, x)
    assert "foldcheck-" not in str(e.value) and ".onnx" not in str(e.value), str(e.value)
    with pytest.raises(ValueError, match=r"the fused model's output on x: shape \[1, 6, 6, 5\]") as e:
        fct.check_model(Wrapped(m).eval(), Wrapped(by_fuse_modules(m), cut=True).eval(), x)
    assert "foldcheck-" not in str(e.value) and ".npy" not in str(e.value), str(e.value)


def test_diagnose_names_the_shapes_and_the_geometry_that_gives_them():
    conv, bn = layer(2)
    x = torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        strided = bn(rebuilt(conv, bn, stride=2)(x) * 0 + conv(x)[..., ::2, ::2])
    with pytest.raises(ValueError, match=r"observed has shape \(1, 6, 4, 4\).*gives \(1, 6, 8, 8\).*stride 2"):
        fct.diagnose(bn, x, strided, conv=conv)
    with pytest.raises(AssertionError, match=r"actual has shape \(1, 6, 4, 4\).*stride 2"):
        assert_fold_close(strided, None, conv=conv, bn=bn, input=x)
    conv1, bn1 = layer(1, rank=1)
    x1 = torch.randn(1, 4, 10)
    with torch.no_grad(), pytest.raises(ValueError, match=r"diagnose: conv is a Conv1d, not a Conv2d \(NCHW\)"):
        fct.diagnose(bn1, x1, bn1(conv1(x1)), conv=conv1)


def test_assert_fold_close_takes_fuse_modules_fused_sequential_as_a_model():
    conv, bn = layer(2)
    m = torch.nn.Sequential(conv, bn, torch.nn.ReLU()).eval()
    x = torch.randn(1, 4, 6, 6)
    fused = torch.ao.quantization.fuse_modules(copy.deepcopy(m), [["0", "1", "2"]])
    assert_fold_close(fused, m, input=x)
    pair = torch.nn.Sequential(conv, bn).eval()
    fused_pair = torch.ao.quantization.fuse_modules(copy.deepcopy(pair), [["0", "1"]])
    assert_fold_close(fused_pair, pair, input=x)
    assert_fold_close(fused[0], (conv, bn))  # fuse_modules' ConvReLU2d: its conv is the fold
    with torch.no_grad():
        fused_pair[0].weight[2] *= 1 + 20e-6
    with pytest.raises(AssertionError, match=r"0: channel 2"):
        assert_fold_close(fused_pair, pair, input=x)
    kept = torch.ao.quantization.fuse_modules_qat(copy.deepcopy(m).train(), [["0", "1", "2"]])
    with pytest.raises(TypeError, match="keeps its BatchNorm apart"):
        fct.check_fold(conv, bn, kept[0])
