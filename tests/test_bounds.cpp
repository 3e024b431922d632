// The deterministic bounds are rigorous (every float result lies within them, over many
// random layers, dtypes, orders, BatchNorm forms and recipes) and not vacuous (a 60 ppm
// corruption of one channel is caught; a correct fold with a cancelled bias is not flagged).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"

using namespace foldcheck;

namespace {

struct Layer {
  Graph g;
  std::vector<double> x;
};

Layer random_layer(std::mt19937_64& rng, DType dt, bool bias, std::int64_t groups, double var_scale) {
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  ref::ConvGeometry geo;
  geo.N = 1;
  geo.C = groups > 1 ? groups : 6;
  geo.O = groups > 1 ? groups : 5;
  geo.H = 7; geo.W = 6; geo.KH = 3; geo.KW = 3; geo.groups = groups;
  geo.pad_top = geo.pad_left = geo.pad_bottom = geo.pad_right = 1;
  geo.stride_h = 1 + rng() % 2;
  Layer L;
  L.g.dtype = dt;
  for (std::int64_t i = 0; i < geo.N * geo.C * geo.H * geo.W; ++i) L.x.push_back(round_to(dt, nd(rng)));
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.geometry = geo;
  conv.weight.dtype = dt;
  for (std::int64_t i = 0; i < geo.O * geo.terms_per_output(); ++i) conv.weight.data.push_back(round_to(dt, 0.3 * nd(rng)));
  if (bias)
    for (std::int64_t o = 0; o < geo.O; ++o) conv.bias.push_back(round_to(dt, 0.1 * nd(rng)));
  Node bn;
  bn.kind = Node::Kind::BatchNorm;
  bn.geometry = geo;
  for (std::int64_t o = 0; o < geo.O; ++o) {
    bn.bn.gamma.push_back(round_to(dt, 0.5 + ud(rng)));
    bn.bn.beta.push_back(round_to(dt, 0.5 * nd(rng)));
    bn.bn.mean.push_back(round_to(dt, 0.5 * nd(rng)));
    bn.bn.var.push_back(round_to(dt, var_scale * (0.1 + ud(rng))));
  }
  bn.bn.eps = (rng() & 1) ? 1e-5 : 1e-3;
  L.g.nodes = {conv, bn};
  return L;
}

ref::LayerResult reference(const Layer& L) {
  const Node& c = L.g.nodes[0];
  return ref::conv_bn(ref::LayerData{c.geometry, &L.x, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &L.g.nodes[1].bn},
                      ref::Options{});
}

}  // namespace

TEST_CASE("every path of random layers lies within its deterministic bound", "[bounds]") {
  std::mt19937_64 rng(2024);
  int checked = 0;
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16})
    for (int trial = 0; trial < 6; ++trial) {
      const bool bias = trial % 2;
      const std::int64_t groups = trial % 3 == 2 ? 4 : 1;
      const double var_scale = trial == 4 ? 1e-5 : 1.0;  // large fold scales too
      const Layer L = random_layer(rng, dt, bias, groups, var_scale);
      const ref::LayerResult ex = reference(L);
      for (Accumulation acc : {Accumulation::Sequential, Accumulation::Pairwise})
        for (BnForm form : {BnForm::Textbook, BnForm::ScaleShift}) {
          Policy p{acc, form, 1, {}};
          const auto yu = evaluate(L.g, L.x, p);
          const auto bu = deterministic_bound(L.g, ex, p);
          const Comparison cu = compare(yu, ex.y, dt, &bu.bound);
          INFO(name(dt) << " " << name(acc) << " " << name(form) << " unfused ratio " << *cu.worst_bound_ratio);
          REQUIRE(cu.verdict == Verdict::Expected);
          for (Recipe r : all_recipes()) {
            const Graph f = fold_batchnorm(L.g, r, ref::Options{});
            const auto yf = evaluate(f, L.x, p);
            const auto bf = deterministic_bound(f, ex, p);
            const Comparison cf = compare(yf, ex.y, dt, &bf.bound);
            INFO(name(r) << " fused ratio " << *cf.worst_bound_ratio);
            REQUIRE(cf.verdict == Verdict::Expected);
            ++checked;
          }
        }
    }
  CHECK(checked == 4 * 6 * 4 * 5);
}

// Arithmetic::conv_operands (issue 41): the conv's input and weights converted to TF32, bf16
// or fp16 by each conversion before the products; the bound charges the conversions (general_
// conv_bound's part) and holds on every path, order and recipe; the float32 bound, which does
// not charge them, is exceeded (the term is needed), for every arithmetic.
TEST_CASE("converted conv operands stay within the bound that charges them", "[bounds][arithmetic]") {
  std::mt19937_64 rng(4141);
  int checked = 0;
  std::map<std::string, int> beyond_float32;
  for (DType dt : {DType::Float32, DType::Float64})
    for (int trial = 0; trial < 4; ++trial) {
      Layer L = random_layer(rng, dt, trial % 2, trial == 3 ? 4 : 1, 1.0);
      L.g.nodes[0].geometry.stride_h = 1;  // Winograd applies
      L.g.nodes[1].geometry.stride_h = 1;
      const ref::LayerResult ex = reference(L);
      for (const char* an : {"tf32", "bf16", "fp16"})
        for (const char* cv : {"nearest-even", "nearest-away", "truncate"}) {
          if (std::string(an) == "fp16" && std::string(cv) != "nearest-even") continue;  // fp16: IEEE's only
          Arithmetic ar;
          set_conv_operands(ar, an, cv);
          for (Accumulation acc : {Accumulation::Sequential, Accumulation::Pairwise, Accumulation::Winograd}) {
            const Policy p{acc, BnForm::Textbook, 1, ar}, plain{acc, BnForm::Textbook, 1, {}};
            std::vector<Graph> paths{L.g};
            for (Recipe r : {Recipe::PyTorch, Recipe::Tvm}) paths.push_back(fold_batchnorm(L.g, r, ref::Options{}));
            for (const Graph& g : paths) {
              const auto y = evaluate(g, L.x, p);
              const auto b = error_bounds(g, ex, p, 0.999, &L.x);
              const Comparison c = compare(y, ex.y, dt, &b.bound);
              INFO(name(dt) << " " << an << " " << cv << " " << name(acc) << " " << g.describe() << " ratio "
                            << *c.worst_bound_ratio);
              REQUIRE(c.verdict == Verdict::Expected);
              const auto b32 = error_bounds(g, ex, plain, 0.999, &L.x);
              if (compare(y, ex.y, dt, &b32.bound).verdict == Verdict::Unexpected) ++beyond_float32[an];
              ++checked;
            }
          }
        }
    }
  CHECK(checked == 2 * 4 * 7 * 3 * 3);  // dtypes, layers, arithmetic x conversion, orders, paths
  for (const char* an : {"tf32", "bf16", "fp16"}) {
    INFO(an);
    CHECK(beyond_float32[an] > 0);
  }
}

TEST_CASE("a 60 ppm corruption of one output channel's folded weights is UNEXPECTED", "[bounds]") {
  std::mt19937_64 rng(60);
  Layer L = random_layer(rng, DType::Float32, false, 1, 1.0);
  const ref::LayerResult ex = reference(L);
  Graph f = fold_batchnorm(L.g, Recipe::PyTorch, ref::Options{});
  const std::int64_t per = f.nodes[0].geometry.terms_per_output();
  const int bad_channel = 3;
  for (std::int64_t i = 0; i < per; ++i) {
    double& w = f.nodes[0].weight.data[bad_channel * per + i];
    w = round_to(DType::Float32, w * (1 + 60e-6));
  }
  const Policy p;
  const auto y = evaluate(f, L.x, p);
  const auto b = deterministic_bound(f, ex, p);
  const Comparison c = compare(y, ex.y, DType::Float32, &b.bound);
  CHECK(c.verdict == Verdict::Unexpected);
  const std::int64_t plane = f.nodes[0].geometry.OH() * f.nodes[0].geometry.OW();
  CHECK(c.worst_bound_index / plane == bad_channel);

  // the weights themselves, against the exact fold with the recipe's bound
  const Node& bn = L.g.nodes[1];
  std::vector<ref::Value> wx;
  std::vector<double> wb;
  for (std::size_t k = 0; k < L.g.nodes[0].weight.data.size(); ++k) {
    const std::size_t o = k / per;
    const double w0 = L.g.nodes[0].weight.data[k];
    wx.push_back(ref::fold_weight(w0, bn.bn.gamma[o], bn.bn.var[o], bn.bn.eps, {}));
    wb.push_back(f.nodes[0].fold->weight_bound(o, w0));
  }
  const Comparison cw = compare(f.nodes[0].weight.data, wx, DType::Float32, &wb);
  CHECK(cw.verdict == Verdict::Unexpected);
  CHECK(cw.worst_bound_index / per == bad_channel);
  CHECK(cw.beyond_bound > per / 2);
}

TEST_CASE("a cancelled folded bias has a large ULP error yet is EXPECTED", "[bounds]") {
  // beta = mean * gamma / sqrt(var + eps) rounded: the exact folded bias is tiny, the
  // float chain's error scales with |mean * s| and |beta|, not with the result.
  const double gamma = static_cast<float>(0.8), var = static_cast<float>(0.37), mean = static_cast<float>(1.234567);
  const double s = gamma / std::sqrt(var + 1e-5);
  const double beta = static_cast<float>(mean * s);
  ref::BnParams bn{{gamma}, {beta}, {mean}, {var}, 1e-5};
  const FoldedParams fp = fold_parameters({1.0}, 1, {}, bn, DType::Float32, Recipe::PyTorch, {});
  const ref::Value bx = ref::fold_bias(0.0, gamma, beta, mean, var, 1e-5, {});
  std::vector<double> bound{fp.info.bias[0].e};
  const Comparison c = compare(fp.bias, {bx}, DType::Float32, &bound);
  INFO("bias ULP error " << c.ulp.max_abs << ", ratio to bound " << *c.worst_bound_ratio);
  CHECK(c.ulp.max_abs > 10);
  CHECK(c.verdict == Verdict::Expected);
}

TEST_CASE("float evaluation does not depend on the thread count", "[evaluate]") {
  std::mt19937_64 rng(8);
  const Layer L = random_layer(rng, DType::Float32, true, 1, 1.0);
  for (Accumulation acc : {Accumulation::Sequential, Accumulation::Pairwise}) {
    const auto a = evaluate(L.g, L.x, Policy{acc, BnForm::Textbook, 1, {}});
    const auto b = evaluate(L.g, L.x, Policy{acc, BnForm::Textbook, 4, {}});
    CHECK(a == b);
  }
}

TEST_CASE("Bounded arithmetic bounds scalar chains against the exact value", "[bounds]") {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> ud(0.01f, 4.0f);
  for (int i = 0; i < 20000; ++i) {
    const float a = ud(rng), b = ud(rng), c = ud(rng);
    const float got = (a - c) / std::sqrt(b + 1e-5f) * a + c;
    const Bounded A = Bounded::exact(a, DType::Float32), B = Bounded::exact(b, DType::Float32),
                  C = Bounded::exact(c, DType::Float32);
    const Bounded eps = Bounded::with_error(1e-5, 1e-5 * 0x1p-24, DType::Float32);
    const Bounded r = (A - C) / sqrt(B + eps) * A + C;
    // exact value at high precision
    ref::MpNumber x(300, a), t(300, b);
    mpfr_add_d(t.get(), t.get(), 1e-5, MPFR_RNDN);
    mpfr_sqrt(t.get(), t.get(), MPFR_RNDN);
    mpfr_sub_d(x.get(), x.get(), c, MPFR_RNDN);
    mpfr_div(x.get(), x.get(), t.get(), MPFR_RNDN);
    mpfr_mul_d(x.get(), x.get(), a, MPFR_RNDN);
    mpfr_add_d(x.get(), x.get(), c, MPFR_RNDN);
    mpfr_sub_d(x.get(), x.get(), got, MPFR_RNDN);
    REQUIRE(std::fabs(mpfr_get_d(x.get(), MPFR_RNDN)) <= r.e);
  }
}

TEST_CASE("probabilistic bound: lambda meets the stated confidence and tightens long sums", "[bounds][probabilistic]") {
  const double u = 0x1p-24, k = 577, N = 200704, conf = 0.999;
  const double lambda = lambda_for(k, N, u, conf);
  // union bound over N outputs of Higham & Mary's per-output failure probability
  CHECK(N * 2 * k * std::exp(-lambda * lambda * (1 - u) * (1 - u) / 2) == Approx(1 - conf).epsilon(1e-9));
  CHECK(gamma_tilde(k, u, lambda) < gamma_k(k, u) / 2);
  CHECK(gamma_tilde(k, u, lambda) > lambda * std::sqrt(k) * u);
  // for a 9-term sum the deterministic bound is the smaller one
  const double l9 = lambda_for(10, N, u, conf);
  CHECK(gamma_tilde(10, u, l9) > gamma_k(10, u));
}

TEST_CASE("a correct layer is EXPECTED under both bounds, errors between them are SUSPICIOUS", "[bounds][probabilistic]") {
  std::mt19937_64 rng(31);
  const Layer L = random_layer(rng, DType::Float32, true, 1, 1.0);
  const ref::LayerResult ex = reference(L);
  const Policy p;
  const auto y = evaluate(L.g, L.x, p);
  const BoundReport b = error_bounds(L.g, ex, p, 0.999);
  REQUIRE(b.probabilistic.size() == y.size());
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(b.probabilistic[i] <= b.bound[i]);
  CHECK(compare(y, ex.y, DType::Float32, &b.bound, &b.probabilistic).verdict == Verdict::Expected);
  // an error between the two bounds at one element
  std::vector<double> d = b.bound, pb = b.bound;
  for (auto& v : pb) v /= 4;
  std::vector<double> v(y.size());
  const ref::ValueArray& x = ex.y;
  for (std::size_t i = 0; i < y.size(); ++i) v[i] = x[i].approx.hi;
  v[5] = x[5].approx.hi + b.bound[5] / 2;
  const Comparison c = compare(v, x, DType::Float64, &d, &pb);
  CHECK(c.verdict == Verdict::Suspicious);
  CHECK(c.beyond_probabilistic == 1);
}

TEST_CASE("assert_close tolerances are derived from the bounds", "[bounds][tolerance]") {
  std::vector<ref::Value> x(3);
  x[0].approx = {1.0, 0};
  x[1].approx = {4.0, 0};
  x[2].approx = {0.0, 0};
  const Tolerance t = tolerance_from_bounds({1e-6, 2e-6, 5e-7}, ref::ValueArray(x));
  CHECK(t.atol_alone == 2e-6);
  CHECK(std::isinf(t.rtol_alone));
  CHECK(t.rtol == Approx(1e-6));  // median of {1e-6, 5e-7}, upper middle
  CHECK(t.atol == Approx(5e-7));  // covers the exact zero
  for (int i = 0; i < 3; ++i) CHECK(t.atol + t.rtol * std::fabs(x[i].approx.hi) >= std::vector<double>{1e-6, 2e-6, 5e-7}[i] * (1 - 1e-12));
}
