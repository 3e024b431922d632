// Stage attribution and the arithmetic variants: replays reproduce the float path bit for
// bit in every order and variant; contributions plus residual equal the total error per
// element; a fast rsqrt puts the error in the rsqrt stage; a tiny-variance layer with
// float16 folded weights puts it in the weight multiply; every variant's bound holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/layer/fold_pass.hpp"

using namespace foldcheck;

namespace {

struct Setup {
  CaseData d;
  ref::LayerResult exact;
};

Setup setup(const std::string& case_name, DType dt) {
  const CaseSpec spec = load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/" + case_name + ".json");
  Setup s{materialize(spec, dt), {}};
  const Node& c = s.d.graph.nodes[0];
  s.exact = ref::conv_bn(ref::LayerData{c.geometry, &s.d.input, &c.weight.data, c.bias.empty() ? nullptr : &c.bias,
                                        &s.d.graph.nodes[1].bn},
                         ref::Options{});
  return s;
}

Attribution attribute_path(const Setup& s, std::optional<Recipe> r, const Policy& p, std::size_t limit = 400) {
  const Graph g = r ? fold_batchnorm(s.d.graph, *r, {}, p.arith) : s.d.graph;
  const std::vector<double> y = evaluate(g, s.d.input, p);
  const auto sample = attribution_sample(y.size(), limit, {});
  return attribute(s.d.graph, s.d.input, s.exact, PathSpec{r, p}, y, sample, {}, 2);
}

double share(const Attribution& a, Stage st) {
  const nlohmann::json j = to_json(a);
  for (const auto& x : j["stages"])
    if (x["stage"] == name(st)) return x["share_mean"].get<double>();
  return -1;
}

}  // namespace

TEST_CASE("attribution: contributions plus residual equal the total error per element", "[attribution]") {
  const Setup s = setup("depthwise_3x3", DType::Float32);
  for (std::optional<Recipe> r : {std::optional<Recipe>{}, std::optional<Recipe>{Recipe::PyTorch},
                                  std::optional<Recipe>{Recipe::Tvm}, std::optional<Recipe>{Recipe::Exact}}) {
    Policy p;
    p.bn_form = BnForm::ScaleShift;
    const Attribution a = attribute_path(s, r, p, 0);
    CHECK(a.replay_mismatches == 0);
    CHECK(a.replay_error_ulp < 1e-6);
    for (std::size_t e = 0; e < a.total.size(); ++e) {
      long double sum = a.residual[e];
      for (const auto& c : a.contribution)
        if (!c.empty()) sum += c[e];
      REQUIRE(std::fabs(static_cast<double>(sum) - a.total[e]) <= 1e-12 * std::max(1.0, std::fabs(a.total[e])));
      // The interaction residual is second order: far below the error itself.
      CHECK(std::fabs(a.residual[e]) <= 1e-3 * std::max(1.0, std::fabs(a.total[e])));
    }
  }
}

TEST_CASE("attribution: replays are bit-identical to evaluate in every order and variant", "[attribution]") {
  const Setup s = setup("engine_variants", DType::Float32);
  std::vector<Arithmetic> variants(4);
  variants[1].fma = true;
  variants[2].newton_steps = 1;
  variants[3].weight_dtype = DType::BFloat16;
  for (const Order& o : {Order(Accumulation::Sequential), Order(Accumulation::Pairwise), Order(Accumulation::Blocked, 16),
                         Order(Accumulation::Winograd)})
    for (const Arithmetic& ar : variants) {
      Policy p;
      p.order = o;
      p.arith = ar;
      INFO(o.label() << " " << ar.label());
      CHECK(attribute_path(s, std::nullopt, p, 200).replay_mismatches == 0);
      CHECK(attribute_path(s, Recipe::OnnxRuntime, p, 200).replay_mismatches == 0);
    }
}

TEST_CASE("attribution: a fast rsqrt without Newton steps puts the error in the rsqrt stage", "[attribution]") {
  const Setup s = setup("engine_variants", DType::Float32);
  Policy p;
  p.arith.newton_steps = 0;
  p.bn_form = BnForm::ScaleShift;
  CHECK(share(attribute_path(s, std::nullopt, p), Stage::Rsqrt) > 0.9);
  CHECK(share(attribute_path(s, Recipe::PyTorch, p), Stage::Rsqrt) > 0.9);
  // One Newton step brings it back near float32 rounding: no longer dominant.
  p.arith.newton_steps = 1;
  CHECK(share(attribute_path(s, Recipe::PyTorch, p), Stage::Rsqrt) < 0.5);
}

TEST_CASE("attribution: a tiny-variance channel folded into float16 weights errs in the weight multiply", "[attribution]") {
  const Setup s = setup("tiny_variance", DType::Float16);
  const Attribution a = attribute_path(s, Recipe::PyTorch, Policy{});
  const double w = share(a, Stage::Weight);
  CHECK(w > 0.5);
  for (Stage st : {Stage::VarEps, Stage::Rsqrt, Stage::Scale, Stage::Bias, Stage::Accumulation, Stage::Output})
    CHECK(share(a, st) < w);
}

TEST_CASE("variants: every order and arithmetic stays within its deterministic bound", "[attribution][bounds]") {
  const Setup s = setup("engine_variants", DType::Float32);
  std::vector<Arithmetic> variants(6);
  variants[1].fma = true;
  variants[2].newton_steps = 0;
  variants[3].newton_steps = 2;
  variants[4].weight_dtype = DType::BFloat16;
  variants[5].weight_dtype = DType::Float16;
  for (const Order& o : {Order(Accumulation::Sequential), Order(Accumulation::Pairwise), Order(Accumulation::Blocked, 7),
                         Order(Accumulation::Winograd)})
    for (const Arithmetic& ar : variants)
      for (BnForm form : {BnForm::Textbook, BnForm::ScaleShift}) {
        Policy p{o, form, 2, ar};
        INFO(o.label() << " " << ar.label() << " " << name(form));
        const auto bu = deterministic_bound(s.d.graph, s.exact, p, &s.d.input);
        CHECK(compare(evaluate(s.d.graph, s.d.input, p), s.exact.y, DType::Float32, &bu.bound).verdict == Verdict::Expected);
        for (Recipe r : {Recipe::PyTorch, Recipe::Tvm, Recipe::OnnxRuntime, Recipe::Exact}) {
          const Graph f = fold_batchnorm(s.d.graph, r, {}, ar);
          const auto bf = deterministic_bound(f, s.exact, p, &s.d.input);
          const Comparison c = compare(evaluate(f, s.d.input, p), s.exact.y, DType::Float32, &bf.bound);
          CHECK(c.verdict == Verdict::Expected);
        }
      }
}

TEST_CASE("variants: fast rsqrt bound shrinks with Newton steps and covers the estimate", "[bounds]") {
  for (double a : {1e-5, 0.37, 1.00001, 3.0, 1234.5}) {
    const Bounded in = Bounded::exact(static_cast<float>(a), DType::Float32);
    double prev = INFINITY;
    for (int steps = 0; steps <= 2; ++steps) {
      const Bounded r = bounded_fast_rsqrt(in, steps);
      const float y = fast_rsqrt(static_cast<float>(a), steps);
      CHECK(std::fabs(static_cast<long double>(y) - r.v) <= r.e);
      CHECK(r.e < prev);
      prev = r.e;
    }
    // After two steps: within a few float32 ULPs.
    CHECK(prev / bounded_fast_rsqrt(in, 2).mag() < 8 * 0x1p-24);
  }
}

TEST_CASE("variants: Winograd needs 3x3 stride 1, blocked needs K >= 1", "[bounds]") {
  ref::ConvGeometry g;
  g.KH = g.KW = 3;
  g.stride_h = 2;
  CHECK_THROWS(check_order(Order(Accumulation::Winograd), g));
  CHECK_THROWS(order_from_name("blocked:0"));
  CHECK(order_from_name("blocked:32").block == 32);
  CHECK(order_from_name("winograd").kind == Accumulation::Winograd);
}

TEST_CASE("attribution does not depend on the thread count", "[attribution]") {
  const Setup s = setup("depthwise_3x3", DType::Float32);
  const Graph f = fold_batchnorm(s.d.graph, Recipe::Tvm, {});
  const std::vector<double> y = evaluate(f, s.d.input, Policy{});
  const auto sample = attribution_sample(y.size(), 300, {5, 17});
  const Attribution a = attribute(s.d.graph, s.d.input, s.exact, PathSpec{Recipe::Tvm, Policy{}}, y, sample, {}, 1);
  const Attribution b = attribute(s.d.graph, s.d.input, s.exact, PathSpec{Recipe::Tvm, Policy{}}, y, sample, {}, 3);
  CHECK(a.elements == b.elements);
  CHECK(a.total == b.total);
  CHECK(a.residual == b.residual);
  for (unsigned k = 0; k < kNumStages; ++k) CHECK(a.contribution[k] == b.contribution[k]);
  CHECK(std::find(a.elements.begin(), a.elements.end(), 17u) != a.elements.end());
}
