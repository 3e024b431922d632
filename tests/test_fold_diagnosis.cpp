// The weight-level diagnosis of a fused conv (diagnosis/fold_diagnosis.hpp): a float32 fold made
// with each slip users make is named by it (eps recovered and snapped to the default used, the
// variance read as the standard deviation, the square root left out); a correct fold names
// none; a changed channel is named with its factor; a wrong bias is told missing, off
// everywhere, or off in the channels that are; the bound of a slip holds one rounding and
// refuses a part per million.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "foldcheck/diagnosis/fold_diagnosis.hpp"

using namespace foldcheck;
using foldcheck::diagnosis::FoldedConv;

namespace {

constexpr std::int64_t kC = 8, kN = 27;

// A conv of 8 channels of 3x3x3 float32 weights and a trained-like BatchNorm (eps 1e-3).
FoldedConv layer() {
  std::mt19937 g(11);
  std::normal_distribution<float> n(0, 0.1f);
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  FoldedConv f;
  f.channels = kC;
  f.per_channel = kN;
  for (std::int64_t i = 0; i < kC * kN; ++i) f.weight.push_back(n(g));
  for (std::int64_t o = 0; o < kC; ++o) {
    f.bias.push_back(n(g));
    f.bn.gamma.push_back(u(g));
    f.bn.beta.push_back(n(g));
    f.bn.mean.push_back(n(g));
    f.bn.var.push_back(u(g));
  }
  f.bn.eps = 1e-3;
  return f;
}

// The fold in float32, with the scale's denominator `den` (the slip) and bias on or off.
template <class Den>
FoldedConv folded(FoldedConv f, Den den, bool with_bias = true) {
  f.observed_weight.clear();
  f.observed_bias.clear();
  for (std::int64_t o = 0; o < kC; ++o) {
    const auto k = static_cast<std::size_t>(o);
    const float s = static_cast<float>(f.bn.gamma[k]) / den(static_cast<float>(f.bn.var[k]));
    for (std::int64_t i = 0; i < kN; ++i)
      f.observed_weight.push_back(static_cast<float>(f.weight[k * kN + static_cast<std::size_t>(i)]) * s);
    const float b =
        (static_cast<float>(f.bias[k]) - static_cast<float>(f.bn.mean[k])) * s + static_cast<float>(f.bn.beta[k]);
    f.observed_bias.push_back(with_bias ? b : 0.0f);
  }
  return f;
}

FoldedConv correct() {
  return folded(layer(), [](float v) { return std::sqrt(v + 1e-3f); });
}

}  // namespace

TEST_CASE("fold diagnosis: a correct fold names no slip, its bias none off", "[diagnose]") {
  const FoldedConv f = correct();
  CHECK(diagnosis::fold_fits(diagnosis::as_given(f.bn), f));
  CHECK_FALSE(diagnosis::fold_slip(f));
  const diagnosis::BiasDiagnosis b = diagnosis::diagnose_bias(f);
  CHECK(b.off.empty());
  CHECK_FALSE(b.missing);
}

TEST_CASE("fold diagnosis: each slip of the catalogue is named from the folded weights", "[diagnose]") {
  const auto eps = folded(layer(), [](float v) { return std::sqrt(v + 1e-5f); });
  const auto e = diagnosis::fold_slip(eps);
  REQUIRE(e);
  CHECK(e->name == "eps_mismatch");
  CHECK(e->params["eps_recovered"] == 1e-5);  // snapped to the default that fits
  CHECK_THAT(diagnosis::slip_sentence(*e), Catch::Contains("eps = 1e-05 where the BatchNorm's eps is 0.001"));
  const auto std_as_var =
      diagnosis::fold_slip(folded(layer(), [](float v) { return std::sqrt(std::sqrt(v) + 1e-3f); }));
  REQUIRE(std_as_var);
  CHECK(std_as_var->name == "std_passed_as_var");
  CHECK_THAT(diagnosis::slip_sentence(*std_as_var), Catch::Contains("the variance read as the standard deviation"));
  const auto no_sqrt = diagnosis::fold_slip(folded(layer(), [](float v) { return v + 1e-3f; }));
  REQUIRE(no_sqrt);
  CHECK(no_sqrt->name == "missing_sqrt");
  CHECK_THAT(diagnosis::slip_sentence(*no_sqrt), Catch::Contains("the square root left out"));
}

TEST_CASE("fold diagnosis: the bound of a slip holds a rounding and refuses a part per million", "[diagnose]") {
  FoldedConv f = correct();
  const auto a = diagnosis::as_given(f.bn).a;
  for (std::size_t i = 0; i < f.weight.size(); ++i)  // every weight one float32 rounding from w * a
    f.observed_weight[i] = static_cast<float>(f.weight[i] * a[i / kN]);
  CHECK(diagnosis::fold_fits(diagnosis::as_given(f.bn), f));
  f.observed_weight[40] *= 1 + 1e-6;
  CHECK_FALSE(diagnosis::fold_fits(diagnosis::as_given(f.bn), f));
}

TEST_CASE("fold diagnosis: one channel changed by 20 ppm is named with its factor", "[diagnose]") {
  FoldedConv f = correct();
  std::vector<double> ratio(f.weight.size(), 0.25), exact(f.weight.size());
  const auto a = diagnosis::as_given(f.bn).a;
  for (std::size_t i = 0; i < f.weight.size(); ++i) exact[i] = static_cast<double>(f.weight[i] * a[i / kN]);
  for (std::size_t i = 3 * kN; i < 4 * kN; ++i) {
    f.observed_weight[i] = static_cast<float>(f.observed_weight[i] * (1 + 20e-6));
    ratio[i] = 40;
  }
  const diagnosis::WeightDiagnosis d = diagnosis::diagnose_weights(f, ratio, exact);
  CHECK_FALSE(d.slip);
  CHECK(d.channels_beyond == std::vector<std::int64_t>{3});
  CHECK(d.worst / kN == 3);
  CHECK_THAT(d.cause, Catch::Contains("1 of 8 channels changed") && Catch::Contains("channel 3 +"));
  REQUIRE(d.shown.size() == 1);
  CHECK(std::fabs(d.shown[0].ppm.value_or(0) - 20) < 0.2);  // 20 ppm within float32's rounding of each weight
  ratio[3 * kN + 5] = std::nan("");                         // one beyond every bound: the worst
  CHECK(diagnosis::diagnose_weights(f, ratio, exact).worst == 3 * kN + 5);
}

// The factor's sign is the change's, not the weights': a channel of mixed signs (most negative)
// grown or shrunk by 20 ppm is named +20 or -20 (a per-element relative change over |exact|
// named a grown channel of negative weights -20).
TEST_CASE("fold diagnosis: a channel's factor has the sign of its change whatever its weights' signs", "[diagnose]") {
  for (const double change : {20e-6, -20e-6}) {
    FoldedConv f = correct();
    for (std::size_t i = 3 * kN; i < 4 * kN; ++i)
      if ((i % 3 != 0) != (f.weight[i] < 0)) {  // two in three negative: negating w negates its fold exactly
        f.weight[i] = -f.weight[i];
        f.observed_weight[i] = -f.observed_weight[i];
      }
    std::vector<double> ratio(f.weight.size(), 0.25), exact(f.weight.size());
    const auto a = diagnosis::as_given(f.bn).a;
    for (std::size_t i = 0; i < f.weight.size(); ++i) exact[i] = static_cast<double>(f.weight[i] * a[i / kN]);
    for (std::size_t i = 3 * kN; i < 4 * kN; ++i) {
      f.observed_weight[i] = static_cast<float>(f.observed_weight[i] * (1 + change));
      ratio[i] = 40;
    }
    const diagnosis::WeightDiagnosis d = diagnosis::diagnose_weights(f, ratio, exact);
    REQUIRE(d.shown.size() == 1);
    CHECK(std::fabs(d.shown[0].ppm.value_or(0) - change * 1e6) < 0.2);
    CHECK_THAT(d.cause, Catch::Contains(change > 0 ? "channel 3 +" : "channel 3 -"));
  }
}

TEST_CASE("fold diagnosis: a wrong bias is missing, off everywhere, or off in some channels", "[diagnose]") {
  const FoldedConv good = correct();
  const auto missing = diagnosis::diagnose_bias(folded(
      layer(), [](float v) { return std::sqrt(v + 1e-3f); }, false));
  CHECK(missing.missing);
  CHECK_THAT(missing.cause, Catch::Contains("the folded bias is missing"));
  FoldedConv one = good;
  one.observed_bias[2] += 1e-3;
  const auto some = diagnosis::diagnose_bias(one);
  CHECK(some.off == std::vector<std::int64_t>{2});
  CHECK_THAT(some.cause, Catch::Contains("off in 1 of 8 channels (2)"));
  FoldedConv all = good;
  for (double& b : all.observed_bias) b += 0.5;
  CHECK_THAT(diagnosis::diagnose_bias(all).cause, Catch::Contains("off in every channel"));
}
