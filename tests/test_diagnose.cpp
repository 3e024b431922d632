// diagnose: the seed scenario (training-mode BatchNorm against the eval-mode layer) is
// named as batch statistics; an eps mismatch is named with the eps recovered; a correct
// eval-mode output (and a correct conv fold) is EXPECTED with no hypothesis.
#include <catch2/catch.hpp>

#include "diagnose_scenarios.hpp"
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"

using namespace foldcheck;
using nlohmann::json;

namespace {
json run_diagnose(const scenarios::BnScenario& s, const Tensor& y) {
  DiagnoseInput in;
  in.x = s.x;
  in.bn = s.bn;
  in.observed = y;
  return diagnose(in).to_json();
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

TEST_CASE("diagnose: conv + BN folded by a recipe is EXPECTED, the same fold without the conv bias is named", "[diagnose]") {
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
  CHECK(diagnose(in).to_json()["verdict"] == "EXPECTED");
  // The fold forgot the conv bias: b' = -mean * s + beta.
  Graph nb = g;
  nb.nodes[0].bias.clear();
  in.observed.data = evaluate(fold_batchnorm(nb, Recipe::PyTorch, {}), s.x.data, Policy{});
  const json r = diagnose(in).to_json();
  CHECK(r["verdict"] == "UNEXPECTED");
  CHECK(r["best"] == "conv_bias_dropped");
}

namespace {

// A float32 BatchNorm output with one bug injected (scale-shift form, as CPU kernels).
struct Bug {
  const char* name;
  bool nhwc = false, no_sqrt = false, swap = false, no_mean = false, no_beta = false, twice = false;
  int var_power = 2;  // 1: std passed as var (var' = sqrt(var)); 2: as given; 4: var squared
  bool unbiased = false;
};

Tensor buggy_output(const scenarios::BnScenario& s, const Bug& b) {
  const std::size_t C = s.bn.gamma.size(), n = s.x.data.size(), plane = n / C;
  std::vector<double> mean = s.bn.mean, var = s.bn.var;
  if (b.unbiased)
    for (std::size_t c = 0; c < C; ++c) {
      double sum = 0, sq = 0;
      for (std::size_t i = 0; i < plane; ++i) sum += s.x.data[c * plane + i];
      mean[c] = sum / plane;
      for (std::size_t i = 0; i < plane; ++i) sq += (s.x.data[c * plane + i] - mean[c]) * (s.x.data[c * plane + i] - mean[c]);
      var[c] = sq / (plane - 1);
    }
  auto apply = [&](const std::vector<double>& in) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = b.nhwc ? i % C : i / plane;
      double v = var[c];
      if (b.var_power == 1) v = std::sqrt(v);
      if (b.var_power == 4) v = v * v;
      const float d = static_cast<float>(v) + static_cast<float>(s.bn.eps);
      const float inv = b.no_sqrt ? 1.0f / d : 1.0f / std::sqrt(d);
      const float g = static_cast<float>(b.swap ? s.bn.beta[c] : s.bn.gamma[c]);
      const float be = b.no_beta ? 0.0f : static_cast<float>(b.swap ? s.bn.gamma[c] : s.bn.beta[c]);
      const float a = inv * g;
      const float shift = be - (b.no_mean ? 0.0f : static_cast<float>(mean[c])) * a;
      out[i] = static_cast<float>(in[i]) * a + shift;
    }
    return out;
  };
  Tensor y = s.x;
  y.data = apply(s.x.data);
  if (b.twice) y.data = apply(y.data);
  return y;
}

}  // namespace

TEST_CASE("diagnose: each common bug is named by its own hypothesis", "[diagnose]") {
  const auto s = scenarios::make_bn_scenario(true, 64, 11);
  std::vector<Bug> bugs(10);
  bugs[0].name = "std_passed_as_var";
  bugs[0].var_power = 1;
  bugs[1].name = "var_passed_as_std";
  bugs[1].var_power = 4;
  bugs[2].name = "missing_sqrt";
  bugs[2].no_sqrt = true;
  bugs[3].name = "gamma_beta_swapped";
  bugs[3].swap = true;
  bugs[4].name = "mean_not_subtracted";
  bugs[4].no_mean = true;
  bugs[5].name = "channel_axis_nhwc";
  bugs[5].nhwc = true;
  bugs[6].name = "bias_dropped";
  bugs[6].no_beta = true;
  bugs[7].name = "bn_applied_twice";
  bugs[7].twice = true;
  bugs[8].name = "training_mode_unbiased_variance";
  bugs[8].unbiased = true;
  bugs[9].name = "as_given";  // no bug
  for (const Bug& b : bugs) {
    INFO(b.name);
    const json r = run_diagnose(s, buggy_output(s, b));
    if (std::string(b.name) == "as_given") {
      CHECK(r["verdict"] == "EXPECTED");
      CHECK(r["best"].is_null());
    } else {
      CHECK(r["verdict"] == "UNEXPECTED");
      CHECK(r["best"] == b.name);
    }
  }
}
