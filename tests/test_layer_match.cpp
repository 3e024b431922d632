// Observed (folded) models matched to the original by data flow (layer_match.hpp): a
// residual block whose fold an engine saved in its own node order with its own initializer
// names (ONNX Runtime puts the shortcut conv first and names weights ConvBnFusion_W_*), with
// Conv + Relu fused into com.microsoft:FusedConv, is matched and EXPECTED; a corrupted
// channel is still named; com.microsoft.nchwc:Conv is refused by name; a symmetric graph
// pairs its layers by node name or is refused as ambiguous.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/model/layer_match.hpp"
#include "onnx_builder.hpp"

using namespace foldcheck;
using foldcheck::testing::OnnxBuilder;
namespace fs = std::filesystem;

namespace {

struct Conv {
  std::string name;
  std::vector<std::int64_t> shape;  // OIHW
  std::vector<double> w, gamma, beta, mean, var;
};

Conv make_conv(const std::string& name, std::vector<std::int64_t> shape, std::mt19937_64& rng) {
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.5, 1.5);
  Conv c{name, shape, {}, {}, {}, {}, {}};
  const std::int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
  for (std::int64_t i = 0; i < n; ++i) c.w.push_back(static_cast<float>(0.2 * nd(rng)));
  for (std::int64_t o = 0; o < shape[0]; ++o) {
    c.gamma.push_back(static_cast<float>(ud(rng)));
    c.beta.push_back(static_cast<float>(0.1 * nd(rng)));
    c.mean.push_back(static_cast<float>(0.1 * nd(rng)));
    c.var.push_back(static_cast<float>(ud(rng)));
  }
  return c;
}

struct Variant {
  bool folded = false, reorder = false, fuse_relu = false, nchwc = false;
  std::string corrupt;  // a folded conv with channel 1 scaled by 1 + 60e-6
};

// X -> conv1 -> bn -> Relu -> conv2 -> bn -> Add(., shortcut) -> Relu -> Y, shortcut =
// X -> conv_s (1x1) -> bn. Folded: ONNX Runtime's recipe, weights named ConvBnFusion_W_<k>
// and nodes named fused_<k> when reordered (the shortcut first).
std::string block(const fs::path& dir, const std::string& file, const Variant& v) {
  std::mt19937_64 rng(11);
  Conv c1 = make_conv("conv1", {4, 4, 3, 3}, rng), c2 = make_conv("conv2", {4, 4, 3, 3}, rng),
       cs = make_conv("conv_s", {4, 4, 1, 1}, rng);
  OnnxBuilder b;
  b.input("X", {1, 4, 6, 6});
  b.output("Y", {1, 4, 6, 6});
  int k = 0;
  // Emits conv c on x; returns its (BatchNorm'd, unless folded) output.
  auto conv = [&](Conv& c, const std::string& x, bool relu) {
    const std::string id = std::to_string(k++);
    const std::string wname = v.reorder ? "ConvBnFusion_W_" + id : c.name + ".weight";
    const std::string node = v.reorder ? "fused_" + id : c.name;
    std::vector<double> w = c.w, bias;
    if (v.folded) {
      const std::int64_t per = c.shape[1] * c.shape[2] * c.shape[3];
      const FoldedParams fp = fold_parameters(c.w, per, {}, ref::BnParams{c.gamma, c.beta, c.mean, c.var, static_cast<double>(1e-5f)},
                                              DType::Float32, Recipe::OnnxRuntime, {});
      w = fp.weight;
      bias = fp.bias;
      if (c.name == v.corrupt) {
        for (std::int64_t q = 0; q < per; ++q) w[static_cast<std::size_t>(per + q)] = static_cast<float>(w[static_cast<std::size_t>(per + q)] * (1 + 60e-6));
        bias[1] = static_cast<float>(bias[1] * (1 + 60e-6));
      }
    }
    b.init(wname, c.shape, w);
    std::vector<std::string> in{x, wname};
    if (!bias.empty()) {
      b.init(wname + "_bias", {c.shape[0]}, bias);
      in.push_back(wname + "_bias");
    }
    const bool fused = v.fuse_relu && relu;
    auto& n = b.node(fused ? "FusedConv" : "Conv", node, in, {c.name + "_out"});
    if (fused) {
      n.set_domain("com.microsoft");
      OnnxBuilder::attr(n, "activation", std::string("Relu"));
    }
    if (v.nchwc && c.name == "conv2") n.set_domain("com.microsoft.nchwc");
    OnnxBuilder::attr(n, "kernel_shape", std::vector<std::int64_t>{c.shape[2], c.shape[3]});
    const std::int64_t p = c.shape[2] / 2;
    OnnxBuilder::attr(n, "pads", std::vector<std::int64_t>{p, p, p, p});
    std::string y = c.name + "_out";
    if (!v.folded) {
      for (const auto& [s, vals] : {std::pair{"gamma", c.gamma}, {"beta", c.beta}, {"mean", c.mean}, {"var", c.var}})
        b.init(c.name + "." + s, {c.shape[0]}, vals);
      auto& bn = b.node("BatchNormalization", c.name + "_bn", {y, c.name + ".gamma", c.name + ".beta", c.name + ".mean", c.name + ".var"},
                        {c.name + "_bn_out"});
      OnnxBuilder::attr(bn, "epsilon", 1e-5f);
      y = c.name + "_bn_out";
    }
    if (relu && !fused) {
      b.node("Relu", c.name + "_relu", {y}, {c.name + "_relu_out"});
      y = c.name + "_relu_out";
    }
    return y;
  };
  std::string s;
  if (v.reorder) s = conv(cs, "X", false);
  const std::string a = conv(c1, "X", true);
  const std::string y2 = conv(c2, a, false);
  if (!v.reorder) s = conv(cs, "X", false);
  b.node("Add", "add", {y2, s}, {"sum"});
  b.node("Relu", "out_relu", {"sum"}, {"Y"});
  const fs::path path = dir / file;
  b.save(path.string());
  return path.string();
}

fs::path temp(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("foldcheck_layer_match_" + name);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("layer matching: an engine's own node order, names and fused activations", "[onnx][match]") {
  const fs::path d = temp("engine");
  const std::string original = block(d, "model.onnx", {});
  Variant v;
  v.folded = v.reorder = true;
  const Model a = Model::load(original), b = Model::load(block(d, "reordered.onnx", v));
  // conv1, conv2, conv_s in the original; the shortcut first in the engine's file.
  const auto m = match_layers(a, b);
  REQUIRE(m.size() == 3);
  for (const auto& [i, j] : m) CHECK(a.nodes[i].outputs[0] == b.nodes[j].outputs[0]);  // the same conv
  AccuracyDiffOptions o;
  o.weights_only = true;
  for (const bool fuse : {false, true}) {
    v.fuse_relu = fuse;
    o.observed_model = block(d, fuse ? "fused.onnx" : "reordered.onnx", v);
    const nlohmann::json r = accuracy_diff(original, o).to_json();
    INFO(r.dump(1).substr(0, 2000));
    CHECK(r["verdict"] == "EXPECTED");
    CHECK(r["layers"].size() == 3);
  }
  v.corrupt = "conv2";
  o.observed_model = block(d, "corrupt.onnx", v);
  const nlohmann::json r = accuracy_diff(original, o).to_json();
  CHECK(r["verdict"] == "UNEXPECTED");
  for (const auto& l : r["layers"]) {
    CHECK(l["verdict"] == (l["name"] == "conv2" ? "UNEXPECTED" : "EXPECTED"));
    if (l["name"] == "conv2") CHECK(l["worst_channel"] == 1);
  }
}

TEST_CASE("layer matching: ops of another domain are refused by name", "[onnx][match]") {
  const fs::path d = temp("domain");
  const std::string original = block(d, "model.onnx", {});
  Variant v;
  v.folded = v.nchwc = true;
  AccuracyDiffOptions o;
  o.weights_only = true;
  o.observed_model = block(d, "nchwc.onnx", v);
  CHECK_THROWS_WITH(accuracy_diff(original, o),
                    Catch::Contains("com.microsoft.nchwc:Conv") && Catch::Contains("blocked weight layout, not supported"));
}

TEST_CASE("layer matching: a symmetric graph pairs by node name, or is ambiguous", "[onnx][match]") {
  const fs::path d = temp("symmetric");
  // Two 1x1 convs of one shape on X, added: the data flow cannot tell them apart.
  auto twin = [&](const std::string& file, const std::string& n1, const std::string& n2) {
    OnnxBuilder b;
    b.input("X", {1, 2, 3, 3});
    b.output("Y", {1, 2, 3, 3});
    b.init("w1", {2, 2, 1, 1}, {1, 0, 0, 1});
    b.init("w2", {2, 2, 1, 1}, {0, 1, 1, 0});
    b.node("Conv", n1, {"X", "w1"}, {"p"});
    b.node("Conv", n2, {"X", "w2"}, {"q"});
    b.node("Add", "add", {"p", "q"}, {"Y"});
    b.save((d / file).string());
    return Model::load((d / file).string());
  };
  const Model a = twin("a.onnx", "left", "right");
  const Model same = twin("b.onnx", "left", "right"), other = twin("c.onnx", "one", "two");
  const auto m = match_layers(a, same);
  CHECK(m.at(0) == 0);
  CHECK(m.at(1) == 1);
  CHECK_THROWS_WITH(match_layers(a, other), Catch::Contains("ambiguous"));
}

TEST_CASE("layer matching: a deep residual network matches in linear time", "[onnx][match]") {
  // 60 residual blocks (x + conv(x)): each Add joins two branches that both carry the whole
  // prefix, so signatures written out in full would double at every block (2^60).
  const fs::path d = temp("deep");
  OnnxBuilder b;
  b.input("X", {1, 2, 3, 3});
  b.output("Y", {1, 2, 3, 3});
  std::string x = "X";
  for (int k = 0; k < 60; ++k) {
    const std::string id = std::to_string(k);
    b.init("w" + id, {2, 2, 1, 1}, {1, 0.5, 0.25, 1});
    b.node("Conv", "conv" + id, {x, "w" + id}, {"c" + id});
    b.node("Add", "add" + id, {x, "c" + id}, {k == 59 ? "Y" : "s" + id});
    x = "s" + id;
  }
  b.save((d / "deep.onnx").string());
  const Model m = Model::load((d / "deep.onnx").string());
  const auto match = match_layers(m, m);
  REQUIRE(match.size() == 60);
  for (const auto& [i, j] : match) CHECK(i == j);
}
