#!/usr/bin/env python3
"""onnxoptimizer's fuse_bn_into_conv as a foldcheck engine (adapters/README.md).

  onnxoptimizer_engine.py MODEL INPUT OUTDIR

onnxoptimizer rewrites models; it does not run them. The pass fuse_bn_into_conv alone
(0.4.2) writes the fold as ops (Add, Sqrt, Div, Mul, Sub on the BatchNorm's initializers)
that compute the folded weights and biases when the model runs. Those ops are evaluated here
by ONNX Runtime in float32 (optimizations disabled: op by op, as onnxoptimizer wrote them)
and replaced by their values, and the result is written as OUTDIR/folded.onnx: onnxoptimizer's
fold as a runtime computes it. The per-layer outputs are those of that model run by ONNX
Runtime with its optimizations disabled (nothing re-folded or fused). Exit 2 with a message
when the model cannot be folded or run.
"""
import argparse
import os

import numpy as np
import onnx
import onnx.numpy_helper
import onnxoptimizer
import onnxruntime as ort

from engine_common import Manifest, conv_values, run_main


def session(model_bytes):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def evaluate_constant_ops(model, x):
    """The model with every node computed from initializers alone replaced by its values."""
    g = model.graph
    known = {i.name for i in g.initializer}
    const_nodes = []
    for n in g.node:  # topological order: a node of constants makes its outputs constants
        if n.op_type == "Constant" or (n.input and all(v in known or v == "" for v in n.input)):
            const_nodes.append(n)
            known.update(n.output)
    outs = [v for n in const_nodes for v in n.output]
    if not outs:
        return model, 0
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for v in outs:
        probe.graph.output.append(onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    s = session(probe.SerializeToString())
    names = [o.name for o in g.output]
    values = s.run(outs, {s.get_inputs()[0].name: x})
    keep = [n for n in g.node if n not in const_nodes]
    del g.node[:]
    g.node.extend(keep)
    used = {v for n in keep for v in n.input} | set(names)
    g.initializer.extend(onnx.numpy_helper.from_array(v, n) for n, v in zip(outs, values) if n in used)
    kept = [i for i in g.initializer if i.name in used]  # the BatchNorms' parameters are no longer used
    del g.initializer[:]
    g.initializer.extend(kept)
    return model, len(const_nodes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("outdir")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    x = np.load(a.input)
    folded, evaluated = evaluate_constant_ops(onnxoptimizer.optimize(onnx.load(a.model), ["fuse_bn_into_conv"]), x)
    onnx.save(folded, os.path.join(a.outdir, "folded.onnx"))
    man = Manifest(a.outdir, f"onnxoptimizer {onnxoptimizer.__version__} (fuse_bn_into_conv; run by onnxruntime "
                             f"{ort.__version__}, optimizations off)", folded_model="folded.onnx")
    if evaluated:
        man.note(f"{evaluated} ops of onnxoptimizer's fold (on initializers) evaluated by onnxruntime in float32 "
                 "and written as initializers")
    outs = [o.name for o in folded.graph.output]
    marked = [v for v in conv_values(folded.graph) if v not in outs]
    for v in marked:
        folded.graph.output.append(onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    s = session(folded.SerializeToString())
    got = s.run(outs + marked, {s.get_inputs()[0].name: x})
    for n, v in zip(outs, got):
        man.output(n, v)
    for n, v in zip(marked, got[len(outs):]):
        man.value(n, v)
    man.data["fusion_preserved"] = True  # one run gives both: the same computation
    man.write()


if __name__ == "__main__":
    run_main("onnxoptimizer_engine", main)
