"""The outputs checks (foldcheck.torch.diagnose; assert_fold_close on outputs) on the convs and
dtypes users give them (an adversarial pass found them weak).

1. Geometry: a grouped conv (the core reads its groups from the weight's shape), padding='same'
   or 'valid' or a tuple equal on both axes, a dilation along a kernel of size 1 are judged,
   not refused; a conv the core does not model (the axes' strides, dilations or paddings
   differ, 'same' of an even kernel, padding_mode other than zeros, a Conv1d) is refused in the
   caller's words: assert_fold_close names itself (not diagnose), the attribute and its value,
   what it checks, and what checks that conv instead (assert_fold_close on the fused module),
   which then works.
2. Dtype: a float32 layer's output given as float64 (a tensor's .double(), a float64 numpy
   array) is judged as float32 (it was falsely UNEXPECTED, judged in float64 arithmetic); a
   float64 output whose values are not all float32 values is a float64 computation, judged so,
   and assert_fold_close's failure says so.
3. Failure messages (a newcomer's pass): the worst element's channel; a likely cause always (a
   ReLU applied after the BatchNorm, seen as 0 where the layer is negative, named as such; else
   what shows a changed channel); two whole models' outputs without bn= point to the model
   form; a NaN where the exact output overflows is not called finite.
"""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_models import layer  # noqa: E402

import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402


def outputs(conv, bn, x):
    """(the fused conv's output, the unfused layer's output)."""
    with torch.no_grad():
        return torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)(x), bn(conv(x))


def changed(y, channel=3, by=1e-4):
    y = y.clone()
    y[:, channel] *= 1 + by
    return y


ACCEPTED = {
    "groups 2": dict(groups=2, padding=1),
    "depthwise": dict(groups=4, padding=1),
    "same 3": dict(padding="same"),
    "same 5, dilation 2": dict(kernel_size=5, padding="same", dilation=2),
    "valid": dict(padding="valid"),
    "tuple padding (1, 1)": dict(padding=(1, 1)),
    "dilation (2, 1) along a (3, 1) kernel": dict(kernel_size=(3, 1), dilation=(2, 1), padding=(1, 1)),
    "stride (2, 2)": dict(stride=(2, 2), padding=(1, 1), dilation=(1, 1)),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("kw", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_outputs_of_the_geometries_the_core_models_are_judged(kw):
    conv, bn = layer(out_channels=8, **kw)
    x = torch.randn(2, 4, 9, 9)
    fused, unfused = outputs(conv, bn, x)
    assert_fold_close(fused, unfused, conv=conv, bn=bn, input=x)
    assert fct.diagnose(bn, x, fused, conv=conv).verdict.name == "EXPECTED"
    with pytest.raises(AssertionError, match=r"actual is not the layer's output up to rounding \(UNEXPECTED\)"):
        assert_fold_close(changed(fused), unfused, conv=conv, bn=bn, input=x)
    assert fct.diagnose(bn, x, changed(unfused), conv=conv).verdict.name == "UNEXPECTED"


REFUSED = {
    "stride (2, 1)": (dict(stride=(2, 1), padding=1), r"conv\.stride is \(2, 1\): the axes' strides differ"),
    "dilation (2, 1)": (dict(dilation=(2, 1), padding=1), r"conv\.dilation is \(2, 1\) \(kernel_size \(3, 3\)\)"),
    "padding (1, 2)": (dict(padding=(1, 2)), r"conv\.padding is \(1, 2\): the axes' paddings differ"),
    "same of an even kernel": (dict(kernel_size=4, padding="same"),
                               r"conv\.padding is 'same', which PyTorch pads as \(\(1, 2\), \(1, 2\)\)"),
    "same of a (3, 1) kernel": (dict(kernel_size=(3, 1), padding="same"),
                                r"conv\.padding is 'same' \(1, 0\): the axes' paddings differ"),
    "reflect": (dict(padding=1, padding_mode="reflect"), r"conv\.padding_mode is 'reflect', not zeros"),
    "Conv1d": (dict(rank=1), r"conv is a Conv1d, not a Conv2d \(NCHW\)"),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize(("kw", "what"), REFUSED.values(), ids=REFUSED.keys())
def test_a_conv_the_core_does_not_model_is_refused_in_the_callers_words(kw, what):
    conv, bn = layer(out_channels=8, **kw)
    x = torch.randn(2, 4, 9) if isinstance(conv, torch.nn.Conv1d) else torch.randn(2, 4, 9, 9)
    fused, unfused = outputs(conv, bn, x)
    with pytest.raises(ValueError, match="^assert_fold_close on outputs: " + what) as e:
        assert_fold_close(fused, unfused, conv=conv, bn=bn, input=x)
    text = str(e.value)
    assert "diagnose" not in text, text
    assert "outputs are checked for a Conv2d (any groups) with one stride and one dilation" in text, text
    assert "assert_fold_close(fused_conv, (conv, bn)) checks its fold on the weights" in text, text
    assert_fold_close(torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn), (conv, bn))  # the alternative named works
    with pytest.raises(ValueError, match="^diagnose: " + what) as e:
        fct.diagnose(bn, x, fused, conv=conv)
    assert "check_fold(conv, bn, fused_conv) checks its fold on the weights" in str(e.value), str(e.value)


AS_FLOAT64 = {"tensor": lambda y: y.double(), "numpy": lambda y: y.double().numpy(),
              "numpy astype": lambda y: y.numpy().astype(np.float64)}


@pytest.mark.parametrize("widened", AS_FLOAT64.values(), ids=AS_FLOAT64.keys())
def test_a_float32_layers_output_given_as_float64_is_judged_as_float32(widened):
    conv, bn = layer(out_channels=8)
    x = torch.randn(2, 4, 9, 9)
    fused, unfused = outputs(conv, bn, x)
    assert fct.diagnose(bn, x, widened(fused), conv=conv).verdict.name == "EXPECTED"
    assert fct.diagnose(bn, x.double(), widened(fused), conv=conv).verdict.name == "EXPECTED"
    assert_fold_close(widened(fused), widened(unfused), conv=conv, bn=bn, input=x)
    with torch.no_grad():
        alone = bn(x[:, :4].repeat(1, 2, 1, 1))
    assert fct.diagnose(bn, x[:, :4].repeat(1, 2, 1, 1), widened(alone)).verdict.name == "EXPECTED"  # a BatchNorm alone
    # still judged: a changed channel is no float32 rounding, in float64 or not
    assert fct.diagnose(bn, x, widened(changed(fused)), conv=conv).verdict.name == "UNEXPECTED"
    with pytest.raises(AssertionError, match=r"actual is not the layer's output up to rounding \(UNEXPECTED\)") as e:
        assert_fold_close(widened(changed(fused)), unfused, conv=conv, bn=bn, input=x)
    assert "judged in float64" not in str(e.value)  # judged as float32: nothing to say of its dtype


def test_a_float16_layers_output_given_as_float32_is_judged_as_float16():
    conv, bn = layer(out_channels=8, dtype=torch.float16)
    x = torch.randn(2, 4, 9, 9).half()
    fused, unfused = outputs(conv, bn, x)
    assert fct.diagnose(bn, x, fused.float(), conv=conv).verdict.name == "EXPECTED"
    assert_fold_close(fused.float().numpy(), unfused.float(), conv=conv, bn=bn, input=x)


def test_a_float64_output_of_values_float32_cannot_hold_is_judged_in_float64_and_said():
    conv, bn = layer(out_channels=8)
    x = torch.randn(2, 4, 9, 9)
    with torch.no_grad():
        in_float64 = bn.double()(conv.double()(x.double()))  # the float32 modules' values, run in float64
    conv.float(), bn.float()
    assert fct.diagnose(bn, x, in_float64, conv=conv).verdict.name == "EXPECTED"
    assert_fold_close(in_float64, in_float64.numpy(), conv=conv, bn=bn, input=x)
    fused, _ = outputs(conv, bn, x)
    nudged = fused.double() * (1 + 2.0 ** -40)  # a float32 output changed after it, in float64
    with pytest.raises(AssertionError, match=r"actual is not the layer's output up to rounding \(UNEXPECTED\)") as e:
        assert_fold_close(nudged, None, conv=conv, bn=bn, input=x)
    assert ("actual is float64 and the layer float32: judged in float64 arithmetic (the modules run in float64), "
            "since not all its values are float32 values") in str(e.value), str(e.value)


# --- 3. what a failure says --------------------------------------------------------------------

def test_an_output_failure_names_the_channel_and_a_likely_cause():
    conv, bn = layer()
    x = torch.randn(2, conv.in_channels, 8, 8)
    fused, unfused = outputs(conv, bn, x)
    with pytest.raises(AssertionError) as e:
        assert_fold_close(changed(fused, channel=3), unfused, conv=conv, bn=bn, input=x)
    assert re.search(r"worst element \[\d+, 3, \d+, \d+\] \(channel 3\)", str(e.value)), str(e.value)
    assert "Likely cause: none of the slips" in str(e.value) and "names the channel" in str(e.value)


def test_outputs_after_a_relu_are_said_to_be_after_an_activation():
    conv, bn = layer()
    x = torch.randn(2, conv.in_channels, 8, 8)
    fused, unfused = outputs(conv, bn, x)
    with pytest.raises(AssertionError, match="an activation \\(a ReLU\\) applied after the BatchNorm"):
        assert_fold_close(torch.relu(fused), torch.relu(unfused), conv=conv, bn=bn, input=x)


def test_two_models_outputs_without_bn_point_to_the_model_form():
    conv, bn = layer()
    x = torch.randn(2, conv.in_channels, 8, 8)
    fused, unfused = outputs(conv, bn, x)
    with pytest.raises(ValueError, match=re.escape("assert_fold_close(fused_model, model, input=x)")):
        assert_fold_close(fused, unfused, input=x)
