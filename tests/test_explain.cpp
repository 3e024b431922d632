// `explain` on the TVM thread's numbers and on constructed folds.
#include <catch2/catch.hpp>

#include <cmath>

#include "foldcheck/commands/explain.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/reports/layer_names.hpp"
#include "tvm_thread_expectations.hpp"

using namespace foldcheck;

namespace {
ExplainInput tvm_input(std::vector<double> observed) {
  ExplainInput in;
  in.original = {2.1122932, 5.5735774, 2.0870073};
  in.observed = std::move(observed);
  for (auto* v : {&in.original, &in.observed})
    for (double& x : *v) x = round_to(DType::Float32, x);
  in.bn = ref::BnParams{{1.0}, {0.0}, {0.0}, {1.0}, 1e-5};
  in.bn_source = "defaults";
  return in;
}
}  // namespace

TEST_CASE("the TVM thread's drift is the fold of a fresh BatchNorm", "[explain][seed]") {
  const auto j = explain(tvm_input({2.1122828, 5.5735493, 2.0869968})).to_json();
  CHECK(j["verdict"] == "EXPECTED");
  REQUIRE(j["elements"].size() == 3);
  check_tvm_thread_elements(j, 0.6);
  const auto& si = j["scale_inference"];
  CHECK(si["consistent"] == true);
  CHECK(si["estimate"].get<double>() == Approx(1 / std::sqrt(1.00001)).epsilon(1e-12));
  CHECK(si["summary"].get<std::string>().find("1/sqrt(1+1e-05)") != std::string::npos);
}

TEST_CASE("observed values folded with eps 1e-3 instead of 1e-5 are UNEXPECTED - and the eps is recognised", "[explain]") {
  ExplainInput in = tvm_input({0, 0, 0});
  ref::BnParams keras{{1.0}, {0.0}, {0.0}, {1.0}, 1e-3};
  in.observed = fold_parameters(in.original, 3, {}, keras, DType::Float32, Recipe::Tvm, {}).weight;
  const auto j = explain(in).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  CHECK(j["bit_exact_recipes"].empty());
  CHECK(j["scale_inference"]["summary"].get<std::string>().find("1/sqrt(1+0.001)") != std::string::npos);
}

TEST_CASE("per-channel BatchNorm: channel = index / (n / C), one wrong channel is named", "[explain]") {
  ExplainInput in;
  in.bn = ref::BnParams{{0.5, 2.0}, {0.0, 0.0}, {0.1, -0.2}, {0.25, 4.0}, 1e-5};
  in.bn_given = true;
  in.bn_source = "test";
  in.original = {0.5, -1.25, 3.0, 0.75, 2.5, -0.125};
  in.observed = fold_parameters(in.original, 3, {}, in.bn, DType::Float32, Recipe::OnnxRuntime, {}).weight;
  auto j = explain(in).to_json();
  CHECK(j["verdict"] == "EXPECTED");
  CHECK(j["elements"][4]["channel"] == 1);
  CHECK_FALSE(j.contains("scale_inference"));
  in.observed[4] = round_to(DType::Float32, in.observed[4] * (1 + 60e-6));
  j = explain(in).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  CHECK(j["reasoning"][0].get<std::string>().find("Element 4") != std::string::npos);
}

TEST_CASE("scale inference refuses a scale that no single rounding explains", "[explain]") {
  const ScaleInference s = infer_scale({1.0, 1.0}, {0.5, 0.25}, DType::Float32);
  CHECK_FALSE(s.consistent);
}

TEST_CASE("layer names: shortest unique suffix, the middle elided to fit", "[reports][names]") {
  const std::vector<std::string> names{"/conv1/Conv", "/layer1/layer1.0/conv1/Conv",
                                       "/layer2/layer2.0/downsample/downsample.0/Conv",
                                       "/layer3/layer3.0/downsample/downsample.0/Conv", "fc"};
  const auto s = foldcheck::reports::short_layer_names(names, 30);
  CHECK(s[0] == "conv1/Conv");
  CHECK(s[1] == "layer1.0/conv1/Conv");
  CHECK(s[2] == "layer2.0/…/downsample.0/Conv");
  CHECK(s[3] == "layer3.0/…/downsample.0/Conv");
  CHECK(s[4] == "fc");
  CHECK(foldcheck::reports::short_layer_names({std::string(40, 'x')}, 30)[0] == "…" + std::string(29, 'x'));
}
