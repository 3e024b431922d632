"""What every built-in adapter shares (the adapter protocol: adapters/README.md)."""
import json
import os
import sys

import numpy as np

CONV_OPS = {"Conv", "FusedConv", "ConvTranspose"}


class Manifest:
    """OUTDIR/manifest.json and the .npy files it names, written as they are added."""

    def __init__(self, outdir, engine, folded_model=None, values_of=None, arithmetic="float32"):
        # arithmetic: what the engine's convs compute in, declared (the engines command's
        # --arithmetic is for engines that do not say): the built-in engines run on this CPU.
        os.makedirs(outdir, exist_ok=True)
        self.outdir = outdir
        self.data = {"protocol": 1, "engine": engine, "folded_model": folded_model,
                     "values_of": values_of or ("folded_model" if folded_model else "model"),
                     "arithmetic": arithmetic, "accumulation": "direct",
                     "outputs": {}, "values": {}, "notes": []}

    def _save(self, kind, name, array):
        f = f"{kind}_{len(self.data[kind + 's'])}.npy"
        np.save(os.path.join(self.outdir, f), np.ascontiguousarray(array))
        self.data[kind + "s"][name] = f

    def output(self, name, array):
        self._save("output", name, array)

    def value(self, name, array):
        self._save("value", name, array)

    def note(self, text):
        self.data["notes"].append(text)

    def fusion_preserved(self, fused, again):
        """Whether the per-layer run reproduced the fused run's final outputs bit for bit."""
        self.data["fusion_preserved"] = bool(len(fused) == len(again) and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
            for a, b in zip(fused, again)))

    def write(self):
        with open(os.path.join(self.outdir, "manifest.json"), "w") as fh:
            json.dump(self.data, fh, indent=1)


# Linear layers foldcheck also checks per layer (as a 1 x 1 conv over their rows) when their
# weight is an initializer: a Linear -> BatchNorm an engine folds, or leaves unfolded.
LINEAR_OPS = {"Gemm", "MatMul"}


def is_layer(node, inits):
    """A conv, or a Gemm/MatMul with a constant weight (a layer foldcheck checks)."""
    return node.op_type in CONV_OPS or (node.op_type in LINEAR_OPS and len(node.input) > 1 and node.input[1] in inits)


def bn_after(graph):
    """{a value: the output of the BatchNormalization applied to it}, through Identity nodes between
    them (foldcheck judges a layer left unfolded at that BatchNormalization's output, and finds it
    the same way)."""
    consumers: dict[str, list] = {}
    for n in graph.node:
        for v in n.input:
            consumers.setdefault(v, []).append(n)

    def bn_of(value, seen=()):
        for n in consumers.get(value, []):
            if n.op_type == "BatchNormalization":
                return n.output[0]
            if n.op_type == "Identity" and n.output and n.output[0] not in seen:
                found = bn_of(n.output[0], (*seen, n.output[0]))
                if found:
                    return found
        return None
    return {v: b for v in consumers for b in [bn_of(v)] if b}


def conv_values(graph):
    """The data input and output of every layer node (conv, Gemm, MatMul with a constant weight)
    of an ONNX graph, and the output of a BatchNormalization after it (bn_after), in order, once each."""
    inits = {i.name for i in graph.initializer}
    # A layer the engine left unfolded is judged at its BatchNormalization's output (foldcheck
    # reads the values after it): that value too.
    after = bn_after(graph)
    # A MatMul's bias added by an Add of a constant (foldcheck reads the layer's output after it).
    bias_add = {n.input[0] if n.input[1] in inits else n.input[1]: n.output[0]
                for n in graph.node if n.op_type == "Add" and len(n.input) == 2 and (set(n.input) & inits)}
    names = []
    for node in graph.node:
        if is_layer(node, inits):
            bias = bias_add.get(node.output[0]) if node.op_type == "MatMul" else None
            names += [v for v in (node.input[0], node.output[0], bias, after.get(node.output[0]))
                      if v and v not in inits]
    return list(dict.fromkeys(names))


def run_main(prog, main):
    """Runs main(); a failure of the engine or the inputs exits 2 with one line on stderr."""
    try:
        main()
    except Exception as e:  # noqa: BLE001 - any engine error is reported, not a traceback
        print(f"{prog}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
