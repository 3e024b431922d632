// ONNX loading, layer -> BatchNorm patterns, and accuracy-diff's fold checks on models
// built through the protobuf API (tests/onnx_builder.hpp).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/model/output_bound.hpp"
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
  b.input("z", {1, 2});
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

TEST_CASE("accuracy-diff: correct folds are EXPECTED, a 60 ppm channel is named", "[onnx][accuracy-diff]") {
  const fs::path d = temp_dir("adiff");
  const std::string model = save(bn_fixture({}), d, "model.onnx");
  AccuracyDiffOptions o;
  SECTION("each recipe's own fold") {
    const auto r = accuracy_diff(model, o).to_json();
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
      const auto r = accuracy_diff(model, o).to_json();
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
      const auto r = accuracy_diff(model, o).to_json();
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
  SECTION("a NaN in one channel's folded parameters is beyond every bound (it was skipped: EXPECTED)") {
    FixtureOptions f;
    f.folded = true;
    f.corrupt_layer = "conv_b";
    f.corrupt_channel = 1;
    f.corrupt_rel = std::nan("");
    o.observed_model = save(bn_fixture(f), d, "nan_conv_b.onnx");
    const auto r = accuracy_diff(model, o).to_json();
    CHECK(r["verdict"] == "UNEXPECTED");
    for (const auto& l : r["layers"])
      if (l["name"] == "conv_b") {
        CHECK(l["verdict"] == "UNEXPECTED");
        CHECK(l["worst_channel"] == 1);
      } else {
        CHECK(l["verdict"] == "EXPECTED");
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
    CHECK_THROWS_WITH(accuracy_diff(model, o), Catch::Contains("has no counterpart"));
  }
  SECTION("no pairs: nothing checked is MISTRUSTED") {
    OnnxBuilder b;
    b.input("X", {1, 2});
    b.node("Relu", "r", {"X"}, {"Y"});
    CHECK(accuracy_diff(save(b, d, "plain.onnx"), o).to_json()["verdict"] == "MISTRUSTED");
  }
  SECTION("no graph outputs: the weights are checked, the runs are not made, and say why") {
    OnnxBuilder b = bn_fixture({});
    b.model.mutable_graph()->clear_output();
    const std::string bare = save(b, d, "no_outputs.onnx");
    const auto r = accuracy_diff(bare, o).to_json();
    CHECK(r["layers"].size() == 3);
    CHECK_THAT(r["end_to_end"]["not_run"].get<std::string>(), Catch::Contains("no graph outputs"));
    o.input = (d / "x.npy").string();
    o.observed_output = (d / "y.npy").string();
    CHECK_THROWS_WITH(accuracy_diff(bare, o), Catch::Contains("graph output"));
  }
}

TEST_CASE("model runs: shape and pooling ops against hand-computed values", "[onnx][run]") {
  const fs::path d = temp_dir("ops");
  OnnxBuilder b;
  b.input("X", {1, 2, 2, 3});
  b.init_int64("shape", {1, -1});
  b.init_int64("pads", {0, 0, 0, 1, 0, 0, 0, 1});
  b.init("lo", {}, {-0.5});
  b.init("hi", {}, {2.0});
  auto& mp = b.node("MaxPool", "mp", {"X"}, {"m"});
  OnnxBuilder::attr(mp, "kernel_shape", std::vector<std::int64_t>{2, 2});
  auto& ap = b.node("AveragePool", "ap", {"X"}, {"a"});
  OnnxBuilder::attr(ap, "kernel_shape", std::vector<std::int64_t>{1, 2});
  OnnxBuilder::attr(ap, "pads", std::vector<std::int64_t>{0, 0, 0, 1});
  b.node("GlobalAveragePool", "gap", {"X"}, {"g"});
  b.node("Reshape", "rs", {"g", "shape"}, {"gr"});
  b.node("Clip", "clip", {"X", "lo", "hi"}, {"c"});
  auto& lr = b.node("LeakyRelu", "lr", {"X"}, {"l"});
  OnnxBuilder::attr(lr, "alpha", 0.5f);
  b.node("HardSwish", "hs", {"X"}, {"h"});
  b.node("Pad", "pad", {"X", "pads"}, {"p"});
  auto& cc = b.node("Concat", "cat", {"X", "X"}, {"cat"});
  OnnxBuilder::attr(cc, "axis", std::int64_t{1});
  auto& fl = b.node("Flatten", "fl", {"X"}, {"f"});
  OnnxBuilder::attr(fl, "axis", std::int64_t{2});
  for (const char* o : {"m", "a", "gr", "c", "l", "h", "p", "cat", "f"}) b.output(o, {});
  const Model m = Model::load(save(b, d, "ops.onnx"));
  Tensor x;
  x.shape = {1, 2, 2, 3};
  x.data = {1, -2, 3, 4, 5, -6, -1, 0.5, 2, 8, -4, 0.25};
  ModelRunOptions o;
  o.dtype = DType::Float64;
  const auto out = run_model(m, find_bn_pairs(m), {{"X", x}}, o);
  // MaxPool 2x2, stride 1, over 2x3: a 1x2 output per channel.
  CHECK(out.at("m").shape == Shape{1, 2, 1, 2});
  CHECK(out.at("m").data == std::vector<double>{5, 5, 8, 2});
  // AveragePool 1x2 with one padded column on the right, padding not counted.
  CHECK(out.at("a").shape == Shape{1, 2, 2, 3});
  CHECK(out.at("a").data == std::vector<double>{-0.5, 0.5, 3, 4.5, -0.5, -6, -0.25, 1.25, 2, 2, -1.875, 0.25});
  CHECK(out.at("gr").shape == Shape{1, 2});
  CHECK(out.at("gr").data == std::vector<double>{5.0 / 6.0, 5.75 / 6.0});
  CHECK(out.at("c").data == std::vector<double>{1, -0.5, 2, 2, 2, -0.5, -0.5, 0.5, 2, 2, -0.5, 0.25});
  CHECK(out.at("l").data == std::vector<double>{1, -1, 3, 4, 5, -3, -0.5, 0.5, 2, 8, -2, 0.25});
  const std::vector<double> hs{1 * (1 / 6.0 + 0.5), -2 * (-2 / 6.0 + 0.5), 3, 4, 5, 0, -1 * (-1 / 6.0 + 0.5),
                               0.5 * (0.5 / 6 + 0.5), 2 * (2 / 6.0 + 0.5), 8, 0, 0.25 * (0.25 / 6 + 0.5)};
  for (std::size_t i = 0; i < hs.size(); ++i) CHECK(out.at("h").data[i] == Approx(hs[i]).margin(1e-15));
  CHECK(out.at("p").shape == Shape{1, 2, 2, 5});
  CHECK(out.at("p").data == std::vector<double>{0, 1, -2, 3, 0, 0, 4, 5, -6, 0, 0, -1, 0.5, 2, 0, 0, 8, -4, 0.25, 0});
  CHECK(out.at("cat").shape == Shape{1, 4, 2, 3});
  CHECK(std::vector<double>(out.at("cat").data.begin() + 12, out.at("cat").data.end()) == x.data);
  CHECK(out.at("f").shape == Shape{2, 6});
  // float32 runs round every operation: 5/6 in float32.
  o.dtype = DType::Float32;
  const auto out32 = run_model(m, find_bn_pairs(m), {{"X", x}}, o);
  CHECK(out32.at("gr").data[0] == static_cast<double>(5.0f / 6.0f));
  // An op foldcheck does not run is named with its node.
  OnnxBuilder u;
  u.input("X", {1, 2});
  u.node("Softmax", "sm", {"X"}, {"Y"});
  u.output("Y", {1, 2});
  const Model um = Model::load(save(u, d, "softmax.onnx"));
  CHECK_THROWS_WITH(run_model(um, find_bn_pairs(um), {{"X", Tensor{{1, 2}, {1, 2}, DType::Float32}}}, o),
                    Catch::Contains("unsupported op Softmax at node 0"));
}

TEST_CASE("model runs: fused and unfused pairs agree with a float64 run of the same model", "[onnx][run]") {
  const fs::path d = temp_dir("runs");
  const Model m = Model::load(save(bn_fixture({}), d, "model.onnx"));
  const BnPatterns p = find_bn_pairs(m);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd;
  Tensor x{{1, 4, 6, 6}, std::vector<double>(144), DType::Float32};
  for (double& v : x.data) v = static_cast<float>(nd(rng));
  ModelRunOptions o;
  o.dtype = DType::Float64;
  const Tensor y64 = run_model(m, p, {{"X", x}}, o).at("Y");
  o.dtype = DType::Float32;
  const Tensor yu = run_model(m, p, {{"X", x}}, o).at("Y");
  o.fused = true;
  const Tensor yf = run_model(m, p, {{"X", x}}, o).at("Y");
  REQUIRE(y64.shape == Shape{1, 5});
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(yu.data[i] == Approx(y64.data[i]).epsilon(1e-4));
    CHECK(yf.data[i] == Approx(y64.data[i]).epsilon(1e-4));
  }
  // The same input gives the same outputs for any thread count.
  o.policy.threads = 1;
  CHECK(run_model(m, p, {{"X", x}}, o).at("Y").data == yf.data);
}

TEST_CASE("accuracy-diff: activations and end to end on the fixture", "[onnx][accuracy-diff]") {
  const fs::path d = temp_dir("e2e");
  AccuracyDiffOptions o;
  o.seed = 11;
  o.attribution_elements = 16;
  const auto r = accuracy_diff(save(bn_fixture({}), d, "model.onnx"), o).to_json();
  CHECK(r["verdict"] == "EXPECTED");
  REQUIRE(r["layers"].size() == 3);
  for (int k = 0; k < 3; ++k) {  // two convs and the Gemm (as a 1x1 conv over its rows)
    const auto& a = r["layers"][k]["activations"];
    CHECK(a["verdict"] == "EXPECTED");
    CHECK(a["fused"]["worst_ratio"].get<double>() <= 1);
    CHECK(a["unfused"]["worst_ratio"].get<double>() <= 1);
    CHECK(a["fused"]["dominant_stage"].is_string());
  }
  CHECK(r["layers"][2]["activations"]["input_shape"] == Shape{1, 216, 1, 1});
  const auto& e = r["end_to_end"];
  CHECK(e["verdict"] == "EXPECTED");
  CHECK(e["first_layer_beyond_bound"].is_null());
  CHECK(e["outputs"][0]["top1_agreement"]["rows"] == 1);
  CHECK(e["input"] == "seeded standard normal, seed 11");
}

TEST_CASE("accuracy-diff: an unsupported op stops the runs, not the weight-level checks", "[onnx][accuracy-diff]") {
  const fs::path d = temp_dir("unsupported");
  OnnxBuilder b;
  b.input("X", {1, 2, 4, 4});
  b.init("w", {3, 2, 1, 1}, {0.5, -0.25, 1, 2, -1, 0.75});
  for (const char* k : {"g", "be", "mu", "va"}) b.init(k, {3}, {1.25, 0.5, 0.75});
  b.node("Conv", "conv", {"X", "w"}, {"c"});
  b.node("BatchNormalization", "bn", {"c", "g", "be", "mu", "va"}, {"n"});
  b.node("Softmax", "softmax", {"n"}, {"Y"});
  b.output("Y", {1, 3, 4, 4});
  const auto r = accuracy_diff(save(b, d, "softmax.onnx"), AccuracyDiffOptions{}).to_json();
  CHECK(r["verdict"] == "EXPECTED");
  REQUIRE(r["layers"].size() == 1);
  CHECK(r["layers"][0]["fold"]["verdict"] == "EXPECTED");
  CHECK_FALSE(r["layers"][0].contains("activations"));
  CHECK_THAT(r["end_to_end"]["not_run"].get<std::string>(), Catch::Contains("unsupported op Softmax at node 2 (softmax)"));
}

TEST_CASE("accuracy-diff: all-zero folded weights and biases are MISTRUSTED, never a pass", "[onnx][accuracy-diff]") {
  // Conv weights 0 and a BatchNorm with beta = mean = 0: every exact folded value and every
  // activation is 0, so any scale would match (was EXPECTED with --weights-only, and the
  // end-to-end verdict UNEXPECTED while no layer was beyond its bound).
  const fs::path d = temp_dir("zeros");
  OnnxBuilder b;
  b.input("X", {1, 1, 2, 2});
  b.init("w", {2, 1, 1, 1}, {0, 0});
  b.init("g", {2}, {1, 1});
  b.init("be", {2}, {0, 0});
  b.init("mu", {2}, {0, 0});
  b.init("va", {2}, {1, 1});
  b.node("Conv", "conv", {"X", "w"}, {"c"});
  b.node("BatchNormalization", "bn", {"c", "g", "be", "mu", "va"}, {"Y"});
  b.output("Y", {1, 2, 2, 2});
  const std::string m = save(b, d, "zeros.onnx");
  AccuracyDiffOptions o;
  o.weights_only = true;
  const auto w = accuracy_diff(m, o).to_json();
  CHECK(w["verdict"] == "MISTRUSTED");
  CHECK(w["layers"][0]["fold"]["verdict"] == "MISTRUSTED");
  const auto r = accuracy_diff(m, AccuracyDiffOptions{}).to_json();
  CHECK(r["verdict"] == "MISTRUSTED");
  CHECK(r["end_to_end"]["verdict"] == "MISTRUSTED");
  CHECK(r["end_to_end"]["first_layer_beyond_bound"].is_null());
}

TEST_CASE("accuracy-diff: outputs with nothing to compare make the end to end MISTRUSTED", "[onnx][accuracy-diff]") {
  // Conv -> BN -> Div by zero: every output is +-Inf or NaN, so the runs compared nothing
  // (|ULP| max 0); end to end and the whole were EXPECTED.
  const fs::path d = temp_dir("div_zero");
  OnnxBuilder b;
  b.input("X", {1, 2, 2, 2});
  b.init("w", {2, 2, 1, 1}, {0.5, -0.25, 1, 2});
  for (const char* k : {"g", "be", "mu", "va"}) b.init(k, {2}, {1.25, 0.5});
  b.init("zero", {1}, {0});
  b.node("Conv", "conv", {"X", "w"}, {"c"});
  b.node("BatchNormalization", "bn", {"c", "g", "be", "mu", "va"}, {"n"});
  b.node("Div", "div", {"n", "zero"}, {"Y"});
  b.output("Y", {1, 2, 2, 2});
  const auto r = accuracy_diff(save(b, d, "div_zero.onnx"), AccuracyDiffOptions{}).to_json();
  CHECK(r["layers"][0]["verdict"] == "EXPECTED");
  CHECK(r["end_to_end"]["outputs"][0]["fused"]["verdict"] == "MISTRUSTED");
  CHECK(r["end_to_end"]["verdict"] == "MISTRUSTED");
  CHECK(r["verdict"] == "MISTRUSTED");
}

TEST_CASE("accuracy-diff: identical results for any thread count", "[onnx][accuracy-diff]") {
  const fs::path d = temp_dir("threads");
  FixtureOptions f;
  f.folded = true;
  f.corrupt_layer = "conv_a";
  f.corrupt_channel = 1;
  f.corrupt_rel = 60e-6;
  AccuracyDiffOptions o;
  o.observed_model = save(bn_fixture(f), d, "corrupt.onnx");
  o.attribution_elements = 16;
  const std::string model = save(bn_fixture({}), d, "model.onnx");
  o.ref.threads = 1;
  auto a = accuracy_diff(model, o).to_json();
  o.ref.threads = 2;
  auto b = accuracy_diff(model, o).to_json();
  CHECK(a == b);
}

TEST_CASE("output bound: lambda and c meet their tail equations", "[onnx][output-bound]") {
  for (const double m : {1.0, 1000.0, 1e6})
    for (const std::size_t K : {8u, 32u, 128u}) {
      double lambda = 0, infl = 0;
      output_bound_factors(m, K, 0.999, lambda, infl);
      const double half = 0.0005;  // (1 - confidence) / 2
      CHECK(m * 2 * std::exp(-lambda * lambda / 2) == Approx(half).epsilon(1e-9));
      const double x = 1 / (infl * infl);
      CHECK(m * std::pow(x * std::exp(1 - x), K / 2.0) == Approx(half).epsilon(1e-6));
      CHECK(x < 1);
    }
  double l = 0, c = 0;
  CHECK_THROWS_AS(output_bound_factors(10, 1, 0.999, l, c), InputError);
}

TEST_CASE("output bound: one conv -> BatchNorm pair: the estimate matches the variance proxy in closed form",
          "[onnx][output-bound]") {
  // X[1,1,5,5] -> Conv (2x1x3x3, bias) -> BatchNormalization -> Y[1,2,3,3]. Every local
  // error enters Y with derivative 1 (or the fold's own factor), so S_j is known exactly
  // (output_bound.hpp): the pair's accumulation and BatchNorm amplitude, each folded
  // weight's rounding, the scale's and the shift's.
  const fs::path d = temp_dir("bound_pair");
  OnnxBuilder b;
  b.input("X", {1, 1, 5, 5});
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  std::vector<double> w(18), x(25);
  for (double& v : w) v = static_cast<float>(nd(rng));
  for (double& v : x) v = static_cast<float>(nd(rng));
  const std::vector<double> bias{0.25, -0.5}, gamma{1.5, 0.75}, beta{0.125, -0.375}, mean{0.5, -0.25}, var{0.875, 2.5};
  b.init("w", {2, 1, 3, 3}, w);
  b.init("b", {2}, bias);
  b.init("g", {2}, gamma);
  b.init("be", {2}, beta);
  b.init("mu", {2}, mean);
  b.init("va", {2}, var);
  b.node("Conv", "conv", {"X", "w", "b"}, {"c"});
  b.node("BatchNormalization", "bn", {"c", "g", "be", "mu", "va"}, {"Y"});
  b.output("Y", {1, 2, 3, 3});
  const Model m = Model::load(save(b, d, "pair.onnx"));
  OutputBoundOptions o;
  o.samples = 64;
  o.seed = 3;
  const OutputBound ob = output_bound(m, find_bn_pairs(m), {{"X", Tensor{{1, 1, 5, 5}, x, DType::Float32}}}, o);
  const double u = 0x1p-24, eps = static_cast<float>(1e-5);
  double ratio_sum = 0;
  for (int c = 0; c < 2; ++c) {
    const double s = gamma[c] / std::sqrt(var[c] + eps), bf = beta[c] + (bias[c] - mean[c]) * s;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double z = bias[c], M = std::fabs(bias[c]), w2 = 0;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            const double t = w[c * 9 + kh * 3 + kw] * x[(i + kh) * 5 + j + kw];
            z += t;
            M += std::fabs(t);
            w2 += (s * t) * (s * t);
          }
        const double y = (z - mean[c]) * s + beta[c];
        const double acc = std::fabs(s) * M + std::fabs(bf), bn = std::fabs(y) + std::fabs(beta[c]);
        const double shift = 3 * u * std::fabs((bias[c] - mean[c]) * s) + u * std::fabs(bf);
        const double S = u * u * (10 * acc * acc + 3 * bn * bn) + u * u * w2 + std::pow(4 * u * (z - mean[c]) * s, 2) + shift * shift;
        const std::size_t k = static_cast<std::size_t>(c * 9 + i * 3 + j);
        CHECK(ob.reference.at("Y").data[k] == Approx(y).epsilon(1e-12));
        ratio_sum += ob.sigma.at("Y")[k] / std::sqrt(S);
        CHECK(ob.bound.at("Y")[k] == Approx(ob.lambda * ob.inflation * ob.sigma.at("Y")[k]).epsilon(1e-8));
      }
  }
  // sigma^_j / sqrt(S_j) is sqrt(chi^2_64 / 64): mean ~0.996, its mean over 18 outputs has
  // standard deviation ~0.021.
  CHECK(ratio_sum / 18 == Approx(1.0).margin(0.1));
}

TEST_CASE("output bound: identical for any thread count, the seed is what changes it", "[onnx][output-bound]") {
  const fs::path d = temp_dir("bound_threads");
  const Model m = Model::load(save(bn_fixture({}), d, "model.onnx"));
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd;
  Tensor x{{1, 4, 6, 6}, std::vector<double>(144), DType::Float32};
  for (double& v : x.data) v = static_cast<float>(nd(rng));
  OutputBoundOptions o;
  o.samples = 6;
  o.threads = 1;
  const OutputBound a = output_bound(m, find_bn_pairs(m), {{"X", x}}, o);
  o.threads = 2;
  const OutputBound b = output_bound(m, find_bn_pairs(m), {{"X", x}}, o);
  CHECK(a.sigma == b.sigma);
  o.seed = 1;
  CHECK(output_bound(m, find_bn_pairs(m), {{"X", x}}, o).sigma != a.sigma);
}

TEST_CASE("accuracy-diff --observed-output: an engine's float32 output passes, a corrupted fold's fails",
          "[onnx][accuracy-diff][output-bound]") {
  const fs::path d = temp_dir("observed_output");
  const std::string model = save(bn_fixture({}), d, "model.onnx");
  std::mt19937_64 rng(4);
  std::normal_distribution<double> nd;
  Tensor x{{1, 4, 6, 6}, std::vector<double>(144), DType::Float32};
  for (double& v : x.data) v = static_cast<float>(nd(rng));
  write_npy((d / "x.npy").string(), x);
  // "Another engine": foldcheck's float32 run of a folded model, in pairwise order (not the
  // order of the accuracy-diff runs).
  auto engine_output = [&](const FixtureOptions& f, const std::string& file) {
    const Model fm = Model::load(save(bn_fixture(f), d, file + ".onnx"));
    ModelRunOptions ro;
    ro.policy.order.kind = Accumulation::Pairwise;
    Tensor y = run_model(fm, find_bn_pairs(fm), {{"X", x}}, ro).at("Y");
    y.dtype = DType::Float32;
    write_npy((d / (file + ".npy")).string(), y);
    return (d / (file + ".npy")).string();
  };
  FixtureOptions f;
  f.folded = true;
  f.recipe = Recipe::OnnxRuntime;
  AccuracyDiffOptions o;
  o.input = (d / "x.npy").string();
  o.attribution = false;
  o.output_samples = 16;
  o.observed_output = engine_output(f, "folded");
  const auto ok = accuracy_diff(model, o).to_json();
  const auto& oo = ok["end_to_end"]["observed_output"];
  CHECK(ok["verdict"] == "EXPECTED");
  CHECK(oo["verdict"] == "EXPECTED");
  CHECK(oo["comparison"]["bound_check"]["worst_ratio"].get<double>() < 1);
  CHECK(oo["foldcheck_runs"]["verdict"] == "EXPECTED");
  CHECK(oo["samples"] == 16);
  CHECK(oo["bound_ulp"]["median"].get<double>() > 1);
  // One output channel of conv_b folded 1% off: beyond the bound.
  f.corrupt_layer = "conv_b";
  f.corrupt_channel = 2;
  f.corrupt_rel = 1e-2;
  o.observed_output = engine_output(f, "corrupt");
  const auto bad = accuracy_diff(model, o).to_json();
  CHECK(bad["verdict"] == "UNEXPECTED");
  CHECK(bad["end_to_end"]["observed_output"]["verdict"] == "UNEXPECTED");
  CHECK(bad["end_to_end"]["observed_output"]["worst"]["ratio"].get<double>() > 1);
  // Usage errors: no --input, a wrong shape.
  AccuracyDiffOptions no_input = o;
  no_input.input.reset();
  CHECK_THROWS_WITH(accuracy_diff(model, no_input), Catch::Contains("`observed_output` needs `input`"));
  write_npy((d / "wrong.npy").string(), Tensor{{1, 4}, {1, 2, 3, 4}, DType::Float32});
  o.observed_output = (d / "wrong.npy").string();
  CHECK_THROWS_WITH(accuracy_diff(model, o), Catch::Contains("shape [1, 4], the model's output Y is [1, 5]"));
}

TEST_CASE("onnx: an Identity of an initializer is an initializer (deduplicated biases run)", "[onnx][run]") {
  const fs::path d = temp_dir("identity_init");
  OnnxBuilder b;
  b.input("X", {1, 2, 1, 1});
  b.init("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  b.init("b0", {2}, {0.5, -0.5});
  b.node("Identity", "dedup", {"b0"}, {"b1"});
  b.node("Conv", "conv", {"X", "w", "b1"}, {"Y"});
  b.output("Y", {1, 2, 1, 1});
  const Model m = Model::load(save(b, d, "dedup.onnx"));
  REQUIRE(m.initializer("b1"));
  CHECK(m.initializer("b1")->data == std::vector<double>{0.5, -0.5});
  const Tensor y = run_model(m, find_bn_pairs(m), {{"X", Tensor{{1, 2, 1, 1}, {1, 1}, DType::Float32}}}, {}).at("Y");
  CHECK(y.data == std::vector<double>{3.5, 6.5});
}

TEST_CASE("accuracy-diff: the end-to-end bound perturbs BatchNorm parameters that are Identities (PyTorch's "
          "deduplicated export)", "[onnx][accuracy-diff]") {
  // torch.onnx.export deduplicates equal initializers into Identity nodes (a fresh
  // BatchNorm's gamma 1 and beta 0 in every layer). The end-to-end bound perturbs each
  // BatchNorm's parameters in a copy of the model: the alias becomes an initializer of its
  // own, and the Identity must no longer compute that name (it was refused: "output 'g1'
  // is also an initializer").
  const fs::path d = temp_dir("identity_perturbed");
  OnnxBuilder b;
  b.input("X", {1, 2, 3, 3});
  b.init("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  b.init("g0", {2}, {1, 1});
  b.init("z0", {2}, {0, 0});
  b.init("v0", {2}, {1, 1});
  b.node("Identity", "dedup_g", {"g0"}, {"g1"});
  b.node("Identity", "dedup_b", {"z0"}, {"b1"});
  b.node("Conv", "conv", {"X", "w"}, {"C"});
  b.node("BatchNormalization", "bn", {"C", "g1", "b1", "z0", "v0"}, {"Y"});
  b.output("Y", {1, 2, 3, 3});
  const std::string path = save(b, d, "dedup_bn.onnx");
  std::vector<double> xv(18);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25 * static_cast<double>(i) - 2;
  write_npy((d / "x.npy").string(), Tensor{{1, 2, 3, 3}, xv, DType::Float32});
  const Model m = Model::load(path);
  Tensor y = run_model(m, find_bn_pairs(m), {{"X", Tensor{{1, 2, 3, 3}, xv, DType::Float32}}}, {}).at("Y");
  for (double& v : y.data) v = static_cast<double>(static_cast<float>(v));
  y.dtype = DType::Float32;
  write_npy((d / "y.npy").string(), y);
  AccuracyDiffOptions o;
  o.input = (d / "x.npy").string();
  o.observed_output = (d / "y.npy").string();
  o.output_samples = 8;
  const auto r = accuracy_diff(path, o).to_json();
  CHECK(r["end_to_end"]["observed_output"]["verdict"] == "EXPECTED");
  CHECK(r["verdict"] == "EXPECTED");
}

TEST_CASE("model runs: aliases are not copied, and memory is counted for the values held", "[onnx][run]") {
  // 300 Identities of one 4M-element initializer: they were 300 copies, counted as 1.2e9
  // elements held (86 GB at the runner's 72 bytes each) and refused; they are aliases.
  const fs::path d = temp_dir("aliases");
  OnnxBuilder b;
  b.input("X", {1, 2, 1, 1});
  b.init("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  b.init("big", {1, 4, 1024, 1024}, std::vector<double>(4 << 20, 0.25));
  b.node("Conv", "conv", {"X", "w"}, {"Y"});
  for (int k = 0; k < 300; ++k) b.node("Identity", fmt::format("copy{}", k), {"big"}, {fmt::format("c{}", k)});
  b.output("Y", {1, 2, 1, 1});
  const Model m = Model::load(save(b, d, "aliases.onnx"));
  const Tensor y = run_model(m, find_bn_pairs(m), {{"X", Tensor{{1, 2, 1, 1}, {1, 1}, DType::Float32}}}, {}).at("Y");
  CHECK(y.data == std::vector<double>{3, 7});
}

TEST_CASE("model runs: Gemm applies alpha, beta, transA and transB (hand-computed)", "[onnx][run]") {
  // A = [[1, 2], [3, 4]] (given transposed, transA), B = [[1, 0, 2], [0, 1, 1]] (given as
  // B' 3x2, transB), C = [1, 2, 3]: alpha A B + beta C with alpha 2, beta 0.5 is
  // [[2*1 + 0.5, 2*2 + 1, 2*4 + 1.5], [2*3 + 0.5, 2*4 + 1, 2*10 + 1.5]].
  const fs::path d = temp_dir("gemm_alpha");
  OnnxBuilder b;
  b.input("X", {2, 2});
  b.output("Y", {2, 3});
  b.init("B", {3, 2}, {1, 0, 0, 1, 2, 1});
  b.init("C", {3}, {1, 2, 3});
  auto& g = b.node("Gemm", "fc", {"X", "B", "C"}, {"Y"});
  OnnxBuilder::attr(g, "alpha", 2.0f);
  OnnxBuilder::attr(g, "beta", 0.5f);
  OnnxBuilder::attr(g, "transA", std::int64_t{1});
  OnnxBuilder::attr(g, "transB", std::int64_t{1});
  const Model m = Model::load(save(b, d, "g.onnx"));
  const Tensor x{{2, 2}, {1, 3, 2, 4}, DType::Float32};  // A' (transA)
  for (const DType dt : {DType::Float32, DType::Float64}) {
    ModelRunOptions o;
    o.dtype = dt;
    const Tensor y = run_model(m, find_bn_pairs(m), {{"X", x}}, o).at("Y");
    CHECK(y.shape == Shape{2, 3});
    CHECK(y.data == std::vector<double>{2.5, 5, 9.5, 6.5, 9, 21.5});
  }
}
