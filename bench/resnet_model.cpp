#include "resnet_model.hpp"

#include <cmath>
#include <random>
#include <string>

namespace foldcheck::bench {
namespace {

struct Builder {
  Model m;
  std::mt19937_64 rng;
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud{0.5, 1.5};
  int counter = 0;

  Tensor tensor(Shape shape, double scale) {
    Tensor t;
    t.shape = shape;
    t.data.resize(static_cast<std::size_t>(element_count(shape)));
    for (double& v : t.data) v = static_cast<float>(scale * nd(rng));
    return t;
  }
  ModelNode& node(const std::string& op, const std::string& name, std::vector<std::string> in, std::vector<std::string> out) {
    ModelNode n;
    n.op = op;
    n.name = name;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    m.nodes.push_back(std::move(n));
    return m.nodes.back();
  }
  static Attribute ints(std::vector<std::int64_t> v) {
    Attribute a;
    a.kind = Attribute::Kind::Ints;
    a.ints = std::move(v);
    return a;
  }
  // conv (no bias) -> BatchNormalization [-> Relu]; returns the output value name.
  std::string conv_bn(const std::string& x, std::int64_t cin, std::int64_t cout, std::int64_t k, std::int64_t stride,
                      bool relu) {
    const std::string id = std::to_string(counter++);
    const std::string w = "conv" + id + ".weight";
    m.initializers[w] = tensor({cout, cin, k, k}, std::sqrt(2.0 / static_cast<double>(cin * k * k)));
    ModelNode& c = node("Conv", "conv" + id, {x, w}, {"c" + id});
    c.attributes["kernel_shape"] = ints({k, k});
    c.attributes["strides"] = ints({stride, stride});
    c.attributes["pads"] = ints({k / 2, k / 2, k / 2, k / 2});
    const std::string bn = "bn" + id;
    Tensor g{{cout}, {}, DType::Float32}, b = g, mu = g, var = g;
    for (std::int64_t o = 0; o < cout; ++o) {
      g.data.push_back(static_cast<float>(ud(rng)));
      b.data.push_back(static_cast<float>(0.1 * nd(rng)));
      mu.data.push_back(static_cast<float>(0.1 * nd(rng)));
      var.data.push_back(static_cast<float>(ud(rng)));
    }
    m.initializers[bn + ".gamma"] = g;
    m.initializers[bn + ".beta"] = b;
    m.initializers[bn + ".mean"] = mu;
    m.initializers[bn + ".var"] = var;
    node("BatchNormalization", bn, {"c" + id, bn + ".gamma", bn + ".beta", bn + ".mean", bn + ".var"}, {"b" + id});
    if (!relu) return "b" + id;
    node("Relu", "relu" + id, {"b" + id}, {"r" + id});
    return "r" + id;
  }
};

// torchvision's ResNet: the stem, then per stage `blocks[s]` residual blocks of width
// 64 << s (bottleneck: 1x1 -> 3x3 -> 1x1 to 4x the width; basic: 3x3 -> 3x3), a projection
// shortcut where the shape changes, then the classifier head.
Model resnet_model(const std::string& name, const std::int64_t (&blocks)[4], bool bottleneck, std::int64_t image,
                   std::uint64_t seed) {
  Builder b;
  b.rng.seed(seed);
  b.m.path = name + " (in memory)";
  b.m.opset = 13;
  b.m.inputs.push_back({"input", {1, 3, image, image}, DType::Float32});
  std::string x = b.conv_bn("input", 3, 64, 7, 2, true);
  ModelNode& mp = b.node("MaxPool", "maxpool", {x}, {"pool"});
  mp.attributes["kernel_shape"] = Builder::ints({3, 3});
  mp.attributes["strides"] = Builder::ints({2, 2});
  mp.attributes["pads"] = Builder::ints({1, 1, 1, 1});
  x = "pool";
  std::int64_t cin = 64;
  for (int s = 0; s < 4; ++s) {
    const std::int64_t width = 64 << s, cout = bottleneck ? width * 4 : width;
    for (std::int64_t i = 0; i < blocks[s]; ++i) {
      const std::int64_t stride = (i == 0 && s > 0) ? 2 : 1;
      std::string y;
      if (bottleneck) {
        y = b.conv_bn(x, cin, width, 1, 1, true);
        y = b.conv_bn(y, width, width, 3, stride, true);
        y = b.conv_bn(y, width, cout, 1, 1, false);
      } else {
        y = b.conv_bn(x, cin, width, 3, stride, true);
        y = b.conv_bn(y, width, width, 3, 1, false);
      }
      std::string shortcut = x;
      if (stride != 1 || cin != cout) shortcut = b.conv_bn(x, cin, cout, 1, stride, false);
      const std::string id = std::to_string(b.counter++);
      b.node("Add", "add" + id, {y, shortcut}, {"sum" + id});
      b.node("Relu", "relu_add" + id, {"sum" + id}, {"out" + id});
      x = "out" + id;
      cin = cout;
    }
  }
  b.node("GlobalAveragePool", "gap", {x}, {"gap"});
  ModelNode& fl = b.node("Flatten", "flatten", {"gap"}, {"flat"});
  Attribute axis;
  axis.kind = Attribute::Kind::Int;
  axis.i = 1;
  fl.attributes["axis"] = axis;
  b.m.initializers["fc.weight"] = b.tensor({1000, cin}, std::sqrt(1.0 / static_cast<double>(cin)));
  b.m.initializers["fc.bias"] = b.tensor({1000}, 0.01);
  ModelNode& fc = b.node("Gemm", "fc", {"flat", "fc.weight", "fc.bias"}, {"logits"});
  Attribute tb;
  tb.kind = Attribute::Kind::Int;
  tb.i = 1;
  fc.attributes["transB"] = tb;
  b.m.outputs.push_back({"logits", {1, 1000}, DType::Float32});
  return b.m;
}

}  // namespace

Model resnet50_model(std::int64_t image, std::uint64_t seed) {
  return resnet_model("resnet50", {3, 4, 6, 3}, true, image, seed);
}

Model resnet18_model(std::int64_t image, std::uint64_t seed) {
  return resnet_model("resnet18", {2, 2, 2, 2}, false, image, seed);
}

}  // namespace foldcheck::bench
