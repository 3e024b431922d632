// accuracy-diff that finds no layer -> BatchNormalization pair is MISTRUSTED (nothing
// compared is never a pass), and says why and what to do: BatchNorms folded before the file
// was written (PyTorch's default export: its own advice), the two models swapped, no
// foldable layer, or BatchNorms that follow no foldable layer.
#include <catch2/catch.hpp>

#include <filesystem>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "onnx_builder.hpp"

using namespace foldcheck;
using foldcheck::testing::OnnxBuilder;
namespace fs = std::filesystem;

namespace {

fs::path dir() {
  const fs::path d = fs::temp_directory_path() / "foldcheck_no_pairs";
  fs::create_directories(d);
  return d;
}

std::string save(OnnxBuilder b, const std::string& name, const std::string& producer) {
  b.model.set_producer_name(producer);
  const std::string p = (dir() / name).string();
  b.save(p);
  return p;
}

nlohmann::json diff(const std::string& model, const std::optional<std::string>& observed = std::nullopt) {
  AccuracyDiffOptions o;
  o.weights_only = true;
  o.observed_model = observed;
  return accuracy_diff(model, o).to_json();
}

// X -> Relu -> [Conv ->] BatchNormalization -> Y: a BatchNorm that follows no foldable layer.
OnnxBuilder relu_then_bn(bool conv) {
  OnnxBuilder b;
  b.input("X", {1, 2, 4, 4});
  b.node("Relu", "relu", {"X"}, {"r"});
  std::string in = "r";
  if (conv) {
    b.init("w", {2, 2, 1, 1}, {1, 0, 0, 1});
    b.node("Relu", "relu2", {b.node("Conv", "conv", {"X", "w"}, {"c"}).output(0)}, {"cr"});
    in = "cr";
  }
  for (const char* p : {"g", "bt", "m", "v"}) b.init(p, {2}, {1, 1});
  b.node("BatchNormalization", "bn", {in, "g", "bt", "m", "v"}, {"Y"});
  b.output("Y", {1, 2, 4, 4});
  return b;
}

}  // namespace

TEST_CASE("accuracy-diff with no pair: MISTRUSTED, and why, and what to do", "[onnx][no_pairs]") {
  testing::FixtureOptions folded;
  folded.folded = true;
  const std::string by_torch = save(testing::bn_fixture(folded), "folded_by_torch.onnx", "pytorch");
  nlohmann::json r = diff(by_torch);
  CHECK(r["verdict"] == "MISTRUSTED");
  REQUIRE(r["reasoning"].size() == 2);
  CHECK(r["reasoning"][0].get<std::string>().find("folded before the file was written") != std::string::npos);
  CHECK(r["reasoning"][0].get<std::string>().find("none of its 1 BatchNormalization node(s) pairs with one of its") !=
        std::string::npos);
  CHECK(r["reasoning"][0].get<std::string>().find("torch.onnx.export") != std::string::npos);
  CHECK(r["reasoning"][1].get<std::string>().find("TrainingMode.PRESERVE, do_constant_folding=False") != std::string::npos);

  r = diff(save(testing::bn_fixture(folded), "folded_by_other.onnx", "tf2onnx"));
  REQUIRE(r["reasoning"].size() == 2);
  CHECK(r["reasoning"][1].get<std::string>().find("BatchNormalization nodes kept") != std::string::npos);

  const std::string original = save(testing::bn_fixture({}), "original.onnx", "pytorch");
  r = diff(by_torch, original);  // swapped
  CHECK(r["verdict"] == "MISTRUSTED");
  CHECK(r["reasoning"][0].get<std::string>().find("are the two swapped?") != std::string::npos);

  r = diff(save(relu_then_bn(false), "no_layer.onnx", "pytorch"));
  CHECK(r["reasoning"][0].get<std::string>().find("no foldable layer") != std::string::npos);
  r = diff(save(relu_then_bn(true), "bn_after_relu.onnx", "pytorch"));
  // The BatchNorm's own reason, not "no BatchNormalization follows" (false of a Gemm with alpha 2 + BN).
  CHECK(r["reasoning"][0].get<std::string>().find("none of its 1 BatchNormalization node(s) pairs with one of its 1 "
                                                  "foldable layer(s) (bn: input comes from") != std::string::npos);
  CHECK(r["unpaired"].size() == 1);

  // A BatchNorm after a layer that cannot take its fold (a Gemm with alpha 2): that reason is the
  // answer, not "folded before the file was written" and advice to export again.
  OnnxBuilder g;
  g.input("X", {2, 2});
  g.init("w", {2, 2}, {1, 0, 0, 1});
  OnnxBuilder::attr(g.node("Gemm", "fc", {"X", "w"}, {"f"}), "alpha", 2.0f);
  for (const char* p : {"g", "bt", "m", "v"}) g.init(p, {2}, {1, 1});
  g.node("BatchNormalization", "bn", {"f", "g", "bt", "m", "v"}, {"Y"});
  g.output("Y", {2, 2});
  r = diff(save(g, "gemm_alpha.onnx", "pytorch"));
  CHECK(r["verdict"] == "MISTRUSTED");
  REQUIRE(r["reasoning"].size() == 1);
  const std::string why = r["reasoning"][0];
  INFO(why);
  CHECK(why.find("bn: Gemm with alpha or beta != 1: the BatchNormalization follows a layer its fold cannot be written "
                 "into") != std::string::npos);
  CHECK(why.find("folded before the file was written") == std::string::npos);

  CHECK_FALSE(diff(original).contains("reasoning"));  // pairs found: no such sentence
}

// One meaning per option name: attribution_elements 0 attributes every output (as run's),
// and attribution off (--no-attribution) attributes none.
TEST_CASE("accuracy-diff: attribution_elements 0 means all (as in run) - no_attribution means none", "[onnx][attribution]") {
  const std::string model = save(testing::bn_fixture({}), "attribution.onnx", "pytorch");
  AccuracyDiffOptions o;
  o.output_samples = 2;
  o.attribution_elements = 0;
  auto has_stage = [](const nlohmann::json& r) {
    for (const auto& l : r["layers"])
      if (l.contains("activations") && l["activations"]["fused"].contains("dominant_stage")) return true;
    return false;
  };
  CHECK(has_stage(accuracy_diff(model, o).to_json()));
  o.attribution = false;
  CHECK_FALSE(has_stage(accuracy_diff(model, o).to_json()));
}

TEST_CASE("accuracy-diff: top-1 agreement only for class scores ([N, K]), not a feature map", "[onnx][accuracy-diff]") {
  AccuracyDiffOptions o;
  o.output_samples = 2;
  const auto feature_map = accuracy_diff(save(relu_then_bn(true), "feature_map.onnx", "pytorch"), o).to_json();
  REQUIRE(feature_map["end_to_end"]["outputs"].size() == 1);
  CHECK_FALSE(feature_map["end_to_end"]["outputs"][0].contains("top1_agreement"));
  const auto scores = accuracy_diff(save(testing::bn_fixture({}), "scores.onnx", "pytorch"), o).to_json();  // Y[1,5]
  CHECK(scores["end_to_end"]["outputs"][0]["top1_agreement"]["rows"] == 1);
}
