#include "foldcheck/commands/explain.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/base/envelope.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

struct KnownEps {
  double eps;
  const char* who;
};
// Framework BatchNorm defaults (../shared/NUMERICS.md), and Keras applications' ResNets.
const KnownEps kKnownEps[] = {
    {1e-5, "PyTorch, ONNX, TVM default"},
    {1e-3, "Keras / TensorFlow default"},
    {1.001e-5, "Keras applications ResNet"},
    {1e-4, "common override"},
    {1e-6, "common override"},
    {2e-5, "MXNet Gluon-CV models"},
    {1e-12, "common override"},
};

// Which elements the result lists one by one: all of them up to kListAll; beyond that (a
// whole large tensor), the kListWorst farthest from the exact fold relative to their bound,
// in index order. A listed element costs ~1 KB of JSON, so listing 2^28 of them would need
// hundreds of GB; the summary, histograms and verdict always cover every element.
constexpr std::size_t kListAll = 65536, kListWorst = 4096;

std::vector<std::size_t> listed_elements(const std::vector<double>& residual, const std::vector<double>& bound,
                                         const std::vector<ref::Value>& exact, DType t) {
  const std::size_t n = residual.size();
  std::vector<std::size_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = i;
  if (n <= kListAll) return idx;
  auto ratio = [&](std::size_t i) {
    const double b = bound[i] / ulp(t, exact[i].approx.hi, exact[i].approx.lo);
    const double r = std::fabs(residual[i]);
    return std::isnan(r) ? HUGE_VAL : b > 0 ? r / b : r;
  };
  std::nth_element(idx.begin(), idx.begin() + kListWorst, idx.end(), [&](std::size_t a, std::size_t b) {
    const double ra = ratio(a), rb = ratio(b);
    return ra != rb ? ra > rb : a < b;
  });
  idx.resize(kListWorst);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace

ScaleInference infer_scale(const std::vector<double>& original, const std::vector<double>& observed, DType t) {
  ScaleInference s;
  long double lo = -HUGE_VALL, hi = HUGE_VALL;
  bool any = false;
  for (std::size_t i = 0; i < original.size(); ++i) {
    const double w = original[i], y = observed[i];
    if (w == 0.0 || !std::isfinite(y)) continue;
    // RN_T(w s) = y  <=>  |w s| in [|y| - below/2, |y| + above/2], with the spacings of T
    // below and above |y| (they differ when |y| is a power of two).
    const double ay = std::fabs(y);
    const double above = ulp(t, ay), below = ulp(t, ay, -0x1p-1074);
    long double a = (static_cast<long double>(ay) - below / 2) / std::fabs(w);
    long double b = (static_cast<long double>(ay) + above / 2) / std::fabs(w);
    if ((w < 0) != (y < 0) && y != 0.0) {  // negative scale
      const long double na = -b, nb = -a;
      a = na;
      b = nb;
    }
    lo = std::max(lo, a);
    hi = std::min(hi, b);
    any = true;
  }
  if (!any) {
    s.summary = "no non-zero original weight: the scale cannot be inferred";
    return s;
  }
  s.consistent = lo <= hi;
  if (!s.consistent) {
    s.summary = "no single scale explains every element (per-channel parameters, or not a BatchNorm fold)";
    return s;
  }
  s.lo = static_cast<double>(lo);
  s.hi = static_cast<double>(hi);
  s.estimate = static_cast<double>((lo + hi) / 2);
  if (s.lo > 0) {
    s.eps_lo = static_cast<double>(1 / (hi * hi) - 1);
    s.eps_hi = static_cast<double>(1 / (lo * lo) - 1);
  }
  // A candidate matches if the scale some recipe would compute for it, as the engine's
  // float, lies in [lo, hi] (the interval is for the scale actually multiplied).
  for (const auto& k : kKnownEps) {
    ref::BnParams bn{{1.0}, {0.0}, {0.0}, {1.0}, k.eps};
    bool hit = false;
    for (Recipe r : all_recipes()) {
      if (r == Recipe::Exact) continue;
      FoldedParams fp = fold_parameters({1.0}, 1, {}, bn, info(t).arithmetic, r, {});
      const double sc = fp.weight[0];  // 1 * s in the arithmetic type: the engine's float scale
      if (sc >= s.lo && sc <= s.hi) hit = true;
    }
    const long double exact = 1.0L / std::sqrt(1.0L + k.eps);
    if (exact >= lo && exact <= hi) hit = true;
    if (hit && s.matches.empty()) s.estimate = static_cast<double>(exact);
    if (hit) s.matches.push_back(fmt::format("1/sqrt(1+{:g}): fresh BatchNorm (gamma=1, var=1) with eps {:g} ({})",
                                             k.eps, k.eps, k.who));
  }
  s.summary = fmt::format("scale {:.8f} (consistent range [{:.10f}, {:.10f}])", s.estimate, s.lo, s.hi);
  if (!s.matches.empty()) {
    const std::string m = s.matches.front();
    s.summary += " = " + m.substr(0, m.find(':'));
  } else if (s.lo > 0) {
    s.summary += fmt::format("; with gamma=1, var=1 this is eps in [{:.4g}, {:.4g}]", s.eps_lo, s.eps_hi);
  }
  return s;
}

json explain(const ExplainInput& in) {
  const std::size_t n = in.original.size();
  if (n == 0) throw InputError("`original`: no values");
  if (in.observed.size() != n)
    throw InputError("`observed` has " + std::to_string(in.observed.size()) + " values but `original` has " +
                     std::to_string(n));
  const std::size_t C = in.bn.gamma.size();
  if (C == 0 || n % C) throw InputError("BatchNorm has " + std::to_string(C) + " channels, which does not divide " +
                                        std::to_string(n) + " weights");
  const std::int64_t per_channel = static_cast<std::int64_t>(n / C);
  // ~205 bytes per element measured (2^22 float32 weights: 862 MB peak): the exact folds,
  // five recipes' folds and bounds, the comparison's sorted errors.
  check_fits_in_memory(n, 256, "explain");
  const DTypeInfo& ti = info(in.dtype);

  // Exact fold per element.
  std::vector<ref::Value> exact(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t o = i / per_channel;
    exact[i] = ref::fold_weight(in.original[i], in.bn.gamma[o], in.bn.var[o], in.bn.eps, in.ref_options);
  }

  // Every recipe: bit-exact replay and per-element bound.
  json recipes = json::array(), bit_exact = json::array(), explained_by = json::array();
  struct Scored {
    std::string name;
    std::vector<double> bound;
    double worst_ratio;
    bool bit_exact;
  };
  std::vector<Scored> scored;
  for (Recipe r : all_recipes()) {
    const FoldedParams fp = fold_parameters(in.original, per_channel, {}, in.bn, in.dtype, r, in.ref_options);
    std::int64_t mismatches = 0;
    std::vector<double> bound(n);
    double max_bound_ulp = 0, worst_ratio = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!(fp.weight[i] == in.observed[i] && std::signbit(fp.weight[i]) == std::signbit(in.observed[i]))) ++mismatches;
      bound[i] = fp.info.weight_bound(i / per_channel, in.original[i]);
      max_bound_ulp = std::max(max_bound_ulp, bound[i] / ulp(in.dtype, exact[i].approx.hi, exact[i].approx.lo));
      worst_ratio = std::max(worst_ratio, bound_ratio(distance(in.observed[i], exact[i].approx), bound[i]));
    }
    const bool explains = worst_ratio <= 1.0;
    if (mismatches == 0) bit_exact.push_back(name(r));
    if (explains) explained_by.push_back(name(r));
    recipes.push_back({{"name", name(r)},
                       {"chain", describe(r)},
                       {"bit_exact", mismatches == 0},
                       {"mismatches", mismatches},
                       {"bound_ulp_max", max_bound_ulp},
                       {"worst_ratio_to_bound", worst_ratio},
                       {"explains", explains}});
    scored.push_back({name(r), std::move(bound), worst_ratio, mismatches == 0});
  }
  // The cited recipe: the first that reproduces the observation bit for bit, else the one
  // whose bound fits best (smallest worst ratio).
  auto cited = std::find_if(scored.begin(), scored.end(), [](const Scored& s) { return s.bit_exact; });
  if (cited == scored.end())
    cited = std::min_element(scored.begin(), scored.end(),
                             [](const Scored& a, const Scored& b) { return a.worst_ratio < b.worst_ratio; });
  const std::string best_recipe = cited->name;
  const double best_recipe_worst = cited->worst_ratio;
  const std::vector<double>& best_bound = cited->bound;

  const Comparison cmp = compare(in.observed, exact, in.dtype, &best_bound);
  json elements = json::array();
  double worst_res = 0;
  std::size_t worst_i = 0;
  std::vector<double> residual(n);
  for (std::size_t i = 0; i < n; ++i) {
    residual[i] = ulp_error(in.observed[i], exact[i].approx, in.dtype);
    if (std::fabs(residual[i]) >= std::fabs(worst_res)) {
      worst_res = residual[i];
      worst_i = i;
    }
  }
  for (const std::size_t i : listed_elements(residual, best_bound, exact, in.dtype)) {
    const double res = residual[i];
    const double xo = in.original[i];
    json e{{"index", i},
           {"channel", i / per_channel},
           {"original", xo},
           {"observed", in.observed[i]},
           {"drift_ppm", xo != 0 ? json(1e6 * ((static_cast<long double>(in.observed[i]) - xo) / std::fabs(xo)))
                                 : json(nullptr)},
           {"exact_folded", exact[i].approx.hi + exact[i].approx.lo},
           {"exact_folded_digits", fmt::format("{:.20e}", static_cast<long double>(exact[i].approx.hi) + exact[i].approx.lo)},
           {"correctly_rounded", exact[i].rounded_to(*ti.format)},
           {"residual_ulp", res},
           {"bound_ulp", best_bound[i] / ulp(in.dtype, exact[i].approx.hi, exact[i].approx.lo)}};
    elements.push_back(e);
  }
  const bool expected = !explained_by.empty() && cmp.kinds.nan == 0 && cmp.kinds.inf_mismatch == 0;
  // Nothing compared is never a pass: when no exact folded value rounds to a finite non-zero
  // value (all zero, underflowing or overflowing), any scale would have matched (compare()
  // marks it MISTRUSTED).
  const bool vacuous = expected && cmp.verdict == Verdict::Mistrusted;
  const Verdict verdict = vacuous ? Verdict::Mistrusted : expected ? Verdict::Expected : Verdict::Unexpected;

  json reasoning = json::array();
  if (vacuous)
    reasoning.push_back("Every exact folded value is zero, or rounds to zero or to an infinity in this dtype: the "
                        "observation matches, but so would a wrong scale, so it tells nothing about the fold "
                        "(MISTRUSTED).");
  const double worst_bound_ulp = best_bound[worst_i] / ulp(in.dtype, exact[worst_i].approx.hi, exact[worst_i].approx.lo);
  if (expected) {
    reasoning.push_back(fmt::format(
        "Every observed value is within {:.3g} ULP of the exact fold w*gamma/sqrt(var+eps); the {} chain ({}) bounds "
        "the error at element {} by {:.3g} ULP (|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta, a-priori, u = 2^-{}).",
        std::fabs(worst_res), best_recipe, describe(recipe_from_name(best_recipe)), worst_i, worst_bound_ulp,
        info(ti.arithmetic).precision));
    if (!bit_exact.empty())
      reasoning.push_back("Replaying the recipes reproduces the observed values bit for bit with: " +
                          [&] {
                            std::string s;
                            for (const auto& r : bit_exact) s += (s.empty() ? "" : ", ") + r.get<std::string>();
                            return s;
                          }() + ".");
  } else {
    reasoning.push_back(fmt::format(
        "Element {} is {:.4g} ULP from the exact fold, beyond every recipe's rounding bound (the closest, {}, allows "
        "{:.3g} ULP there: |w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta).",
        worst_i, worst_res, best_recipe, worst_bound_ulp));
    reasoning.push_back(fmt::format("The observed drift is not the rounding of folding this BatchNorm ({}); check "
                                    "its parameters (eps, var, gamma) or look for a second transformation.",
                                    in.bn_source));
  }

  json bn{{"source", in.bn_source}, {"eps", in.bn.eps}, {"channels", C}};
  if (C <= 16) bn.update({{"gamma", in.bn.gamma}, {"beta", in.bn.beta}, {"mean", in.bn.mean}, {"var", in.bn.var}});

  json out = result_envelope("explain");
  out.update(json{{"dtype", ti.name},
           {"bn", bn},
           {"verdict", name(verdict)},
           {"reasoning", reasoning},
           {"bound",
            {{"kind", "deterministic"},
             {"recipe", best_recipe},
             {"formula", "|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta, running-error analysis of the recipe's chain"},
             {"worst_ratio", best_recipe_worst}}},
           {"bit_exact_recipes", bit_exact},
           {"explained_by", explained_by},
           {"recipes", recipes},
           {"elements", elements},
           {"elements_total", n},
           {"summary", to_json(cmp)},
           {"reference", {{"precision_bits", in.ref_options.precision}, {"certified", true}}}});
  if (!in.bn_given) {
    const ScaleInference si = infer_scale(in.original, in.observed, in.dtype);
    if (!expected && si.consistent)
      out["reasoning"].push_back("The observations fit one common fold scale: " + si.summary +
                                 (si.matches.empty() ? std::string(".") : " — " + si.matches.front() + "."));
    out["scale_inference"] = {{"consistent", si.consistent}, {"estimate", si.estimate}, {"range", {si.lo, si.hi}},
                              {"eps_range_if_fresh", {si.eps_lo, si.eps_hi}}, {"matches", si.matches},
                              {"summary", si.summary}};
  }
  return out;
}

}  // namespace foldcheck
