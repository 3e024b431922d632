#!/usr/bin/env python3
"""ONNX Runtime as a foldcheck engine (the adapter protocol: adapters/README.md).

  onnxruntime_engine.py --level basic|extended|all [--corrupt NODE:CHANNEL:REL] MODEL INPUT OUTDIR

1. Runs MODEL on INPUT with ONNX Runtime's CPU provider at the optimization level, and saves
   the graph ORT optimized (SessionOptions.optimized_model_filepath) as OUTDIR/folded.onnx,
   exactly as ORT wrote it: its Conv+BatchNormalization fusion at `basic`, Conv+activation
   fused into com.microsoft:FusedConv at `extended`, NCHWc-blocked convs at `all`.
2. Per-layer outputs without breaking the fusion: the saved optimized graph, with the input
   and output of every conv marked as graph outputs, run with optimizations disabled (so
   nothing is re-fused or split). Its final outputs must be bit-identical to the fused run's;
   the manifest says whether they are.
--corrupt (a fault to inject, for testing foldcheck itself): after ORT wrote its optimized
model, output channel CHANNEL of conv node NODE (weights and bias) is scaled by (1 + REL) in
float32, and everything is then run from that model.
Writes OUTDIR/manifest.json and the .npy files it names. Exit 2 with a message on stderr
when the model or input cannot be run.
"""
import argparse
import os

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

from engine_common import CONV_OPS, Manifest, conv_values, run_main

LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def has_external_data(model):
    """Whether the model file keeps initializers in an external data file beside it."""
    m = onnx.load(model, load_external_data=False)
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)


def session(model, level, saved=None, external=False):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3  # errors only: `all` warns that its file is machine-specific
    if saved:
        so.optimized_model_filepath = saved
        if external:
            # ORT would write the optimized model's external initializers as references to the
            # original's data file, relative to OUTDIR, where it is not: the saved model could
            # not be loaded. Its own data file beside it, in OUTDIR, instead.
            data = os.path.splitext(os.path.basename(saved))[0] + ".data"
            so.add_session_config_entry("session.optimized_model_external_initializers_file_name", data)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def corrupt(path, spec):
    """Scales one output channel of one conv of the model at `path` (NODE:CHANNEL:REL), in place."""
    node_name, channel, rel = spec.rsplit(":", 2)
    channel, rel = int(channel), float(rel)
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    nodes = [n for n in m.graph.node if n.name == node_name and n.op_type in CONV_OPS]
    if not nodes:
        raise ValueError(f"--corrupt: no conv node named {node_name!r} in the optimized model")
    for v in nodes[0].input[1:3]:
        t = onnx.numpy_helper.to_array(inits[v]).copy()
        t[channel] = (t[channel].astype(np.float32) * np.float32(1 + rel)).astype(t.dtype)
        inits[v].CopyFrom(onnx.numpy_helper.from_array(t, v))
    onnx.save(m, path)


def with_outputs(path, names):
    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    for v in names:
        if v not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    return m.SerializeToString()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", choices=sorted(LEVELS), required=True)
    ap.add_argument("--corrupt", metavar="NODE:CHANNEL:REL", help="scale one conv output channel (testing)")
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("outdir")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    folded = os.path.join(a.outdir, "folded.onnx")
    x = np.load(a.input)
    fused = session(a.model, LEVELS[a.level], saved=folded, external=has_external_data(a.model))
    if a.corrupt:
        corrupt(folded, a.corrupt)
        fused = session(folded, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    feed = {fused.get_inputs()[0].name: x}
    outs = [o.name for o in fused.get_outputs()]
    y = fused.run(outs, feed)
    setting = a.level + (f", corrupted {a.corrupt}" if a.corrupt else "")
    man = Manifest(a.outdir, f"onnxruntime {ort.__version__} ({setting})", folded_model="folded.onnx")
    for n, v in zip(outs, y):
        man.output(n, v)
    marked = [v for v in conv_values(onnx.load(folded).graph) if v not in outs]
    try:
        plain = session(with_outputs(folded, marked), ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    except Exception as e:  # noqa: BLE001 - an optimized graph ORT cannot load back unoptimized
        man.note(f"per-layer outputs not taken: the optimized model does not load unoptimized: {e}")
    else:
        got = plain.run(outs + marked, feed)
        man.fusion_preserved(y, got[:len(outs)])
        for n, v in zip(marked, got[len(outs):]):
            man.value(n, v)
    man.write()


if __name__ == "__main__":
    run_main("onnxruntime_engine", main)
