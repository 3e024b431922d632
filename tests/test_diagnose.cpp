// diagnose: the seed scenario (training-mode BatchNorm against the eval-mode layer) is
// named as batch statistics; an eps mismatch is named with the eps recovered; a correct
// eval-mode output (and a correct conv fold) is EXPECTED with no hypothesis.
#include <catch2/catch.hpp>

#include "diagnose_scenarios.hpp"
#include "foldcheck/diagnose.hpp"
#include "foldcheck/evaluate.hpp"
#include "foldcheck/fold_pass.hpp"

using namespace foldcheck;
using nlohmann::json;

namespace {
json run_diagnose(const scenarios::BnScenario& s, const Tensor& y) {
  DiagnoseInput in;
  in.x = s.x;
  in.bn = s.bn;
  in.observed = y;
  return diagnose(in);
}
}  // namespace

TEST_CASE("diagnose: training-mode BatchNorm is named as batch statistics (fresh and trained BN)", "[diagnose]") {
  for (bool trained : {false, true}) {
    const auto s = scenarios::make_bn_scenario(trained);
    const json r = run_diagnose(s, scenarios::bn_output(s, true, s.bn.eps));
    INFO(r["summary"].get<std::string>());
    CHECK(r["verdict"] == "UNEXPECTED");
    CHECK(r["best"] == "training_mode_batch_statistics");
    CHECK(r["hypotheses"][0]["verdict"] == "EXPECTED");
    // The unbiased-variance variant is distinguishable at M = 50176 values per channel.
    for (const auto& h : r["hypotheses"])
      if (h["name"] == "training_mode_unbiased_variance") CHECK(h["verdict"] == "UNEXPECTED");
    // Max |difference| is far beyond rounding (the report saw 0.143 for a fresh BN).
    CHECK(r["as_given"]["residual_ulp"]["max_abs"].get<double>() > 1e3);
  }
}

TEST_CASE("diagnose: a correct eval-mode output is EXPECTED with best null", "[diagnose]") {
  const auto s = scenarios::make_bn_scenario(true, 64);
  const json r = run_diagnose(s, scenarios::bn_output(s, false, s.bn.eps));
  CHECK(r["verdict"] == "EXPECTED");
  CHECK(r["best"].is_null());
}

TEST_CASE("diagnose: an eps mismatch is named with the eps recovered", "[diagnose]") {
  const auto s = scenarios::make_bn_scenario(true, 64);
  const json r = run_diagnose(s, scenarios::bn_output(s, false, 1e-3));
  INFO(r.dump(1).substr(0, 3000));
  CHECK(r["verdict"] == "UNEXPECTED");
  REQUIRE(r["best"] == "eps_mismatch");
  CHECK(r["hypotheses"][0]["parameters"]["eps_recovered"].get<double>() == 1e-3);
}

TEST_CASE("diagnose: conv + BN folded by a recipe is EXPECTED; the same fold without the conv bias is named", "[diagnose]") {
  const auto s = scenarios::make_bn_scenario(true, 16);
  Graph g;
  g.dtype = DType::Float32;
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.geometry = ref::ConvGeometry{1, 3, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0, 0.2);
  conv.weight.shape = {3, 3, 3, 3};
  for (int i = 0; i < 81; ++i) conv.weight.data.push_back(static_cast<float>(nd(rng)));
  conv.bias = {0.25, -0.125, 0.5};
  Node bn;
  bn.kind = Node::Kind::BatchNorm;
  bn.geometry = conv.geometry;
  bn.bn = s.bn;
  g.nodes = {conv, bn};
  DiagnoseInput in;
  in.x = s.x;
  in.bn = s.bn;
  in.weights = conv.weight;
  in.conv_bias = conv.bias;
  in.observed.shape = {1, 3, 16, 16};
  in.observed.data = evaluate(fold_batchnorm(g, Recipe::PyTorch, {}), s.x.data, Policy{});
  CHECK(diagnose(in)["verdict"] == "EXPECTED");
  // The fold forgot the conv bias: b' = -mean * s + beta.
  Graph nb = g;
  nb.nodes[0].bias.clear();
  in.observed.data = evaluate(fold_batchnorm(nb, Recipe::PyTorch, {}), s.x.data, Policy{});
  const json r = diagnose(in);
  CHECK(r["verdict"] == "UNEXPECTED");
  CHECK(r["best"] == "conv_bias_dropped");
}
