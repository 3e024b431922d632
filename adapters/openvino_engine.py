#!/usr/bin/env python3
"""OpenVINO's CPU plugin as a foldcheck engine (adapters/README.md).

  openvino_engine.py [--precision f32|bf16] MODEL INPUT OUTDIR

OpenVINO folds each BatchNormalization into its conv's weights in its own transformations,
inside the plugin: its API exposes no folded weights, so none are written, and the layers
are checked from their outputs. The per-layer values are named as in MODEL: each conv's
input and its BatchNormalization's output (the fused layer's output; asking for the conv's
own output would split the fusion), added as outputs of the model before it is compiled.
The final outputs of that compilation must be bit-identical to those of the model compiled
without them; the manifest says whether they are. --precision sets the CPU plugin's
INFERENCE_PRECISION_HINT (default f32: on a CPU with AVX-512 BF16 the plugin's own default is
bf16, which is not float32 arithmetic). Exit 2 with a message when the model cannot be run.
"""
import argparse

import numpy as np
import onnx
import openvino as ov

from engine_common import Manifest, bn_after, is_layer, run_main


def layer_values(graph):
    """Each layer's (conv, Gemm, MatMul) input and the output of the BatchNormalization after it
    (bn_after), else its own."""
    after = bn_after(graph)
    inits = {i.name for i in graph.initializer}
    names = []
    for n in graph.node:
        if n.op_type != "ConvTranspose" and is_layer(n, inits) and n.input[0] not in inits:
            names += [n.input[0], after.get(n.output[0], n.output[0])]
    return list(dict.fromkeys(names))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("outdir")
    a = ap.parse_args()
    core = ov.Core()
    cfg = {"INFERENCE_PRECISION_HINT": a.precision}
    x = np.load(a.input)
    fused = core.compile_model(core.read_model(a.model), "CPU", cfg)
    y = [v for v in fused(x).values()]
    outs = [o.get_any_name() for o in fused.outputs]
    man = Manifest(a.outdir, f"openvino {ov.get_version()} (CPU, {a.precision})", values_of="model",
                   arithmetic="bf16" if a.precision == "bf16" else "float32")
    for n, v in zip(outs, y):
        man.output(n, v)
    names = [v for v in layer_values(onnx.load(a.model).graph) if v not in outs]
    m = core.read_model(a.model)
    m.add_outputs(names)
    c = core.compile_model(m, "CPU", cfg)
    got = c(x)
    by_name = {o.get_any_name(): got[o] for o in c.outputs}
    man.fusion_preserved(y, [by_name[n] for n in outs])
    for n in names:
        man.value(n, by_name[n])
    man.note("OpenVINO folds inside its CPU plugin and exposes no folded weights: layers are checked from their "
             "outputs")
    man.write()


if __name__ == "__main__":
    run_main("openvino_engine", main)
