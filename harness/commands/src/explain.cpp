#include "foldcheck/commands/explain.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/reports/explain_reasoning.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

struct KnownEps {
  double eps;
  const char* who;
};
// BatchNorm eps defaults: PyTorch's nn.BatchNorm2d, ONNX BatchNormalization and TVM's batch_norm
// (1e-5), Keras' BatchNormalization (1e-3); Keras applications' ResNets (1.001e-5).
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
    s.summary = "no element has a non-zero original weight and a finite observed value: the scale cannot be inferred";
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

namespace {

std::int64_t checked_per_channel(const ExplainInput& in) {
  const std::size_t n = in.original.size();
  if (n == 0) throw InputError(field("original") + ": no values");
  if (in.observed.size() != n)
    throw InputError(field("observed") + " has " + std::to_string(in.observed.size()) + " values but " + field("original") + " has " +
                     std::to_string(n));
  const std::size_t C = in.bn.gamma.size();
  if (C == 0 || n % C) throw InputError("BatchNorm has " + std::to_string(C) + " channels, which does not divide " +
                                        std::to_string(n) + " weights");
  return static_cast<std::int64_t>(n / C);
}

// Elements of each channel whose replay differs from the observation (same value and sign).
std::vector<std::int64_t> channel_mismatches(const std::vector<double>& replay, const std::vector<double>& observed,
                                             std::int64_t per_channel) {
  std::vector<std::int64_t> m(observed.size() / static_cast<std::size_t>(per_channel), 0);
  for (std::size_t i = 0; i < observed.size(); ++i)
    if (!(replay[i] == observed[i] && std::signbit(replay[i]) == std::signbit(observed[i]))) ++m[i / per_channel];
  return m;
}

// Whether v is the infinity the exact fold rounds to in the dtype: the exact fold is past the
// range, and v is its correct rounding (agreement, not an error of any size).
bool overflow_agrees(double v, const ref::Value& exact, DType t) {
  return std::isinf(v) && exact.rounded_to(*info(t).format) == v;
}

// The worst element: the first NaN observed (farther than any number: no rounding gives it),
// else the largest |residual| (the last of equals) among the elements that do not agree as an
// overflow; one of those only when every element does.
std::size_t worst_element(const std::vector<double>& observed, const std::vector<double>& residual,
                          const std::vector<bool>& agrees) {
  std::optional<std::size_t> worst;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    if (std::isnan(observed[i])) return i;
    if (!agrees[i] && (!worst || std::fabs(residual[i]) >= std::fabs(residual[*worst]))) worst = i;
  }
  return worst.value_or(0);
}

// One recipe replayed bit for bit in arithmetic ar, with its per-element bound. A PyTorch
// fold in a 16-bit arithmetic is replayed with both of torch.rsqrt's kernels (arithmetic.hpp,
// rsqrt_rounds_twice), each channel matched by either; the bound covers both.
RecipeScore score_recipe(const ExplainInput& in, const std::vector<ref::Value>& exact, const std::vector<bool>& agrees,
                         std::int64_t per_channel, Recipe r, const Arithmetic& ar) {
  const std::size_t n = in.original.size();
  const FoldedParams fp = fold_parameters(in.original, per_channel, {}, in.bn, in.dtype, r, in.ref_options, ar);
  RecipeScore sc;
  sc.recipe = r;
  sc.fold_dtype = ar.fold_dtype;
  std::vector<std::int64_t> mism = channel_mismatches(fp.weight, in.observed, per_channel);
  if (ar.fold_dtype && r == Recipe::PyTorch) {
    Arithmetic twice = ar;
    twice.rsqrt_rounds_twice = true;
    const FoldedParams alt = fold_parameters(in.original, per_channel, {}, in.bn, in.dtype, r, in.ref_options, twice);
    const std::vector<std::int64_t> m2 = channel_mismatches(alt.weight, in.observed, per_channel);
    for (std::size_t o = 0; o < mism.size(); ++o) mism[o] = std::min(mism[o], m2[o]);
  }
  for (const std::int64_t m : mism) sc.mismatches += m;
  sc.bound.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isinf(fp.weight[i])) sc.infinite.push_back(i);
    sc.bound[i] = fp.info.weight_bound(i / per_channel, in.original[i]);
    sc.bound_ulp_max = std::max(sc.bound_ulp_max, sc.bound[i] / ulp(in.dtype, exact[i].approx.hi, exact[i].approx.lo));
    // A NaN observation is within no bound (std::max would drop its NaN ratio and call the recipe
    // explaining): its ratio is infinite. The infinity that is the correct rounding of an
    // exact fold past the range agrees (compare.hpp's overflow_match): no distance to bound.
    if (agrees[i]) continue;
    const double ratio = bound_ratio(distance(in.observed[i], exact[i].approx), sc.bound[i]);
    sc.worst_ratio = std::max(sc.worst_ratio, std::isnan(in.observed[i]) ? HUGE_VAL : ratio);
  }
  return sc;
}

// Every recipe replayed, each in every arithmetic an observed fold may have used.
std::vector<RecipeScore> score_recipes(const ExplainInput& in, const std::vector<ref::Value>& exact,
                                       const std::vector<bool>& agrees, std::int64_t per_channel) {
  std::vector<RecipeScore> scores;
  std::optional<std::string> unbounded;  // the first recipe left out as UnboundedFold
  for (const std::optional<DType> fa : observed_fold_arithmetics(in.dtype))
    for (Recipe r : all_recipes()) {
      if (fa && r == Recipe::Exact) continue;  // the exact fold has no arithmetic
      Arithmetic ar;
      ar.fold_dtype = fa;
      try {
        scores.push_back(score_recipe(in, exact, agrees, per_channel, r, ar));
      } catch (const UnboundedFold& e) {  // no bound in that arithmetic: not this recipe's fold
        if (!unbounded) unbounded = e.what();
      }
    }
  if (scores.empty() && unbounded) throw UnboundedFold(*unbounded);
  return scores;
}

// The cited recipe: the first that reproduces the observation bit for bit (the model's own
// arithmetic comes first), else closest_fit's.
std::size_t cited_recipe(const std::vector<RecipeScore>& s) {
  auto c = std::find_if(s.begin(), s.end(), [](const RecipeScore& r) { return r.bit_exact(); });
  if (c != s.end()) return static_cast<std::size_t>(c - s.begin());
  std::vector<FitCandidate> fit;
  for (const RecipeScore& r : s) fit.push_back({r.worst_ratio, r.fold_dtype.has_value()});
  return closest_fit(fit);
}

ExplainElement element(const ExplainInput& in, const ExplainResult& r, const std::vector<ref::Value>& exact,
                       const std::vector<double>& residual, std::size_t i, std::int64_t per_channel) {
  ExplainElement e;
  e.index = i;
  e.channel = i / static_cast<std::size_t>(per_channel);
  e.original = in.original[i];
  e.observed = in.observed[i];
  if (e.original != 0) e.drift_ppm = 1e6 * ((static_cast<long double>(e.observed) - e.original) / std::fabs(e.original));
  e.exact = exact[i];
  e.correctly_rounded = exact[i].rounded_to(*info(in.dtype).format);
  e.residual_ulp = residual[i];
  e.bound_ulp = r.recipes[r.cited].bound[i] / ulp(in.dtype, exact[i].approx.hi, exact[i].approx.lo);
  return e;
}

}  // namespace

ExplainResult explain(const ExplainInput& in) {
  const std::int64_t per_channel = checked_per_channel(in);
  const std::size_t n = in.original.size();
  // ~205 bytes per element measured (2^22 float32 weights: 862 MB peak): the exact folds,
  // five recipes' folds and bounds, the comparison's sorted errors.
  check_fits_in_memory(n, 256, "explain");
  ExplainResult r;
  r.dtype = in.dtype;
  r.bn = in.bn;
  r.bn_source = in.bn_source;
  r.bn_given = in.bn_given;
  r.precision_bits = in.ref_options.precision;
  r.elements_total = n;
  std::vector<ref::Value> exact(n);
  {
    // The batched certified fold (bit-identical to ref::fold_weight per element, and
    // thousands of times faster), certified in the dtype's format.
    ref::Options ro = in.ref_options;
    ro.formats = ref::format_bit(*info(in.dtype).format);
    const ref::ValueArray folded = ref::fold_weights(in.original, per_channel, in.bn, ro);
    for (std::size_t i = 0; i < n; ++i) exact[i] = folded[i];
  }
  std::vector<bool> agrees(n);  // once: every recipe's score and the worst element skip these
  for (std::size_t i = 0; i < n; ++i) {
    agrees[i] = overflow_agrees(in.observed[i], exact[i], in.dtype);
    r.overflow_matches += agrees[i] ? 1 : 0;
  }
  r.recipes = score_recipes(in, exact, agrees, per_channel);
  r.cited = cited_recipe(r.recipes);
  const std::vector<double>& bound = r.recipes[r.cited].bound;
  r.summary = compare(in.observed, exact, in.dtype, &bound);
  std::vector<double> residual(n);
  for (std::size_t i = 0; i < n; ++i) residual[i] = ulp_error(in.observed[i], exact[i].approx, in.dtype);
  r.worst_index = worst_element(in.observed, residual, agrees);
  r.worst_residual_ulp = residual[r.worst_index];
  r.worst_bound_ulp = bound[r.worst_index] / ulp(in.dtype, exact[r.worst_index].approx.hi, exact[r.worst_index].approx.lo);
  r.worst_observed = in.observed[r.worst_index];
  r.worst_exact = exact[r.worst_index].approx.hi + exact[r.worst_index].approx.lo;
  r.worst_exact_overflows = std::isinf(exact[r.worst_index].rounded_to(*info(in.dtype).format));
  r.bound_ulp.resize(n);
  r.exact_fold.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.bound_ulp[i] = bound[i] / ulp(in.dtype, exact[i].approx.hi, exact[i].approx.lo);
    r.exact_fold[i] = exact[i].approx.hi + exact[i].approx.lo;
  }
  for (const std::size_t i : listed_elements(residual, bound, exact, in.dtype))
    r.elements.push_back(element(in, r, exact, residual, i, per_channel));
  if (!in.bn_given) r.scale = infer_scale(in.original, in.observed, in.dtype);
  r.residual_ulp = std::move(residual);
  return r;
}

bool ExplainResult::explained() const {
  const bool some = std::any_of(recipes.begin(), recipes.end(), [](const RecipeScore& s) { return s.explains(); });
  return some && summary.kinds.nan == 0 && summary.kinds.inf_mismatch == 0;
}

// Nothing compared is never a pass: when no exact folded value rounds to a finite non-zero
// value (all zero, underflowing or overflowing), any scale would have matched (compare()
// marks it MISTRUSTED).
bool ExplainResult::vacuous() const { return explained() && summary.verdict == Verdict::Mistrusted; }

// Unexplained is UNEXPECTED; explained but vacuous, MISTRUSTED (judgement::of_check).
Verdict ExplainResult::verdict() const {
  return judgement::of_check({.failed = !explained(), .informative = summary.verdict != Verdict::Mistrusted});
}

namespace {

json element_json(const ExplainElement& e) {
  return {{"index", e.index},
          {"channel", e.channel},
          {"original", e.original},
          {"observed", e.observed},
          {"drift_ppm", e.drift_ppm ? json(*e.drift_ppm) : json(nullptr)},
          {"exact_folded", e.exact.approx.hi + e.exact.approx.lo},
          {"exact_folded_digits", fmt::format("{:.20e}", static_cast<long double>(e.exact.approx.hi) + e.exact.approx.lo)},
          {"correctly_rounded", e.correctly_rounded},
          {"residual_ulp", e.residual_ulp},
          {"bound_ulp", e.bound_ulp}};
}

json recipe_json(const RecipeScore& s) {
  return {{"name", s.label()},
          {"fold_arithmetic", s.fold_dtype ? json(name(*s.fold_dtype)) : json(nullptr)},
          {"chain", describe(s.recipe)},     {"bit_exact", s.bit_exact()},
          {"mismatches", s.mismatches},     {"bound_ulp_max", s.bound_ulp_max}, {"worst_ratio_to_bound", s.worst_ratio},
          {"explains", s.explains()}};
}

json scale_json(const ScaleInference& si) {
  return {{"consistent", si.consistent}, {"estimate", si.estimate}, {"range", {si.lo, si.hi}},
          {"eps_range_if_fresh", {si.eps_lo, si.eps_hi}}, {"matches", si.matches}, {"summary", si.summary}};
}

reports::ExplainFacts facts(const ExplainResult& r) {
  reports::ExplainFacts f;
  f.explained = r.explained();
  f.vacuous = r.vacuous();
  f.worst_index = r.worst_index;
  f.worst_residual_ulp = r.worst_residual_ulp;
  f.worst_bound_ulp = r.worst_bound_ulp;
  const RecipeScore& c = r.recipes[r.cited];
  f.recipe = c.label();
  f.chain = describe(c.recipe);
  f.arithmetic_precision = info(c.fold_dtype.value_or(info(r.dtype).arithmetic)).precision;
  for (const RecipeScore& s : r.recipes)
    if (s.bit_exact()) f.bit_exact.push_back(s.label());
  f.bn_source = r.bn_source;
  if (std::isinf(r.worst_observed)) {
    f.overflow =
        reports::ExplainFacts::Overflow{r.worst_exact,    info(r.dtype).max_finite,
                                        r.worst_observed, r.worst_exact_overflows,
                                        name(r.dtype),    name(c.fold_dtype.value_or(info(r.dtype).arithmetic))};
    for (const RecipeScore& s : r.recipes)  // the recipes whose chain overflows there
      if (std::ranges::find(s.infinite, r.worst_index) != s.infinite.end())
        f.overflow->replayed_by.push_back(s.label());
  }
  if (r.overflow_matches > 0)
    f.past_range = reports::ExplainFacts::PastRange{r.overflow_matches, info(r.dtype).max_finite, name(r.dtype)};
  if (r.scale && r.scale->consistent)
    f.scale_fit = r.scale->summary + (r.scale->matches.empty() ? std::string(".") : " — " + r.scale->matches.front() + ".");
  return f;
}

}  // namespace

json ExplainResult::to_json() const {
  json bit_exact = json::array(), explained_by = json::array(), recipe_list = json::array(), listed = json::array();
  for (const RecipeScore& s : recipes) {
    if (s.bit_exact()) bit_exact.push_back(s.label());
    if (s.explains()) explained_by.push_back(s.label());
    recipe_list.push_back(recipe_json(s));
  }
  for (const ExplainElement& e : elements) listed.push_back(element_json(e));
  const std::size_t C = bn.gamma.size();
  json bnj{{"source", bn_source}, {"eps", bn.eps}, {"channels", C}};
  if (C <= 16) bnj.update({{"gamma", bn.gamma}, {"beta", bn.beta}, {"mean", bn.mean}, {"var", bn.var}});
  json out = result_envelope("explain");
  out.update(json{{"dtype", info(dtype).name},
                  {"bn", bnj},
                  {"verdict", name(verdict())},
                  {"reasoning", reports::explain_reasoning(facts(*this))},
                  {"bound",
                   {{"kind", "deterministic"},
                    {"recipe", recipes[cited].label()},
                    {"formula", "|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta, running-error analysis of the recipe's chain"},
                    {"worst_ratio", recipes[cited].worst_ratio}}},
                  {"bit_exact_recipes", bit_exact},
                  {"explained_by", explained_by},
                  {"recipes", recipe_list},
                  {"elements", listed},
                  {"elements_total", elements_total},
                  {"summary", foldcheck::to_json(summary)},
                  {"reference", {{"precision_bits", precision_bits}, {"certified", true}}}});
  if (scale) out["scale_inference"] = scale_json(*scale);
  return out;
}

}  // namespace foldcheck
