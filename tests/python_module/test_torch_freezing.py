"""PyTorch's own fusers on check_model's frozen and compiled paths (issue 40, findings 2 and 3).

What it guards: torch.jit.freeze folds conv -> BatchNorm -> a per-channel mul, add, sub or div
(or a chain of them) into the conv, and inductor's freezing folds binary operations after a
conv the same way: such a conv is MISTRUSTED, naming the operation and the module, never
UNEXPECTED, while a conv that absorbed only its BatchNorm is still judged (one channel scaled
by 20 ppm is UNEXPECTED). Inductor's global freezing with the compiled model run once (its
weights packed for oneDNN) is checked, not a raw crash, and check_model leaves the caller's
compiled object and inductor's setup as they were. A frozen or compiled fused model whose conv
has another stride, padding or dilation is UNEXPECTED naming the conv; a hand-built fused model
of other module names is paired with the model by forward order; check_model refuses
arguments of the wrong kind, naming them, never with a framework's exception.
"""
import copy
import os
import re
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from torch_models import REL, Small, by_compile, by_fuse_modules, by_jit_freeze, rebuilt, trained_like  # noqa: E402

import foldcheck.torch as fct  # noqa: E402


class Base(torch.nn.Module):
    """c -> bn -> tail (an operation by per-channel constants) -> relu -> d -> bn2."""

    def __init__(self):
        super().__init__()
        self.c, self.bn = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.d, self.bn2 = torch.nn.Conv2d(8, 6, 3, padding=1), torch.nn.BatchNorm2d(6)
        g = torch.Generator().manual_seed(7)
        self.register_buffer("k", 0.5 + torch.rand(1, 8, 1, 1, generator=g))
        self.register_buffer("k2", 0.1 * torch.randn(1, 8, 1, 1, generator=g))

    def tail(self, y):
        return y

    def forward(self, x):
        return self.bn2(self.d(torch.relu(self.tail(self.bn(self.c(x))))))


class Mul(Base):
    def tail(self, y):
        return y * self.k


class Add(Base):
    def tail(self, y):
        return y + self.k2


class Sub(Base):
    def tail(self, y):
        return y - self.k2


class Div(Base):
    def tail(self, y):
        return y / self.k


class Chain(Base):
    def tail(self, y):
        return y * self.k + self.k2


class Before(Base):  # the operation between the conv and its BatchNorm
    def forward(self, x):
        return self.bn2(self.d(torch.relu(self.bn(self.c(x) * self.k))))


TAILS = {"mul": (Mul, "a mul"), "add": (Add, "an add"), "sub": (Sub, "a sub"), "div": (Div, "a div"),
         "chain": (Chain, "a mul and an add")}


def model(kind, seed=3):
    torch.manual_seed(seed)
    return trained_like(kind(), seed + 1), torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tail", list(TAILS))
def test_a_freeze_that_folds_an_operation_after_the_batchnorm_is_mistrusted_naming_it(tail):
    kind, words = TAILS[tail]
    m, x = model(kind)
    f = by_jit_freeze(m)
    with torch.no_grad():
        assert torch.allclose(f(x), m(x), atol=1e-5)  # an honest freeze
    r = fct.check_model(m, f, x, output_samples=8)
    assert r.verdict == "MISTRUSTED", r.report()
    assert r.answer().startswith(f"verdict: MISTRUSTED: c: torch.jit.freeze folded {words} after it into this conv "
                                 "besides its BatchNorm"), r.answer()
    assert [(u["module"], u["verdict"]) for u in r.unexpected] == [("c", "MISTRUSTED")], r.report()
    assert r.accuracy_diff["end_to_end"]["observed_output"]["verdict"] == "EXPECTED", r.report()


def test_a_freeze_that_folds_only_batchnorms_is_judged_and_a_corruption_beside_an_absorbed_op_is_seen():
    m, x = model(Base)
    assert fct.check_model(m, by_jit_freeze(m), x, output_samples=8).verdict == "EXPECTED"
    m, x = model(Mul)
    f = by_jit_freeze(m)
    w, b = fct.frozen_fold(f)[1]  # d's: it absorbed its BatchNorm only
    with torch.no_grad():
        w[3] *= 1 + REL
        b[3] *= 1 + REL
    r = fct.check_model(m, f, x, weights_only=True)
    assert r.verdict == "UNEXPECTED", r.report()  # evidence before doubt (the core's ranking)
    # The answer leads with the layer found wrong, and counts the one not judged.
    assert "Layer d is UNEXPECTED" in r.answer() and "(and 1 layer(s) not judged" in r.answer(), r.answer()
    assert [(u["module"], u["verdict"], u["worst_channel"]) for u in r.unexpected] == \
        [("c", "MISTRUSTED", None), ("d", "UNEXPECTED", 3)], r.report()


def test_a_freeze_without_its_folds_is_said_unfolded_not_a_wrong_fold():
    """optimize_numerics=False folds nothing: each pair is named as not folded (its BatchNorm
    kept), not as a fold 1e6 times beyond its bound (its weights read with the BatchNorm gone)."""
    m, x = model(Mul)
    with pytest.warns(FutureWarning):
        f = torch.jit.freeze(torch.jit.script(copy.deepcopy(m)), optimize_numerics=False)
    r = fct.check_model(m, f, x, output_samples=8)
    assert not r.mismatches and [u["module"] for u in r.unexpected] == ["c", "d"], r.report()
    assert all("not folded" in u["note"] and u["worst_ratio"] is None for u in r.unexpected), r.report()


def test_inductor_freezing_is_never_a_false_alarm_and_names_what_it_folded():
    """conv -> mul -> BatchNorm: inductor's binary folding folds the mul and (its rounds
    permitting) the BatchNorm's operations: MISTRUSTED, the mul named, never UNEXPECTED; an
    operation after the BatchNorm it leaves in the graph (torch 2.14: its rounds are spent on
    the BatchNorm's) is no alarm either."""
    m, x = model(Before)
    r = fct.check_model(m, by_compile(m), x, output_samples=8)
    assert r.verdict == "MISTRUSTED" and list(r.mismatches) == ["c"], r.report()
    assert r.mismatches["c"].startswith("torch.compile folded a mul and ") and "after it into this conv" in \
        r.mismatches["c"], r.mismatches
    assert r.accuracy_diff["end_to_end"]["observed_output"]["verdict"] == "EXPECTED", r.report()
    for kind in (Mul, Chain):
        m, x = model(kind)
        r = fct.check_model(m, by_compile(m), x, output_samples=8)
        assert r.verdict in ("EXPECTED", "MISTRUSTED") and set(r.mismatches) <= {"c"}, r.report()
        assert r.accuracy_diff["end_to_end"]["observed_output"]["verdict"] == "EXPECTED", r.report()


class NoBn(torch.nn.Module):
    """A conv followed by a per-channel mul (no BatchNorm), then a conv + BN."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.d, self.bn2 = torch.nn.Conv2d(8, 6, 3, padding=1), torch.nn.BatchNorm2d(6)
        self.register_buffer("k", 0.5 + torch.rand(1, 8, 1, 1, generator=torch.Generator().manual_seed(9)))

    def forward(self, x):
        return self.bn2(self.d(torch.relu(self.c(x) * self.k)))


@pytest.mark.parametrize("fuser", [by_jit_freeze, by_compile])
def test_an_operation_folded_into_a_conv_without_batchnorm_is_named_too(fuser):
    m, x = model(NoBn)
    r = fct.check_model(m, fuser(m), x, output_samples=8)
    assert r.verdict == "MISTRUSTED" and list(r.mismatches) == ["c"], r.report()
    assert "folded a mul after it into this conv: its weights are not a fold of the conv alone" \
        in r.mismatches["c"], r.mismatches


SCRIPT = textwrap.dedent("""
    import copy, warnings
    import torch
    from torch._inductor import config as inductor
    import foldcheck.torch as fct

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.bn = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
            self.d, self.bn2 = torch.nn.Conv2d(8, 6, 3, padding=1), torch.nn.BatchNorm2d(6)

        def forward(self, x):
            return self.bn2(self.d(torch.relu(self.bn(self.c(x)))))

    def packed(graph):  # whether a conv weight of the graph is packed for oneDNN
        gm = graph.owning_module
        return any(n.op == "get_attr" and getattr(getattr(gm, n.target), "is_mkldnn", False) for n in graph.nodes)

    torch.manual_seed(0)
    m = M().eval()
    with torch.no_grad():
        for bn in (m.bn, m.bn2):
            bn.running_var.uniform_(0.5, 2.0)
            bn.running_mean.normal_()
    x = torch.randn(2, 3, 8, 8)
    inductor.freezing = FREEZING
    user = torch.compile(copy.deepcopy(m))
    with torch.no_grad():
        user(x)
    for weights_only in (False, True):
        r = fct.check_model(m, user, x, output_samples=8, weights_only=weights_only)
        print("verdict", r.verdict, len(r.layers), r.answer())
    assert inductor.freezing is FREEZING and inductor.cpp.weight_prepack is True
    assert inductor.post_grad_custom_post_pass is None and inductor.joint_custom_post_pass is None
    seen = []
    inductor.post_grad_custom_post_pass = lambda graph: seen.append(packed(graph))
    with torch.no_grad():
        user(x)
    print("recompiled", bool(seen))
    inductor.freezing = True
    torch._dynamo.reset()  # else the new module reuses the code compiled just above
    with torch.no_grad():
        torch.compile(copy.deepcopy(m))(x)
    print("packed", seen[-1])
""")


@pytest.mark.slow
@pytest.mark.parametrize("freezing", [True, False])
def test_inductor_global_freezing_is_checked_and_the_callers_compilation_left_as_it_was(freezing):
    """A fresh process, as a user's: inductor's global freezing on (its patterns set up with
    weight prepacking by the user's first run: foldcheck's compilation packs its weights too)
    or off; check_model judges (outputs compared, then weights only), leaves the config as it
    was, the user's compiled object compiles again under the user's settings (it does not keep
    foldcheck's compilation), and a later freezing compilation still packs its weights."""
    code = SCRIPT.replace("FREEZING", str(freezing))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=os.environ)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("verdict EXPECTED 2") == 2, p.stdout
    assert "recompiled True" in p.stdout, p.stdout
    if torch.backends.mkldnn.is_available():
        assert "packed True" in p.stdout, p.stdout


GEOMETRY = {"stride": (dict(stride=(2, 2)), "stride (2, 2), the conv (1, 1)"),
            "padding": (dict(padding=(0, 0)), "padding (0, 0), the conv (1, 1)"),
            "dilation": (dict(dilation=(2, 2), padding=(2, 2)), "dilation (2, 2), the conv (1, 1)")}


@pytest.mark.parametrize("fuser", [by_jit_freeze, by_compile])
@pytest.mark.parametrize("change", list(GEOMETRY))
def test_a_frozen_or_compiled_conv_of_other_geometry_is_unexpected_naming_it(fuser, change):
    m, x = model(Small)
    other = copy.deepcopy(m)
    for key, value in GEOMETRY[change][0].items():
        setattr(other.b, key, value)
    r = fct.check_model(m, fuser(other), x, output_samples=8)
    assert r.verdict == "UNEXPECTED" and [u["module"] for u in r.unexpected] == ["b"], r.report()
    assert r.answer().startswith("verdict: UNEXPECTED: b: the fused conv has") and GEOMETRY[change][1] in r.answer()
    assert any("outputs were not compared" in n for n in r.notes), r.notes


class Hand(torch.nn.Module):
    """A hand-built fused Small: its folds under other module names."""

    def __init__(self, m, second=None):
        super().__init__()
        self.first = torch.nn.utils.fusion.fuse_conv_bn_eval(m.a, m.a_bn)
        self.second = second or torch.nn.utils.fusion.fuse_conv_bn_eval(m.b, m.b_bn)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


@pytest.mark.parametrize("change", ["stride", "padding", "reflect"])
def test_a_hand_built_fused_model_of_other_names_is_paired_in_forward_order(change):
    m, x = model(Small)
    r = fct.check_model(m, Hand(m), x, output_samples=8)
    assert r.verdict == "EXPECTED" and [u["module"] for u in r.layers] == ["a", "b"], r.report()
    geometry = {"stride": dict(stride=2), "padding": dict(padding=0), "reflect": dict(padding_mode="reflect")}[change]
    r = fct.check_model(m, Hand(m, rebuilt(m.b, m.b_bn, **geometry)), x, output_samples=8)
    assert r.verdict == "UNEXPECTED" and [u["module"] for u in r.unexpected] == ["b"], r.report()
    assert r.answer().startswith("verdict: UNEXPECTED: b: the fused conv has"), r.answer()
    corrupt = Hand(m)
    with torch.no_grad():
        corrupt.first.weight[2] *= 1 + REL
    r = fct.check_model(m, corrupt, x, weights_only=True)
    assert [(u["module"], u["worst_channel"]) for u in r.unexpected] == [("a", 2)], r.report()


def refusals():
    m, x = model(Small)
    fused = by_fuse_modules(m)
    return m, fused, x


CASES = {
    "fused None": (lambda m, f, x: (m, None, x), TypeError, "check_model: fused is None"),
    "fused a state_dict": (lambda m, f, x: (m, m.state_dict(), x), TypeError,
                           "check_model: fused is a collections.OrderedDict .a state_dict is not a model"),
    "model None": (lambda m, f, x: (None, f, x), TypeError, "check_model: model is None"),
    "x of other channels": (lambda m, f, x: (m, f, torch.randn(1, 5, 8, 8)), ValueError,
                            r"check_model: model does not run on x \(a float32 tensor of shape \(1, 5, 8, 8\)\)"),
    "x of ints": (lambda m, f, x: (m, f, torch.ones(1, 3, 8, 8, dtype=torch.int64)), TypeError,
                  r"check_model: x is a tensor of int64, shape \(1, 3, 8, 8\)"),
    "x a numpy array": (lambda m, f, x: (m, f, x.numpy()), TypeError,
                        r"check_model: x is a numpy.ndarray of shape \(2, 3, 8, 8\).*torch.from_numpy"),
    "x a list": (lambda m, f, x: (m, f, x.tolist()), TypeError, "check_model: x is a list"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fuser", ["fuse_modules", "jit.freeze"])
def test_check_model_refuses_arguments_of_the_wrong_kind_naming_them(case, fuser):
    m, fused, x = refusals()
    if fuser == "jit.freeze":
        fused = by_jit_freeze(m)
    make, error, words = CASES[case]
    with pytest.raises((TypeError, ValueError)) as e:  # its exact type is asserted below
        fct.check_model(*make(m, fused, x))
    assert type(e.value) is error, repr(e.value)
    assert re.search(words, str(e.value)), str(e.value)
    assert "foldcheck-" not in str(e.value) and ".onnx" not in str(e.value), str(e.value)


def test_a_model_fused_before_it_is_frozen_or_compiled_is_judged():
    """fuse_modules, then torch.jit.freeze or torch.compile (a compiled module or function):
    its BatchNorms are gone before freezing, so nothing of them is left to fold; the folds are
    judged (EXPECTED), and a mul the freezing then folds into a fused conv is MISTRUSTED, named."""
    for kind in (Small, Mul):
        m, x = model(kind)
        fused = by_fuse_modules(m)
        for f in (torch.compile(lambda t, fused=fused: fused(t)), by_compile(fused), by_jit_freeze(fused)):
            r = fct.check_model(m, f, x, output_samples=8)
            if kind is Small:
                assert r.verdict == "EXPECTED" and len(r.layers) == 2, r.report()
            else:
                assert r.verdict == "MISTRUSTED" and list(r.mismatches) == ["c"], r.report()
                assert r.mismatches["c"].startswith(f"{r.fuser} folded a mul after it into this conv"), r.mismatches
