// Folds computed in a 16-bit arithmetic (PyTorch's fusers on a .half() or .bfloat16()
// module): the replay against PyTorch's kernels written out op by op here, the bound
// against the certified exact fold on adversarial parameters, and explain / fold checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/model/fold_check.hpp"

using namespace foldcheck;

namespace {

// PyTorch's CPU kernels on a tensor of t, written independently of Narrow: operands as
// float32, the operation in float32, the result rounded to t; a Python scalar converted to t
// (through float32) first.
struct TorchKernels {
  DType t;
  float k(float r) const { return static_cast<float>(round_to(t, r)); }
  // torch.rsqrt: vector kernel (one rounding to t) or scalar loop (two).
  float rsqrt(float a, bool scalar_loop) const {
    return scalar_loop ? k(1.0f / k(std::sqrt(a))) : k(1.0f / std::sqrt(a));
  }
};

// torch.nn.utils.fusion.fuse_conv_bn_weights, op by op, for channel o.
struct TorchFold {
  std::vector<double> weight, bias;
};
TorchFold torch_fold(DType t, const std::vector<double>& w, std::int64_t per_channel, const std::vector<double>& b,
                     const ref::BnParams& bn, const std::vector<bool>& scalar_loop) {
  const TorchKernels K{t};
  TorchFold out;
  for (std::size_t o = 0; o < bn.gamma.size(); ++o) {
    const float var = static_cast<float>(bn.var[o]), eps = K.k(static_cast<float>(bn.eps));
    const float rs = K.rsqrt(K.k(var + eps), scalar_loop[o]);
    const float g = static_cast<float>(bn.gamma[o]), s = K.k(g * rs);
    for (std::int64_t i = 0; i < per_channel; ++i)
      out.weight.push_back(K.k(static_cast<float>(w[o * per_channel + i]) * s));
    const float d = K.k(static_cast<float>(b[o]) - static_cast<float>(bn.mean[o]));
    out.bias.push_back(K.k(K.k(K.k(d * rs) * g) + static_cast<float>(bn.beta[o])));
  }
  return out;
}

// Random BatchNorms of t over wide ranges: variances down to where var + eps is below
// float16's normal range (eps 1e-5 is itself subnormal there; with eps 1e-7 the sum's
// rounding is far from relative), large and tiny gammas.
struct Layer {
  std::vector<double> w, b;
  ref::BnParams bn;
  std::int64_t per_channel = 0;
};
Layer random_layer(DType t, std::mt19937_64& rng, std::size_t C, std::int64_t per_channel, double eps = 1e-5) {
  std::uniform_real_distribution<double> u(-1, 1), e(-24, 4);
  Layer L;
  L.per_channel = per_channel;
  L.bn.eps = eps;
  auto r = [&](double x) { return round_to(t, x); };
  for (std::size_t o = 0; o < C; ++o) {
    L.bn.gamma.push_back(r(u(rng) * std::exp2(e(rng) / 4)));
    L.bn.beta.push_back(r(u(rng)));
    L.bn.mean.push_back(r(u(rng) * 4));
    L.bn.var.push_back(r(std::exp2(e(rng))));
    L.b.push_back(r(u(rng)));
    for (std::int64_t i = 0; i < per_channel; ++i) L.w.push_back(r(u(rng) * std::exp2(e(rng) / 3)));
  }
  return L;
}

// A trained-like layer of t (variances from 0.5 up), 3x3 kernels of one input channel.
Layer trained_like(DType t, std::uint64_t seed, std::size_t channels) {
  std::mt19937_64 rng(seed);
  Layer L = random_layer(t, rng, channels, 9);
  for (double& v : L.bn.var) v = round_to(t, 0.5 + std::fabs(v));
  return L;
}

LayerParams params_of(DType t, const Layer& L) {
  LayerParams lp;
  lp.dtype = t;
  lp.channels = static_cast<std::int64_t>(L.bn.gamma.size());
  lp.per_channel = L.per_channel;
  lp.weight = L.w;
  lp.bias = L.b;
  lp.bn = L.bn;
  return lp;
}

Arithmetic in(DType t, bool twice = false) {
  Arithmetic a;
  a.fold_dtype = t;
  a.rsqrt_rounds_twice = twice;
  return a;
}

}  // namespace

TEST_CASE("a PyTorch fold in float16/bfloat16 arithmetic is replayed bit for bit, both rsqrt kernels", "[fold][narrow]") {
  std::mt19937_64 rng(2026);
  for (const DType t : {DType::Float16, DType::BFloat16})
    for (const double eps : {1e-5, 1e-3, 1e-7}) {  // each rounds to t differently
      const Layer L = random_layer(t, rng, 400, 3, eps);
      for (const bool twice : {false, true}) {
        const FoldedParams fp = fold_parameters(L.w, L.per_channel, L.b, L.bn, t, Recipe::PyTorch, {}, in(t, twice));
        const TorchFold tf = torch_fold(t, L.w, L.per_channel, L.b, L.bn, std::vector<bool>(400, twice));
        INFO(name(t) << " eps " << eps << (twice ? " scalar loop" : " vector kernel"));
        CHECK(fp.weight == tf.weight);
        CHECK(fp.bias == tf.bias);
      }
    }
}

// Every finite folded weight and single bias of recipe r within its bound of the exact
// fold; returns how many weights were checked.
static std::size_t check_bounds(DType t, const Layer& L, Recipe r, bool twice) {
  const ref::Options ro;
  const FoldedParams fp = fold_parameters(L.w, L.per_channel, L.b, L.bn, t, r, ro, in(t, twice));
  std::size_t checked = 0;
  for (std::size_t k = 0; k < L.w.size(); ++k) {
    const std::size_t o = k / static_cast<std::size_t>(L.per_channel);
    if (!std::isfinite(fp.weight[k])) continue;  // an overflowing fold: outside any bound's model
    const ref::Value x = ref::fold_weight(L.w[k], L.bn.gamma[o], L.bn.var[o], L.bn.eps, ro);
    INFO(name(t) << " " << name(r) << " eps " << L.bn.eps << " channel " << o << " var " << L.bn.var[o]);
    REQUIRE(std::fabs(fp.weight[k] - (x.approx.hi + x.approx.lo)) <= fp.info.weight_bound(o, L.w[k]));
    ++checked;
  }
  for (std::size_t o = 0; !fp.info.has_post_add && o < L.b.size(); ++o) {
    if (!std::isfinite(fp.bias[o])) continue;
    const ref::Value x = ref::fold_bias(L.b[o], L.bn.gamma[o], L.bn.beta[o], L.bn.mean[o], L.bn.var[o], L.bn.eps, ro);
    INFO(name(t) << " " << name(r) << " eps " << L.bn.eps << " bias " << o << " var " << L.bn.var[o]);
    REQUIRE(std::fabs(fp.bias[o] - (x.approx.hi + x.approx.lo)) <= fp.info.bias[o].e);
  }
  return checked;
}

TEST_CASE("the bound of a fold in 16-bit arithmetic holds for every recipe on adversarial BatchNorms", "[fold][narrow][bound]") {
  std::mt19937_64 rng(7);
  for (const DType t : {DType::Float16, DType::BFloat16})
    for (const double eps : {1e-5, 1e-7, 1e-3}) {
      const Layer L = random_layer(t, rng, 2000, 2, eps);
      std::size_t checked = 0;
      for (const Recipe r : {Recipe::PyTorch, Recipe::Tvm, Recipe::OnnxRuntime, Recipe::OnnxOptimizer})
        for (const bool twice : {false, true}) checked += check_bounds(t, L, r, twice);
      CHECK(checked > 20000);
    }
}

TEST_CASE("explain: a float16 PyTorch fold is EXPECTED and bit-exact in float16 arithmetic, channel by channel", "[explain][narrow]") {
  std::mt19937_64 rng(11);
  const DType t = DType::Float16;
  Layer L = random_layer(t, rng, 48, 4);
  for (double& v : L.bn.var) v = round_to(t, 0.5 + std::fabs(v));  // a trained-like range
  // Which channels take torch.rsqrt's scalar loop depends on the tensor (arithmetic.hpp): mixed.
  std::vector<bool> scalar(48, false);
  for (std::size_t o = 40; o < 48; ++o) scalar[o] = true;
  ExplainInput e;
  e.dtype = t;
  e.original = L.w;
  e.bn = L.bn;
  e.bn_given = true;
  e.observed = torch_fold(t, L.w, 4, std::vector<double>(48, 0.0), L.bn, scalar).weight;
  auto j = explain(e).to_json();
  CHECK(j["verdict"] == "EXPECTED");
  const auto exact = j["bit_exact_recipes"].get<std::vector<std::string>>();
  CHECK(std::find(exact.begin(), exact.end(), "pytorch (float16 arithmetic)") != exact.end());
  CHECK(j["recipes"].size() == 9);  // five recipes, and four in float16 arithmetic
  e.observed[4 * 7 + 1] = round_to(t, e.observed[4 * 7 + 1] * 1.02);  // ~20 ULP of float16
  j = explain(e).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  CHECK(j["elements"][4 * 7 + 1]["channel"] == 7);
  e.dtype = DType::Float32;  // a float32 model's fold is only scored in float32
  e.observed = fold_parameters(L.w, 4, {}, L.bn, DType::Float32, Recipe::PyTorch, {}).weight;
  CHECK(explain(e).to_json()["recipes"].size() == 5);
}

TEST_CASE("fold check: an observed bfloat16 fold in bfloat16 arithmetic is EXPECTED, a changed channel is named", "[model][narrow]") {
  const DType t = DType::BFloat16;
  const Layer L = trained_like(t, 5, 64);
  const LayerParams lp = params_of(t, L);
  const TorchFold tf = torch_fold(t, L.w, 9, L.b, L.bn, std::vector<bool>(64, false));
  ObservedFold obs{tf.weight, tf.bias};
  FoldCheck fc = check_fold(lp, obs, {});
  CHECK(fc.verdict == Verdict::Expected);
  CHECK(fc.recipes.size() == 6);  // three recipes (TVM adds its shift after: not one bias), each also in bfloat16
  obs.weight[9 * 33] = round_to(t, obs.weight[9 * 33] * 1.1);
  fc = check_fold(lp, obs, {});
  CHECK(fc.verdict == Verdict::Unexpected);
  CHECK(to_json(fc)["worst_channel"] == 33);
}

TEST_CASE("a 16-bit model folded in float32 is credited to float32, not to the wider 16-bit bound", "[model][narrow]") {
  const DType t = DType::Float16;
  const Layer L = trained_like(t, 8, 32);
  const LayerParams lp = params_of(t, L);
  const FoldedParams f32 = fold_parameters(L.w, 9, L.b, L.bn, t, Recipe::OnnxRuntime, {});  // float32, stored as float16
  const FoldCheck fc = check_fold(lp, ObservedFold{f32.weight, f32.bias}, {});
  CHECK(fc.verdict == Verdict::Expected);
  CHECK_FALSE(fc.recipes[fc.best].fold_dtype.has_value());
  ExplainInput e;
  e.dtype = t;
  e.original = L.w;
  e.observed = f32.weight;
  e.bn = L.bn;
  e.bn_given = true;
  const auto j = explain(e).to_json();
  CHECK(j["bound"]["recipe"].get<std::string>().find("arithmetic") == std::string::npos);
}

TEST_CASE("an infinite folded weight says whether the exact fold or the 16-bit arithmetic overflowed", "[explain][narrow]") {
  ExplainInput e;
  e.dtype = DType::Float16;
  e.bn_given = true;
  e.original = {2.0, 1.0};
  e.bn = ref::BnParams{{60000.0, 1.0}, {0.0, 0.0}, {0.0, 0.0}, {1.0, 1.0}, 1e-5};  // 2 * 60000 > 65504
  e.observed = fold_parameters(e.original, 1, {}, e.bn, e.dtype, Recipe::PyTorch, {}).weight;
  REQUIRE(std::isinf(e.observed[0]));
  // The infinity is the exact fold's correct rounding: agreement, not an error; the other
  // element is compared (EXPECTED), the infinite weight said. Every element past the range:
  // nothing compared (MISTRUSTED), said too.
  auto said = [](const nlohmann::json& j, const char* what) {
    return std::ranges::any_of(j["reasoning"], [&](const nlohmann::json& line) {
      return line.get<std::string>().find(what) != std::string::npos;
    });
  };
  auto j = explain(e).to_json();
  CHECK(j["verdict"] == "EXPECTED");
  CHECK(said(j, "bounds the error at element 1 by"));
  CHECK(said(j, "1 element(s) are infinite because their exact fold exceeds float16's largest finite value 65504"));
  CHECK(said(j, "Every finite observed value is within"));
  const ExplainInput finite_one = e;
  e.original = {2.0, -3.0};
  e.bn.gamma = {60000.0, 60000.0};
  e.observed = fold_parameters(e.original, 1, {}, e.bn, e.dtype, Recipe::PyTorch, {}).weight;
  j = explain(e).to_json();
  CHECK(j["verdict"] == "MISTRUSTED");
  CHECK(said(j, "2 element(s) are infinite"));
  CHECK_FALSE(said(j, "ULP of the exact fold"));
  // An infinity of the other sign, or where the exact fold is finite, is an error.
  e = finite_one;
  e.observed[0] = -e.observed[0];
  j = explain(e).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  CHECK(said(j, "an infinity of the other sign is no rounding or overflow of the fold"));
  CHECK_FALSE(said(j, "The fold is not wrong"));
  e = finite_one;
  // gamma / sqrt(var + eps) overflows float16 although the folded weight is ~1888.
  e.bn = ref::BnParams{{60000.0, 1.0}, {0.0, 0.0}, {0.0, 0.0}, {1.0, 1.0}, 1e-5};
  e.original = {round_to(DType::Float16, 1e-3), 1.0};
  e.bn.var = {round_to(DType::Float16, 1e-3), 1.0};
  e.observed = fold_parameters(e.original, 1, {}, e.bn, e.dtype, Recipe::PyTorch, {}, in(DType::Float16)).weight;
  REQUIRE(std::isinf(e.observed[0]));
  j = explain(e).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  INFO(j["reasoning"][0].get<std::string>());
  CHECK(
      j["reasoning"][0].get<std::string>().find("an intermediate of the fold (such as gamma/sqrt(var+eps)) overflowed: "
                                                "the pytorch") != std::string::npos);
  // An infinity where the exact fold is finite and no recipe's chain overflows in any
  // arithmetic (the multiplier is 1): not an overflow of the fold (it was said to be one).
  e = finite_one;
  e.observed[1] = HUGE_VAL;
  j = explain(e).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  CHECK(said(j, "no recipe's fold overflows there in any arithmetic: no rounding or overflow of the fold gives it"));
  CHECK_FALSE(said(j, "an intermediate of the fold"));
}

TEST_CASE("diagnose: a 16-bit output made infinite by a fold in 16-bit arithmetic names the channel's multiplier",
          "[diagnose][narrow]") {
  // x [1, 2, 1, 2] -> 1x1 conv (2 x 2) -> BatchNorm whose channel 1 multiplier gamma /
  // sqrt(var + eps) = 1000 / sqrt(1e-5) ~ 316228 is past float16's range; the exact outputs
  // are finite (|w| ~ 0.01). A fold in float16 arithmetic makes channel 1's weights infinite.
  const DType h = DType::Float16;
  DiagnoseInput in;
  in.x = Tensor{{1, 2, 1, 2}, {0.5, -0.25, 0.75, 1.0}, h};
  in.weights = Tensor{{2, 2, 1, 1}, {round_to(h, 0.01), round_to(h, -0.02), round_to(h, 0.03), round_to(h, 0.01)}, h};
  in.bn = ref::BnParams{{1.0, 1000.0}, {0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}, 1e-5};
  in.padding = 0;
  std::vector<double> y;
  for (std::size_t o = 0; o < 2; ++o)
    for (std::size_t p = 0; p < 2; ++p) {
      const double c = in.weights->data[2 * o] * in.x.data[p] + in.weights->data[2 * o + 1] * in.x.data[2 + p];
      y.push_back(o == 0 ? round_to(h, c / std::sqrt(1e-5)) : std::copysign(HUGE_VAL, c));
    }
  in.observed = Tensor{{1, 2, 1, 2}, y, h};
  const nlohmann::json j = diagnose(in).to_json();
  CHECK(j["verdict"] == "UNEXPECTED");
  const std::string summary = j["summary"];
  INFO(summary);
  CHECK(summary.find("channel 1's multiplier gamma/sqrt(var+eps) = 316228 exceeds float16's largest finite value") !=
        std::string::npos);
  // An infinity in channel 0 (multiplier 1/sqrt(1e-5), in range) as well: another cause, no such claim.
  in.observed.data[0] = HUGE_VAL;
  CHECK(diagnose(in).to_json()["summary"].get<std::string>().find("multiplier") == std::string::npos);
  in.observed.data[0] = y[0];
  // The same infinities in float32 (the multiplier fits): no such claim.
  in.x.dtype = in.weights->dtype = in.observed.dtype = DType::Float32;
  CHECK(diagnose(in).to_json()["summary"].get<std::string>().find("multiplier") == std::string::npos);
}

TEST_CASE("diagnose: an output past the 16-bit range is not judged, and does not hide a wrong element elsewhere",
          "[diagnose][narrow]") {
  // A float16 BatchNorm alone: element 0's exact output 40000 * 2 / sqrt(1 + 1e-5) ~ 80000 is
  // past float16's 65504 (its correct rounding is +inf). That element is not judged (MISTRUSTED
  // when the rest fits), but a wrong element elsewhere, a NaN or the other sign's infinity
  // there, is evidence (UNEXPECTED): the overflow made every one of them MISTRUSTED.
  const DType h = DType::Float16;
  DiagnoseInput in;
  in.x = Tensor{{1, 2, 2, 2}, {40000.0, 0.5, -1.25, 2.0, 0.75, -0.5, 1.5, 3.0}, h};
  in.bn = ref::BnParams{{2.0, 1.0}, {0.0, 0.25}, {0.0, 0.5}, {1.0, 2.0}, 1e-5};
  std::vector<double> honest;
  for (std::size_t i = 0; i < 8; ++i) {
    const std::size_t c = i / 4;
    honest.push_back(round_to(h, (in.x.data[i] - in.bn->mean[c]) * in.bn->gamma[c] / std::sqrt(in.bn->var[c] + 1e-5) +
                                     in.bn->beta[c]));
  }
  REQUIRE(std::isinf(honest[0]));
  auto judged = [&](const std::vector<double>& y) {
    in.observed = Tensor{{1, 2, 2, 2}, y, h};
    return diagnose(in).to_json();
  };
  nlohmann::json j = judged(honest);
  CHECK(j["verdict"] == "MISTRUSTED");
  CHECK(j["summary"].get<std::string>().starts_with("the layer's exact output at element 0 is 8e+04, past float16's"));
  std::vector<double> off = honest;  // channel 1 (elements 4 to 7) scaled by 1.5
  for (std::size_t i = 4; i < 8; ++i) off[i] = round_to(h, honest[i] * 1.5);
  auto with = [&](std::size_t i, double v) {
    std::vector<double> y = honest;
    y[i] = v;
    return y;
  };
  const std::vector<std::tuple<const char*, std::vector<double>, const char*>> wrongs{
      {"channel 1 off by 1.5", off, "(worst element "},
      {"NaN where the output overflows", with(0, std::nan("")), "element 0 is nan"},
      {"the other sign's infinity", with(0, -HUGE_VAL), "element 0 is -inf"},
      {"a finite value of the other sign", with(0, -65504.0), "element 0 is -65504"},
      {"an infinity where the output is finite", with(6, HUGE_VAL), "element 6 is inf"}};
  for (const auto& [what, y, said] : wrongs) {
    INFO(what);
    j = judged(y);
    const std::string summary = j["summary"];
    INFO(summary);
    CHECK(j["verdict"] == "UNEXPECTED");
    CHECK(summary.starts_with("beyond the rounding bound of the layer as given"));
    CHECK(summary.find(said) != std::string::npos);
    CHECK(summary.find("besides, the layer's exact output at element 0") != std::string::npos);
  }
}

TEST_CASE("a recipe that may divide by zero in a 16-bit arithmetic is left out, the others judge the fold",
          "[explain][narrow]") {
  // var 0, eps 1e-9: var + eps rounds to 0 in float16 (below its smallest subnormal), so the
  // recipes' folds in float16 arithmetic divide by zero (no bound: Bounded refuses). explain,
  // the fold check and diagnose stopped with "bound: divisor's error bound reaches zero"; the
  // float32 recipes fold it (31622.78 fits float16) and judge it.
  const DType h = DType::Float16;
  ExplainInput e;
  e.dtype = h;
  e.bn_given = true;
  e.original = {1.0, -1.0, 0.5, 0.25};
  e.bn = ref::BnParams{{1.0, 1.0}, {0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}, 1e-9};
  e.observed = fold_parameters(e.original, 2, {}, e.bn, h, Recipe::PyTorch, {}).weight;
  Arithmetic in16;
  in16.fold_dtype = h;
  CHECK_THROWS_AS(fold_parameters(e.original, 2, {}, e.bn, h, Recipe::PyTorch, {}, in16), UnboundedFold);
  CHECK(explain(e).verdict() == Verdict::Expected);
  e.observed[3] = round_to(h, e.observed[3] * 1.01);
  CHECK(explain(e).verdict() == Verdict::Unexpected);
  // The fold check of a layer's parameters, observed: the same.
  LayerParams L;
  L.dtype = h;
  L.weight = e.original;
  L.per_channel = 2;
  L.channels = 2;
  L.bn = e.bn;
  ObservedFold obs{fold_parameters(e.original, 2, {}, e.bn, h, Recipe::PyTorch, {}).weight,
                   fold_parameters(e.original, 2, {}, e.bn, h, Recipe::PyTorch, {}).bias};
  CHECK(check_fold(L, obs, {}).verdict == Verdict::Expected);
}
