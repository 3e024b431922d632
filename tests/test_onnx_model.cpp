// ONNX loading, layer -> BatchNorm patterns, and accuracy-diff's fold checks on models
// built through the protobuf API (tests/onnx_builder.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "foldcheck/accuracy_diff.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/model.hpp"
#include "foldcheck/model_patterns.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"
#include "onnx_builder.hpp"

using namespace foldcheck;
using namespace foldcheck::testing;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("foldcheck_onnx_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string save(const OnnxBuilder& b, const fs::path& dir, const std::string& file) {
  const fs::path p = dir / file;
  b.save(p.string());
  return p.string();
}

}  // namespace

TEST_CASE("onnx: initializers of every float type and encoding load exactly", "[onnx]") {
  const fs::path d = temp_dir("inits");
  OnnxBuilder b;
  const std::vector<double> f32{1.5, -0x1.fffffep127, 0x1p-149, 0.1f}, f64{0.1, -1e300, 0x1p-1074, 3.0};
  const std::vector<double> f16{1.0, -65504.0, 0x1p-24, 0.333251953125}, bf16{1.0, -3.0, 0x1p-133, 0.3359375};
  for (const Encoding e : {Encoding::Raw, Encoding::Typed, Encoding::External}) {
    const std::string s = std::to_string(static_cast<int>(e));
    b.init("f32_" + s, {2, 2}, f32, DType::Float32, e);
    b.init("f64_" + s, {4}, f64, DType::Float64, e);
    b.init("f16_" + s, {4}, f16, DType::Float16, e);
    b.init("bf16_" + s, {4}, bf16, DType::BFloat16, e);
  }
  b.init_int64("shape", {1, -1});
  b.input("X", {1, -1, 3});
  auto& n = b.node("Relu", "", {"X"}, {"Y"});
  OnnxBuilder::attr(n, "alpha", 0.25f);
  b.output("Y", {1, -1, 3});
  const Model m = Model::load(save(b, d, "inits.onnx"));
  for (int e = 0; e < 3; ++e) {
    const std::string s = std::to_string(e);
    INFO("encoding " << e);
    REQUIRE(m.initializer("f32_" + s)->data == f32);
    CHECK(m.initializer("f32_" + s)->shape == Shape{2, 2});
    CHECK(m.initializer("f64_" + s)->data == f64);
    CHECK(m.initializer("f16_" + s)->data == f16);
    CHECK(m.initializer("f16_" + s)->dtype == DType::Float16);
    CHECK(m.initializer("bf16_" + s)->data == bf16);
  }
  CHECK(m.int_inits.at("shape") == std::vector<std::int64_t>{1, -1});
  REQUIRE(m.inputs.size() == 1);  // initializers are not graph inputs
  CHECK(m.inputs[0].shape == Shape{1, -1, 3});
  REQUIRE(m.nodes.size() == 1);
  CHECK(m.nodes[0].name.empty());
  CHECK(m.nodes[0].float_attr("alpha", 0) == 0.25);
  CHECK(m.opset == 13);
  CHECK_THROWS_AS(Model::load((d / "missing.onnx").string()), InputError);
}

TEST_CASE("onnx: layer -> BatchNormalization pairs, through Identity, and the unpaired ones", "[onnx]") {
  const fs::path d = temp_dir("pairs");
  const Model m = Model::load(save(bn_fixture({}), d, "model.onnx"));
  const BnPatterns p = find_bn_pairs(m);
  REQUIRE(p.pairs.size() == 3);
  CHECK(p.pairs[0].name == "conv_a");
  CHECK(p.pairs[0].through.size() == 1);
  CHECK(p.pairs[1].name == "conv_b");
  CHECK(p.pairs[2].name == "fc");
  CHECK(p.pairs[2].op == "Gemm");
  REQUIRE(p.unpaired.size() == 1);
  CHECK(p.unpaired[0].name == "bn_c");
  CHECK_THAT(p.unpaired[0].reason, Catch::Contains("Relu"));
  const LayerParams a = layer_params(m, p.pairs[0]);
  CHECK(a.channels == 8);
  CHECK(a.per_channel == 36);
  CHECK(a.bias.size() == 8);
  CHECK(a.bn.eps == static_cast<double>(1e-5f));
  const LayerParams fc = layer_params(m, p.pairs[2]);
  CHECK(fc.channels == 5);
  CHECK(fc.per_channel == 216);
}

TEST_CASE("onnx: regrouping is output-channel-major for ConvTranspose and MatMul", "[onnx]") {
  const fs::path d = temp_dir("regroup");
  OnnxBuilder b;
  // ConvTranspose weight C_in=4 x (O/g)=3 x 1 x 1 with 2 groups: output channels 6.
  std::vector<double> wt(12), wm(6);
  for (std::size_t i = 0; i < wt.size(); ++i) wt[i] = static_cast<double>(i);
  for (std::size_t i = 0; i < wm.size(); ++i) wm[i] = static_cast<double>(i);
  b.init("wt", {4, 3, 1, 1}, wt);
  b.init("wm", {2, 3}, wm);  // MatMul B: K=2 x N=3
  b.input("X", {1, 4, 2, 2});
  auto& ct = b.node("ConvTranspose", "ct", {"X", "wt"}, {"y"});
  OnnxBuilder::attr(ct, "group", std::int64_t{2});
  b.node("MatMul", "mm", {"z", "wm"}, {"u"});
  const Model m = Model::load(save(b, d, "r.onnx"));
  const LayerParams t = layer_params_of_node(m, 0);
  CHECK(t.channels == 6);
  CHECK(t.per_channel == 2);
  // output channel 4 = group 1, j = 1: input channels 2, 3 -> w[2][1], w[3][1] = 7, 10
  CHECK(t.weight[8] == 7.0);
  CHECK(t.weight[9] == 10.0);
  const LayerParams mm = layer_params_of_node(m, 1);
  CHECK(mm.channels == 3);
  CHECK(mm.weight == std::vector<double>{0, 3, 1, 4, 2, 5});  // column n: B[0][n], B[1][n]
}

TEST_CASE("reference: fold_weights is bit-identical to fold_weight", "[onnx][reference]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  std::uniform_int_distribution<int> ex(-40, 40);
  std::vector<double> w(4 * 500);
  for (double& v : w) v = static_cast<float>(std::ldexp(nd(rng), ex(rng)));
  w[3] = 0.0;
  w[4] = 0x1p-149;
  ref::BnParams bn{{1.0, 0.7f, 3.25, 1.0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {1.0, 0.3f, 1e-3f, 0.0}, 1e-5};
  bn.eps = static_cast<double>(1e-5f);
  for (const ref::Format& f : {ref::kFloat32, ref::kFloat64, ref::kFloat16}) {
    ref::Options o;
    o.formats = ref::format_bit(f);
    const ref::ValueArray fast = ref::fold_weights(w, 500, bn, o);
    for (std::size_t k = 0; k < w.size(); ++k) {
      const std::size_t c = k / 500;
      const ref::Value slow = ref::fold_weight(w[k], bn.gamma[c], bn.var[c], bn.eps, o);
      INFO(f.name << " weight " << k << " = " << w[k]);
      REQUIRE(fast.rounded_to(k, f) == slow.rounded_to(f));
    }
  }
}

TEST_CASE("accuracy-diff: correct folds are EXPECTED; a 60 ppm channel is named", "[onnx][accuracy-diff]") {
  const fs::path d = temp_dir("adiff");
  const std::string model = save(bn_fixture({}), d, "model.onnx");
  AccuracyDiffOptions o;
  SECTION("each recipe's own fold") {
    const auto r = accuracy_diff(model, o);
    CHECK(r["verdict"] == "EXPECTED");
    REQUIRE(r["layers"].size() == 3);
    CHECK(r["unpaired"].size() == 1);
  }
  SECTION("observed folds by every recipe that keeps a single bias") {
    for (const Recipe rc : {Recipe::PyTorch, Recipe::OnnxRuntime, Recipe::OnnxOptimizer}) {
      FixtureOptions f;
      f.folded = true;
      f.recipe = rc;
      o.observed_model = save(bn_fixture(f), d, std::string("folded_") + name(rc) + ".onnx");
      const auto r = accuracy_diff(model, o);
      INFO(name(rc));
      CHECK(r["verdict"] == "EXPECTED");
      for (const auto& l : r["layers"]) {
        CHECK(l["verdict"] == "EXPECTED");
        CHECK(l["worst_channel"].is_null());
      }
    }
  }
  SECTION("one channel scaled by 1 + 60e-6") {
    for (const std::string layer : {"conv_a", "conv_b", "fc"}) {
      FixtureOptions f;
      f.folded = true;
      f.corrupt_layer = layer;
      f.corrupt_channel = 3;
      f.corrupt_rel = 60e-6;
      o.observed_model = save(bn_fixture(f), d, "corrupt_" + layer + ".onnx");
      const auto r = accuracy_diff(model, o);
      INFO(layer);
      CHECK(r["verdict"] == "UNEXPECTED");
      int flagged = 0;
      for (const auto& l : r["layers"]) {
        if (l["verdict"] == "EXPECTED") continue;
        ++flagged;
        CHECK(l["name"] == layer);
        CHECK(l["worst_channel"] == 3);
      }
      CHECK(flagged == 1);
    }
  }
  SECTION("a model that does not match is refused") {
    FixtureOptions f;
    f.folded = true;
    OnnxBuilder b = bn_fixture(f);
    auto* w = b.model.mutable_graph()->mutable_initializer(0);  // conv_a.weight, raw data
    REQUIRE(w->name() == "conv_a.weight");
    w->set_dims(0, 7);  // 7x4x3x3: a different layer
    w->set_raw_data(w->raw_data().substr(0, 7 * 36 * 4));
    o.observed_model = save(b, d, "mismatch.onnx");
    CHECK_THROWS_WITH(accuracy_diff(model, o), Catch::Contains("ambiguous"));
  }
  SECTION("no pairs: nothing checked is MISTRUSTED") {
    OnnxBuilder b;
    b.input("X", {1, 2});
    b.node("Relu", "r", {"X"}, {"Y"});
    CHECK(accuracy_diff(save(b, d, "plain.onnx"), o)["verdict"] == "MISTRUSTED");
  }
}
