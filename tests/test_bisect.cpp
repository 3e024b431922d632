// The pass pipeline (passes.hpp) and `bisect` on case files (bisect.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/passes.hpp"

using namespace foldcheck;
using json = nlohmann::json;

namespace {

CaseSpec tvm_case() { return load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/tvm_thread.json"); }
// Trained-looking BatchNorm statistics: a 12-bit 1/sqrt is visibly off (on the TVM thread's
// fresh BatchNorm, var = 1 + eps, the estimate is nearly exact and FastMath stays within
// the bound).
CaseSpec resnet_case() { return load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/resnet_3x3_64.json"); }

}  // namespace

TEST_CASE("passes: each preserves the layer's value in exact arithmetic, FastMath and Quantize do not", "[passes]") {
  // In float64 every pipeline's result is the exact value up to roundings: float64's, and
  // the TVM recipe's eps held in float32 (~1e-13 relative here), against float32's 6e-8.
  // The passes move roundings, not the value.
  const CaseSpec spec = tvm_case();
  const CaseData d = materialize(spec, DType::Float64);
  const Node& c = d.graph.nodes[0];
  ref::Options ro;
  ro.formats = ref::format_bit(ref::kFloat64);
  const ref::LayerResult exact =
      ref::conv_bn({c.geometry, &d.input, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &d.graph.nodes[1].bn}, ro);
  auto max_rel = [&](const std::vector<std::string>& passes) {
    const Realized r = realize(lower(d.graph, passes, passes.size()), d.graph, d.input, {});
    const std::vector<double> y = evaluate(r.graph, r.input, r.policy);
    double m = 0, scale = 0;
    for (std::size_t i = 0; i < y.size(); ++i) scale = std::max(scale, std::fabs(exact.y.approx(i).hi));
    for (std::size_t i = 0; i < y.size(); ++i) m = std::max(m, std::fabs(y[i] - exact.y.approx(i).hi) / scale);
    return m;
  };
  const std::vector<std::string> base{"SimplifyInference", "FoldConstant", "FoldScaleAxis"};
  CHECK(max_rel({}) < 1e-13);
  for (const char* p : {"SimplifyInference", "FoldConstant", "SimplifyExpr", "FuseOps", "AlterOpLayout", "Winograd"}) {
    INFO(p);
    CHECK(max_rel({p}) < 1e-11);
    std::vector<std::string> with = base;
    with.push_back(p);
    CHECK(max_rel(with) < 1e-11);
  }
  CHECK(max_rel({"SimplifyInference", "FoldScaleAxis", "SimplifyExpr", "FuseOps", "AlterOpLayout", "Winograd"}) < 1e-11);
  CHECK(max_rel({"FastMath"}) > 1e-6);  // the 12-bit estimate: ~2^-12 relative
  CHECK(max_rel({"Quantize"}) > 1e-4);  // int8
}

TEST_CASE("passes: preconditions, names, opt levels", "[passes]") {
  const CaseData d = materialize(tvm_case(), DType::Float32);
  const Lowering a = lower(d.graph, {"FoldScaleAxis", "SimplifyInference"}, 2);
  CHECK(a.applied == std::vector<std::string>{"SimplifyInference"});
  REQUIRE(a.skipped.size() == 1);
  CHECK_THAT(a.skipped[0], Catch::Contains("SimplifyInference has not run"));
  const Lowering b = lower(d.graph, {"FoldConstant", "FastMath"}, 2);
  CHECK_FALSE(b.fast_rsqrt);  // the 1/sqrt was folded to a constant first
  CHECK(lower(d.graph, {"FastMath", "FoldConstant"}, 2).fast_rsqrt);
  CHECK_THROWS_WITH(pass_named("FoldBatchNorm"), Catch::Contains("unknown pass 'FoldBatchNorm'") && Catch::Contains("FoldScaleAxis"));
  CHECK(pipeline_for(2, {}) == std::vector<std::string>{"SimplifyInference", "FoldConstant", "SimplifyExpr", "FuseOps"});
  CHECK(pipeline_for(3, {"FoldScaleAxis", "Winograd"}) ==
        std::vector<std::string>{"SimplifyInference", "FoldConstant", "SimplifyExpr", "FuseOps", "AlterOpLayout"});
}

TEST_CASE("bisect: only FastMath leaves the bound, named within ceil(log2 n) + 1 evaluations", "[bisect]") {
  const std::vector<std::string> passes{"SimplifyInference", "FoldScaleAxis", "SimplifyExpr", "FastMath",
                                        "FuseOps",           "AlterOpLayout", "Winograd"};
  BisectOptions o;
  o.passes = passes;
  const json r = bisect_case(resnet_case(), o).to_json();
  CHECK(r["culprit"] == "FastMath");
  CHECK(r["verdict"] == "UNEXPECTED");
  CHECK(r["evaluations"].get<int>() <= static_cast<int>(std::ceil(std::log2(passes.size()))) + 1);
  // Without FastMath nothing leaves the bound; the linear table agrees step by step.
  o.passes.erase(o.passes.begin() + 3);
  const json none = bisect_case(resnet_case(), o).to_json();
  CHECK(none["culprit"].is_null());
  CHECK(none["verdict"] == "EXPECTED");
  CHECK(none["evaluations"] == 1);
  o.passes = passes;
  o.mode = BisectMode::Linear;
  const json lin = bisect_case(resnet_case(), o).to_json();
  REQUIRE(lin["steps"].size() == passes.size() + 1);
  CHECK(lin["culprit"] == "FastMath");
  for (std::size_t k = 0; k < lin["steps"].size(); ++k) CHECK(lin["steps"][k]["bad"].get<bool>() == (k >= 4));
  // Leave one out: disabling FastMath alone makes the pipeline good.
  o.mode = BisectMode::LeaveOneOut;
  const json loo = bisect_case(resnet_case(), o).to_json();
  CHECK(loo["culprit"] == "FastMath");
  // A threshold replaces the bound: 0 ULP makes the first pass that moves any output the culprit.
  o.mode = BisectMode::Search;
  o.passes = {"FoldConstant", "AlterOpLayout"};
  o.threshold_ulp = 1e9;
  CHECK(bisect_case(resnet_case(), o).to_json()["culprit"].is_null());
}

TEST_CASE("bisect: the TVM thread — FoldScaleAxis moves the weights by -5 ppm, and that is a correct fold", "[bisect]") {
  BisectOptions o;
  o.passes = {"SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps"};
  o.mode = BisectMode::Linear;
  const json r = bisect_case(tvm_case(), o).to_json();
  CHECK(r["culprit"].is_null());
  REQUIRE(r["weights"].size() == 1);
  const json& w = r["weights"][0];
  CHECK(w["pass"] == "FoldScaleAxis");
  CHECK(w["max_change_ppm"].get<double>() == Approx(-5.06).margin(0.01));
  CHECK(w["fold_verdict"] == "EXPECTED");
  // With FoldScaleAxis disabled no pass touches the weights.
  o.passes = {"SimplifyInference", "FoldConstant", "FuseOps"};
  CHECK(bisect_case(tvm_case(), o).to_json()["weights"].empty());
  // Quantize changes them beyond any fold, and the outputs beyond the bound.
  o.passes = {"SimplifyInference", "FoldScaleAxis", "Quantize"};
  o.mode = BisectMode::Search;
  const json q = bisect_case(tvm_case(), o).to_json();
  CHECK(q["culprit"] == "Quantize");
  CHECK(q["weights"].back()["pass"] == "Quantize");
  CHECK(q["weights"].back()["fold_verdict"] == "UNEXPECTED");
}

TEST_CASE("passes: what each one rewrites", "[passes]") {
  const CaseData t = materialize(tvm_case(), DType::Float32);
  const CaseData dw = materialize(load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/depthwise_3x3.json"), DType::Float32);
  auto realized = [](const CaseData& d, const std::vector<std::string>& p, bool ieee = false) {
    return realize(lower(d.graph, p, p.size()), d.graph, d.input, {}, ieee);
  };
  CHECK(realized(t, {}).policy.bn_form == BnForm::Textbook);
  CHECK(realized(t, {"SimplifyInference"}).policy.bn_form == BnForm::ScaleShift);
  const Realized folded = realized(t, {"SimplifyInference", "FoldScaleAxis"});
  REQUIRE(folded.graph.nodes.size() == 1);  // no conv bias: TVM's shift is the folded bias
  CHECK(folded.graph.nodes[0].fold.has_value());
  CHECK(realized(t, {"SimplifyExpr"}).policy.arith.rsqrt_multiply);
  CHECK(realized(t, {"FastMath"}).policy.arith.newton_steps == 0);
  CHECK(realized(t, {"FastMath"}, true).policy.arith.newton_steps == -1);  // the IEEE twin the bound comes from
  CHECK(realized(t, {"AlterOpLayout"}).policy.order == Order(Accumulation::Blocked, 16));
  CHECK(realized(t, {"Winograd"}).policy.order == Order(Accumulation::Winograd));
  // Depthwise, stride 2, with a conv bias: TVM leaves a separate add, FuseOps moves it into
  // the bias (one compile-time rounding); Winograd does not apply.
  const Realized add = realized(dw, {"SimplifyInference", "FoldScaleAxis"});
  REQUIRE(add.graph.nodes.size() == 2);
  CHECK(add.graph.nodes[1].kind == Node::Kind::ChannelAdd);
  const Realized fused = realized(dw, {"SimplifyInference", "FoldScaleAxis", "FuseOps"});
  REQUIRE(fused.graph.nodes.size() == 1);
  for (std::size_t o = 0; o < fused.graph.nodes[0].bias.size(); ++o)
    CHECK(fused.graph.nodes[0].bias[o] == static_cast<double>(static_cast<float>(add.graph.nodes[0].bias[o]) + static_cast<float>(add.graph.nodes[1].bias[o])));
  CHECK_FALSE(fused.graph.nodes[0].fold->has_post_add);
  const Lowering w = lower(dw.graph, {"Winograd"}, 1);
  CHECK_FALSE(w.winograd);
  REQUIRE(w.skipped.size() == 1);
  CHECK_THAT(w.skipped[0], Catch::Contains("3x3 kernel, stride 1"));
  // Quantize: every weight of a channel and every input on a grid of 255 levels of 2^k.
  const Realized q = realized(t, {"Quantize"});
  const std::size_t per = static_cast<std::size_t>(q.graph.nodes[0].geometry.terms_per_output());
  for (std::size_t o = 0; o * per < q.graph.nodes[0].weight.data.size(); ++o) {
    double m = 0;
    for (std::size_t i = 0; i < per; ++i) m = std::max(m, std::fabs(q.graph.nodes[0].weight.data[o * per + i]));
    const double s = std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(m / 127.0))) - 0);
    for (std::size_t i = 0; i < per; ++i) {
      const double k = q.graph.nodes[0].weight.data[o * per + i] / s;
      CHECK(k == std::nearbyint(k));
      CHECK(std::fabs(k) <= 127);
    }
  }
  std::set<double> levels(q.input.begin(), q.input.end());
  CHECK(levels.size() <= 255);
}
