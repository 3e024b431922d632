"""Names the user's code chose (a conv subclass's name, a hook function's __name__) reach the
sentences of a fusion check through the one neutraliser of names: a bidi override or a terminal
escape in them is shown escaped in .geometry, the answer, the report and assert_fold_close's
message (issue 40: an adversarial pass found them raw while module names were escaped)."""
import copy

import pytest

torch = pytest.importorskip("torch")

from torch_models import layer  # noqa: E402

import foldcheck.torch as fct  # noqa: E402
from foldcheck.testing import assert_fold_close  # noqa: E402

RAW = ("\u202e", "\x1b")


def _pair():
    conv, bn = layer(out_channels=4)
    return conv, bn, torch.nn.utils.fusion.fuse_conv_bn_eval(copy.deepcopy(conv), bn)


def _hooked(fused):
    def hook(module, inputs, output):
        return output * 2

    hook.__name__ = hook.__qualname__ = "h\u202eook\x1b[31m"
    fused.register_forward_hook(hook)
    return fused


def _subclassed(fused):
    sub = type("Ev\u202eil\x1b[2J", (torch.nn.Conv2d,), {"_conv_forward": lambda self, x, w, b: 2 * x})
    g = sub(4, 4, 3, padding=1)
    g.load_state_dict(fused.state_dict())
    return g


@pytest.mark.parametrize("change", [_hooked, _subclassed], ids=["hook", "subclass"])
def test_names_in_a_fusion_checks_sentences_are_escaped(change):
    conv, bn, fused = _pair()
    r = fct.check_fold(conv, bn, change(fused))
    assert r.verdict in ("UNEXPECTED", "MISTRUSTED")
    texts = [*r.geometry, r.dtype_mismatch or "", r.answer(), r.report(), str(r)]
    assert all(c not in t for t in texts for c in RAW), texts
    assert any("\\u202E" in t for t in texts), texts
    with pytest.raises(AssertionError) as failed:
        assert_fold_close(change(_pair()[2]), (conv, bn))
    assert all(c not in str(failed.value) for c in RAW) and "\\u202E" in str(failed.value)
