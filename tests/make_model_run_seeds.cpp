// make_model_run_seeds OUTDIR: the seed corpus of fuzz_model_run (fuzz/corpus/fuzz_model_run/):
// tiny valid models that run end to end under its element limit of 4096, together using
// every op of the runner's support list with its attributes. Run it and commit the output
// when the seeds should change; the fuzz runs and the tests only read the files.
#include <filesystem>
#include <iostream>

#include "onnx_builder.hpp"

namespace {

using foldcheck::testing::OnnxBuilder;
using I = std::vector<std::int64_t>;

std::vector<double> ramp(std::size_t n, double scale = 0.125) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<double>(static_cast<int>(i % 7) - 3);
  return v;
}

// Conv -> BatchNormalization -> Relu -> MaxPool -> Flatten -> Gemm (alpha, beta, transB).
OnnxBuilder conv_chain() {
  OnnxBuilder b;
  b.input("X", {1, 2, 4, 4});
  b.output("Y", {1, 3});
  b.init("W", {2, 2, 3, 3}, ramp(36));
  b.init("g", {2}, {1, 0.5});
  b.init("be", {2}, {0, 0.25});
  b.init("mu", {2}, {0.1, -0.1});
  b.init("var", {2}, {1, 2});
  b.init("F", {3, 8}, ramp(24));
  b.init("fb", {3}, {0.5, -0.5, 1});
  auto& c = b.node("Conv", "conv", {"X", "W"}, {"c"});
  OnnxBuilder::attr(c, "pads", I{1, 1, 1, 1});
  OnnxBuilder::attr(c, "kernel_shape", I{3, 3});
  b.node("BatchNormalization", "bn", {"c", "g", "be", "mu", "var"}, {"n"});
  b.node("Relu", "relu", {"n"}, {"r"});
  auto& p = b.node("MaxPool", "pool", {"r"}, {"p"});
  OnnxBuilder::attr(p, "kernel_shape", I{2, 2});
  OnnxBuilder::attr(p, "strides", I{2, 2});
  b.node("Flatten", "flat", {"p"}, {"f"});
  auto& g = b.node("Gemm", "fc", {"f", "F", "fb"}, {"Y"});
  OnnxBuilder::attr(g, "transB", std::int64_t{1});
  OnnxBuilder::attr(g, "alpha", 2.0f);
  OnnxBuilder::attr(g, "beta", 0.5f);
  return b;
}

// Reshape -> Unsqueeze -> Concat -> Pad -> Squeeze -> MatMul (an Identity of its weight) -> Reshape.
OnnxBuilder shape_chain() {
  OnnxBuilder b;
  b.input("X", {2, 6});
  b.output("Y", {1, 4, 3});
  b.init_int64("shape", {3, -1});
  b.init_int64("axes", {0});
  b.init_int64("pads", {0, 0, 1, 0, 0, 1});
  b.init_int64("sq", {0});
  b.init("M", {6, 2}, ramp(12));
  b.node("Identity", "alias", {"M"}, {"M2"});
  b.node("Reshape", "reshape", {"X", "shape"}, {"r"});
  b.node("Unsqueeze", "unsq", {"r", "axes"}, {"u"});
  OnnxBuilder::attr(b.node("Concat", "cat", {"u", "u"}, {"c"}), "axis", std::int64_t{1});
  b.node("Pad", "pad", {"c", "pads"}, {"p"});
  b.node("Squeeze", "sq", {"p", "sq"}, {"s"});
  b.node("MatMul", "mm", {"s", "M2"}, {"m"});
  b.init_int64("to", {1, 4, 3});
  b.node("Reshape", "out", {"m", "to"}, {"Y"});
  return b;
}

// ConvTranspose (group, strides) -> Clip -> Add (broadcast) -> AveragePool -> HardSwish ->
// Sigmoid -> Mul -> GlobalAveragePool -> LeakyRelu -> HardSigmoid -> Sub -> Div.
OnnxBuilder up_chain() {
  OnnxBuilder b;
  b.input("X", {1, 2, 3, 3});
  b.output("Y", {1, 4, 1, 1});
  b.init("Wt", {2, 2, 2, 2}, ramp(16));
  b.init("bt", {4}, {0.1, 0.2, 0.3, 0.4});
  b.init("lo", {}, {-1});
  b.init("hi", {}, {1});
  b.init("shift", {1, 4, 1, 1}, {0.5, -0.5, 0.25, 0});
  auto& ct = b.node("ConvTranspose", "up", {"X", "Wt", "bt"}, {"t"});
  OnnxBuilder::attr(ct, "group", std::int64_t{2});
  OnnxBuilder::attr(ct, "strides", I{2, 2});
  b.node("Clip", "clip", {"t", "lo", "hi"}, {"cl"});
  b.node("Add", "add", {"cl", "shift"}, {"a"});
  auto& ap = b.node("AveragePool", "avg", {"a"}, {"av"});
  OnnxBuilder::attr(ap, "kernel_shape", I{3, 3});
  OnnxBuilder::attr(ap, "pads", I{1, 1, 1, 1});
  OnnxBuilder::attr(ap, "count_include_pad", std::int64_t{1});
  b.node("HardSwish", "hs", {"av"}, {"h"});
  b.node("Sigmoid", "sig", {"h"}, {"s"});
  b.node("Mul", "mul", {"s", "h"}, {"mu"});
  b.node("GlobalAveragePool", "gap", {"mu"}, {"gp"});
  OnnxBuilder::attr(b.node("LeakyRelu", "lrelu", {"gp"}, {"l"}), "alpha", 0.1f);
  b.node("HardSigmoid", "hsig", {"l"}, {"hh"});
  b.node("Sub", "sub", {"hh", "shift"}, {"d"});
  b.node("Div", "div", {"d", "hh"}, {"Y"});
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_model_run_seeds OUTDIR\n";
    return 2;
  }
  const std::filesystem::path d = argv[1];
  std::filesystem::create_directories(d);
  conv_chain().save((d / "conv_bn_pool_gemm.onnx").string());
  shape_chain().save((d / "shape_ops.onnx").string());
  up_chain().save((d / "convtranspose_elementwise.onnx").string());
  return 0;
}
