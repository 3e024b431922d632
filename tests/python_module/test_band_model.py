"""`accuracy-diff --observed-output`'s band (issue 42): on a torchvision ResNet-18 with trained-like
BatchNorm statistics and real ONNX Runtime, an honest output passes from the output alone, and the
answer states the one-channel change it could have seen (about 27 ppm, the median over channels);
one channel of one folded conv scaled by 1 + 20e-6 (far inside the end-to-end bound, 0.003 of it,
and EXPECTED before the band) exits 1 SUSPICIOUS, naming that layer and channel first with the
change's size. The same on a MobileNetV2 whose BatchNorm statistics are its own activations'
(depthwise convs, ReLU6). A 224x224 image sees 20 ppm only on channels whose floor is below it;
four images as one batch sum each direction's evidence: their floor is below one image's, and
20 ppm of a channel is named with its size.
"""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from torch_models import trained_like, trained_like_on  # noqa: E402


def exported_with_ort(d, m, x):
    """m exported for x[:1] (BatchNorms kept) to d/model.onnx, x to d/x.npy (the first item alone:
    x0.npy), ORT's basic-level folded model to d/folded.onnx and its outputs on each item, stacked,
    to d/y_basic.npy (the first: y0.npy)."""
    torch.onnx.export(m, x[:1], str(d / "model.onnx"), opset_version=13, dynamo=False,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    np.save(d / "x.npy", x.numpy())
    np.save(d / "x0.npy", x[:1].numpy())
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(d / "folded.onnx")
    s = ort.InferenceSession(str(d / "model.onnx"), so, providers=["CPUExecutionProvider"])
    y = np.concatenate([s.run(None, {s.get_inputs()[0].name: x[i:i + 1].numpy()})[0] for i in range(len(x))])
    np.save(d / "y_basic.npy", y)
    np.save(d / "y0.npy", y[:1])
    return d


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory):
    torch.manual_seed(0)  # the conv weights' initialisation
    m = trained_like(torchvision.models.resnet18(weights=None), 0)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return exported_with_ort(tmp_path_factory.mktemp("band_r18"), m, x)


@pytest.fixture(scope="module")
def mobilenet_v2(tmp_path_factory):
    torch.manual_seed(0)
    calibration = torch.randn(16, 3, 224, 224, generator=torch.Generator().manual_seed(100))
    m = trained_like_on(torchvision.models.mobilenet_v2(weights=None), 0, calibration)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return exported_with_ort(tmp_path_factory.mktemp("band_mbv2"), m, x)


@pytest.fixture(scope="module")
def resnet18_batch(tmp_path_factory):
    """Four 112x112 images as a batch of a model exported for one."""
    torch.manual_seed(0)
    m = trained_like(torchvision.models.resnet18(weights=None), 0)
    x = torch.randn(4, 3, 112, 112, generator=torch.Generator().manual_seed(1))
    return exported_with_ort(tmp_path_factory.mktemp("band_r18_batch"), m, x)


def ort_with_channel_scaled(d, conv_name, channel, by):
    """ORT's own folded model with one output channel of one folded conv scaled, run as it is (on
    each image of x.npy, one at a time: the model's batch is 1)."""
    m = onnx.load(str(d / "folded.onnx"))
    node = next(n for n in m.graph.node if n.op_type == "Conv" and n.name == conv_name)
    init = next(i for i in m.graph.initializer if i.name == node.input[1])
    w = numpy_helper.to_array(init).copy()
    w[channel] *= np.float32(1 + by)
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.load(d / "x.npy")
    return np.concatenate([s.run(None, {s.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])


def accuracy_diff(foldcheck_bin, d, observed, x="x.npy"):
    """The exit code and the text report (answer first; the band's lines under the observed output)."""
    p = subprocess.run([foldcheck_bin, "accuracy-diff", str(d / "model.onnx"), "--input", str(d / x),
                        "--observed-output", str(observed), "--no-attribution", "-q"], capture_output=True, text=True)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, p.stdout


def answer(text):
    return next(line for line in text.splitlines() if line.strip().startswith("answer:"))


def honest_passes_and_20ppm_is_named(foldcheck_bin, d, conv, channel):
    code, text = accuracy_diff(foldcheck_bin, d, d / "y_basic.npy")
    assert code == 0, answer(text)
    assert "answer: EXPECTED: The observed output is EXPECTED" in answer(text)
    floor = float(re.search(r"change above about ([0-9.e+-]+) ppm would have been seen", answer(text)).group(1))
    assert 1 < floor < 200
    assert re.search(r"band \(\d+ directions.*: 0 beyond", text)

    np.save(d / "y_changed.npy", ort_with_channel_scaled(d, conv, channel, 20e-6))
    code, text = accuracy_diff(foldcheck_bin, d, d / "y_changed.npy")
    assert code == 1, answer(text)
    a = answer(text)
    assert f"The observed output is SUSPICIOUS: along channel {channel} of layer {conv}" in a
    # The change's size (a float64 run along the named direction); the bound sees nothing.
    change = float(re.search(r"a change of about ([0-9.e+-]+) ppm there", a).group(1))
    assert change == pytest.approx(20, rel=0.15)
    within = float(re.search(r"it is within ([0-9.e+-]+) of its end-to-end", a).group(1))
    assert within < 0.05


@pytest.mark.slow
def test_resnet18_honest_ort_output_passes_and_a_20ppm_channel_change_is_named(foldcheck_bin, resnet18):
    honest_passes_and_20ppm_is_named(foldcheck_bin, resnet18, "/layer3/layer3.1/conv1/Conv", 5)


@pytest.mark.slow
def test_mobilenet_v2_honest_ort_output_passes_and_a_20ppm_channel_change_is_named(foldcheck_bin, mobilenet_v2):
    honest_passes_and_20ppm_is_named(foldcheck_bin, mobilenet_v2, "/features/features.4/conv/conv.1/conv.1.0/Conv", 3)


def floor_of(text):
    return float(re.search(r"change above about ([0-9.e+-]+) ppm would have been seen", answer(text)).group(1))


@pytest.mark.slow
def test_a_batch_of_inputs_lowers_the_floor_and_names_a_20ppm_channel_change(foldcheck_bin, resnet18_batch):
    """Four 112x112 images as one batch for a batch-1 model: the band sums each direction over them,
    so its floor falls below one image's, and 20 ppm of one channel is named with its size."""
    d = resnet18_batch
    code, one = accuracy_diff(foldcheck_bin, d, d / "y0.npy", x="x0.npy")
    assert code == 0, answer(one)
    code, four = accuracy_diff(foldcheck_bin, d, d / "y_basic.npy")
    assert code == 0, answer(four)
    assert floor_of(four) < 0.8 * floor_of(one), (answer(one), answer(four))

    np.save(d / "y_changed.npy", ort_with_channel_scaled(d, "/layer3/layer3.1/conv1/Conv", 5, 20e-6))
    code, text = accuracy_diff(foldcheck_bin, d, d / "y_changed.npy")
    assert code == 1, answer(text)
    a = answer(text)
    assert "The observed output is SUSPICIOUS: along channel 5 of layer /layer3/layer3.1/conv1/Conv" in a
    change = float(re.search(r"a change of about ([0-9.e+-]+) ppm there", a).group(1))
    assert change == pytest.approx(20, rel=0.2)
