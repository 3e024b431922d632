#!/usr/bin/env python3
"""foldcheck engines and NVIDIA Polygraphy side by side, on the same models and corruptions.

  .venv/bin/python tools/polygraphy_side_by_side.py MODEL.onnx X.npy --layer NODE [--layer NODE ...]
      [--channel 7] [--rel 0 2e-6 60e-6 1e-3] [--foldcheck build/harness/foldcheck] [--markdown]

For each relative change REL of output channel CHANNEL of each conv NODE (0: no change),
ONNX Runtime's basic-level optimized model (its Conv+BatchNormalization fusion) is written
by adapters/onnxruntime_engine.py --corrupt NODE:CHANNEL:REL, and then:
  polygraphy   the way its users check a model: the original run by ONNX Runtime with every
               tensor marked as an output (`--onnx-outputs mark all`, saved), against the
               optimized model run the same way (`--load-outputs`), with Polygraphy's default
               tolerances (rtol = atol = 1e-5, elementwise) and with `--check-error-stat
               median`. Reported: pass or fail, and the first tensor it flags.
  foldcheck    `foldcheck engines MODEL --adapter` with the same adapter: the verdict, the
               first layer (and channel) beyond its bound from the weights and from the
               per-layer outputs.
Prints one row per case (a Markdown table with --markdown), for the README.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "tools" / "engines" / "onnxruntime_engine.py"
POLYGRAPHY = [str(pathlib.Path(sys.executable).parent / "polygraphy")]  # the console script beside this Python


def polygraphy_check(model, folded, inputs, work, extra):
    """Polygraphy's verdict on `folded` against `model`, every tensor marked: (passed, first flagged tensor)."""
    ref = work / "reference.json"
    if not ref.exists():
        subprocess.run(POLYGRAPHY + ["run", str(model), "--onnxrt", "--onnx-outputs", "mark", "all", "--load-inputs",
                                     str(inputs), "--save-outputs", str(ref)], check=True, capture_output=True)
    r = subprocess.run(POLYGRAPHY + ["run", str(folded), "--onnxrt", "--onnx-outputs", "mark", "all", "--load-inputs",
                                     str(inputs), "--load-outputs", str(ref)] + extra, capture_output=True, text=True)
    log = r.stdout + r.stderr
    flagged = re.findall(r"Error Metrics: (\S+)\n(?:.*\n){0,12}?.*FAILED", log)
    first = re.search(r"FAILED \| Output: '([^']+)'", log)
    return r.returncode == 0, first.group(1) if first else (flagged[0] if flagged else None)


def foldcheck_check(fc, model, x, node, channel, rel):
    corrupt = f" --corrupt {node}:{channel}:{rel}" if rel else ""
    cmd = f"'{sys.executable}' '{ADAPTER}' --level basic{corrupt} {{model}} {{input}} {{outdir}}"
    r = subprocess.run([fc, "engines", str(model), "--input", str(x), "--adapter", "ort=" + cmd, "--format", "json",
                        "-q", "--output-samples", "0"], capture_output=True, text=True,
                       env={**os.environ, "FOLDCHECK_PYTHON": sys.executable})
    if r.returncode not in (0, 1):
        raise SystemExit(f"foldcheck engines failed: {r.stderr}")
    e = json.loads(r.stdout)["engines"][0]

    def where(field, key):
        name = e[field]
        if not name:
            return "-"
        layer = [lay for lay in e["layers"] if lay["name"] == name][0]
        ch = layer["weights"].get("worst_channel") if key == "w" else layer["outputs"]["channels"]["worst"]["channel"]
        return f"{name} ch {ch}"

    return e["verdict"], where("first_weights_beyond", "w"), where("first_outputs_beyond", "o")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("x", type=pathlib.Path)
    ap.add_argument("--layer", action="append", required=True)
    ap.add_argument("--channel", type=int, default=7)
    ap.add_argument("--rel", type=float, nargs="+", default=[0, 2e-6, 60e-6, 1e-3])
    ap.add_argument("--foldcheck", default=str(ROOT / "build" / "harness" / "foldcheck"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    from polygraphy.json import save_json  # noqa: PLC0415 (polygraphy loads once the arguments are read)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        inputs = work / "inputs.json"
        save_json([{"input": np.load(a.x)}], str(inputs))
        head = ["model", "change", "polygraphy (rtol=atol=1e-5)", "polygraphy (median)", "foldcheck", "from weights",
                "from layer outputs"]
        rows: list[list[str]] = []
        cases = [(None, 0.0)] + [(n, r) for n in a.layer for r in a.rel if r]
        for node, rel in cases:
            out = work / f"ort_{len(rows)}"
            corrupt = ["--corrupt", f"{node}:{a.channel}:{rel}"] if rel else []
            subprocess.run([sys.executable, str(ADAPTER), "--level", "basic", *corrupt, str(a.model), str(a.x),
                            str(out)], check=True, capture_output=True)
            folded = out / "folded.onnx"
            p1 = polygraphy_check(a.model, folded, inputs, work, [])
            p2 = polygraphy_check(a.model, folded, inputs, work, ["--check-error-stat", "median"])
            f = foldcheck_check(a.foldcheck, a.model, a.x, node, a.channel, rel)
            show = lambda p: "pass" if p[0] else f"FAIL at {p[1]}"  # noqa: E731
            change = "none (honest fold)" if not rel else f"{node} ch {a.channel} x(1{rel:+g})"
            rows.append([a.model.stem, change, show(p1), show(p2), *f])
            print(" | ".join(rows[-1]), file=sys.stderr)
    if a.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in rows:
            print("\t".join(r))


if __name__ == "__main__":
    main()
