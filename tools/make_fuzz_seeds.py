#!/usr/bin/python3
"""Write the seed inputs of the fuzz targets that need numpy/onnx to make (fuzz/corpus/).

Run with Debian's python3 (python3-numpy, python3-onnx); the seeds are committed, so the
fuzz runs and CI do not need this script. Seeds: .npz archives (stored and deflated),
ONNX Conv -> BatchNormalization models (raw_data, typed fields, float16, an external
initializer in weights.bin as fuzz_onnx's scratch directory holds it, Gemm -> BN), and
suites naming c.json (fuzz_suite_json's scratch case file).
"""
import io
import json
import pathlib
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

root = pathlib.Path(__file__).resolve().parent.parent / "fuzz" / "corpus"


def npz_seeds():
    d = root / "fuzz_npz"
    for name, compress in (("stored.npz", False), ("deflated.npz", True)):
        buf = io.BytesIO()
        arrays: dict[str, np.ndarray] = dict(gamma=np.array([1.0, 0.5], np.float32), beta=np.zeros(2, np.float32),
                      mean=np.array([0.1, -0.2], np.float32), var=np.array([1.0, 2.0], np.float32),
                      eps=np.array([1e-5], np.float64))
        (np.savez_compressed if compress else np.savez)(buf, **arrays)  # type: ignore[arg-type]  # numpy#24624
        (d / name).write_bytes(buf.getvalue())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        b = io.BytesIO()
        np.save(b, np.arange(6, dtype=np.float16).reshape(2, 3))
        z.writestr("w.npy", b.getvalue())
        z.writestr("notes.txt", "not an array")
    (d / "mixed.npz").write_bytes(buf.getvalue())


def conv_bn(weight, bn_dtype=np.float32, external=False, typed=False):
    o = weight.shape[0]
    w = numpy_helper.from_array(weight, "w")
    if typed:
        w = helper.make_tensor("w", TensorProto.FLOAT, weight.shape, weight.flatten().tolist())
    if external:
        w = TensorProto()
        w.name = "w"
        w.data_type = TensorProto.FLOAT
        w.dims.extend(weight.shape)
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(weight.size * 4))):
            e = w.external_data.add()
            e.key, e.value = k, v
    inits = [w] + [numpy_helper.from_array(np.asarray(v, bn_dtype), n) for n, v in
                   (("g", np.ones(o)), ("b", np.zeros(o)), ("m", np.linspace(-1, 1, o)), ("v", np.linspace(0.5, 2, o)))]
    C = weight.shape[1]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=list(weight.shape[2:])),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn", epsilon=1e-5)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, o, 4, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="fuzz-seed")


def gemm_bn():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "w")
    inits = [w] + [numpy_helper.from_array(np.full(3, v, np.float32), n)
                   for n, v in (("g", 1), ("b", 0), ("m", 0), ("v", 1))]
    nodes = [helper.make_node("Gemm", ["x", "w"], ["c"], transB=1),
             helper.make_node("Identity", ["c"], ["c2"]),
             helper.make_node("BatchNormalization", ["c2", "g", "b", "m", "v"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def onnx_seeds():
    d = root / "fuzz_onnx"
    rng = np.random.default_rng(1)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    onnx.save(conv_bn(w), d / "conv_bn_raw.onnx")
    onnx.save(conv_bn(w, typed=True), d / "conv_bn_typed.onnx")
    onnx.save(conv_bn(w, bn_dtype=np.float16), d / "conv_bn_f16_params.onnx")
    onnx.save(conv_bn(rng.standard_normal((4, 1, 2, 2)).astype(np.float32), external=True), d / "conv_bn_external.onnx")
    onnx.save(gemm_bn(), d / "gemm_identity_bn.onnx")


def suite_seeds():
    d = root / "fuzz_suite_json"
    suites = {
        "cases.json": {"name": "s", "entries": [{"case": "c.json"},
                                                {"case": "c.json", "name": "c2", "expect": "UNEXPECTED",
                                                 "override": {"bn": {"var": 0.25, "eps": 1e-3}},
                                                 "attribution_elements": 4, "seed": 7}]},
        "models.json": {"entries": [{"model": "m.onnx", "observed": "f.onnx", "input": "x.npy", "recipe": "pytorch",
                                     "output_samples": 2, "weights_only": False, "seed": 3}]},
    }
    for name, s in suites.items():
        (d / name).write_text(json.dumps(s, indent=1) + "\n")


npz_seeds()
onnx_seeds()
suite_seeds()
