#!/usr/bin/env python3
"""Real TVM as the compiler of `foldcheck bisect --cmd`.

  tvm_bisect.py --enabled {enabled} --disabled {disabled} -o {out} --input X.npy --weights W.npy
                [--bn BN.npz] [--inject-bad-eps]

Compiles one conv + BatchNorm layer (the weights OIHW, padding (K - 1) / 2, the BatchNorm's
gamma, beta, mean, var, eps from BN.npz, a fresh BatchNorm's for a key left out) with
apache-tvm's Relax: the passes in PASSES that `{enabled}` names run, in that order, inside a
PassContext(opt_level=3, disabled_pass=the rest), then relax.build for the CPU (llvm) and
its VM runs X; the output is written to OUT (.npy, float32). `{disabled}` is taken as
given: TVM skips a pass named in disabled_pass wherever it appears, relax.build's own
pipeline included.

--inject-bad-eps adds the pass BadEpsilon (first in PASSES): it rewrites every batch_norm's
epsilon to 1e-3 (Keras' default) — a frontend that reads the wrong attribute, in TVM's own
pass machinery — so that a bisect has a real, broken pass to name.

  foldcheck bisect --cmd '.venv/bin/python adapters/tvm_bisect.py --enabled {enabled} \\
      --disabled {disabled} -o {out} --input x.npy --weights w.npy --bn bn.npz' \\
      --passes FoldBatchnormToConv2D,FoldConstant --input x.npy --weights w.npy --bn bn.npz
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bisect_layer import layer, names, parser, refuse_unknown

PASSES = ["FoldBatchnormToConv2D", "FoldConstant"]


def bad_epsilon_pass(tvm, relax):
    """BadEpsilon: a module pass rewriting every relax.nn.batch_norm's epsilon to 1e-3."""

    @relax.expr_functor.mutator
    class WrongEps(relax.PyExprMutator):  # type: ignore[name-defined]  # relax: the module given
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if getattr(call.op, "name", "") == "relax.nn.batch_norm":
                a = call.attrs
                return relax.op.nn.batch_norm(*call.args, axis=int(a.axis), epsilon=1e-3, center=bool(a.center),
                                              scale=bool(a.scale), momentum=float(a.momentum),
                                              training=bool(a.training))
            return call

    @tvm.transform.module_pass(opt_level=0, name="BadEpsilon")
    def bad_epsilon(mod, ctx):
        for gv, f in list(mod.functions.items()):
            if isinstance(f, relax.Function):
                mod[gv] = WrongEps().visit_expr(f)
        return mod

    return bad_epsilon


def main():
    ap = parser(__doc__)
    a = ap.parse_args()
    refuse_unknown(ap, a, (["BadEpsilon"] if a.inject_bad_eps else []) + PASSES)
    x, w, bn, eps = layer(a, ap)
    import tvm  # noqa: PLC0415 (TVM loads once the arguments are read)
    from tvm import relax  # noqa: PLC0415

    from tvm_fold import conv_bn_module  # noqa: PLC0415

    available = {"BadEpsilon": bad_epsilon_pass(tvm, relax)} if a.inject_bad_eps else {}
    available.update({p: getattr(relax.transform, p)() for p in PASSES})
    mod = conv_bn_module(w, bn, eps, x.shape)
    with tvm.transform.PassContext(opt_level=3, disabled_pass=names(a.disabled)):
        mod = tvm.transform.Sequential([available[n] for n in available if n in names(a.enabled)])(mod)
        ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    y = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.save(a.out, y.astype(np.float32))


if __name__ == "__main__":
    main()
