// Folded parameters against the exact fold (fold_check.hpp).
#include "foldcheck/model/fold_check.hpp"

#include <algorithm>
#include <cmath>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/layer/fold_pass.hpp"

namespace foldcheck {
namespace {

// distance / bound, with the convention of compare(): 0/0 = 0, x/0 = inf. A NaN (or an
// infinity the exact value is not) is beyond every bound; an infinity the exact value also
// is (an overflowing fold stored as itself) is within it.
double ratio(double v, const ref::Value& x, double bound) {
  if (std::isinf(v) && v == x.approx.hi) return 0;
  const double q = bound_ratio(distance(v, x.approx), bound);
  return std::isnan(q) ? HUGE_VAL : q;
}

// The exact fold: every folded weight and bias as a certified value.
struct ExactFold {
  ref::ValueArray weight;
  std::vector<ref::Value> bias;
};

// Per recipe: the values checked (observed, or the recipe's own fold), their bounds, and
// whether the recipe makes a single bias (no post-add); the comparison with the exact fold
// is made for the recipe shown only.
struct Pending {
  std::vector<double> w, b, wb, bb;
  bool single_bias = true;
};

// The worst ratio of the checked values of one recipe (rc) and what they were (pd); false
// when an observed fold cannot be this recipe's (one bias, but the recipe adds after).
bool check_recipe(const LayerParams& L, const std::optional<ObservedFold>& obs, Recipe r, const Arithmetic& ar,
                  const ref::Options& ro, const ExactFold& exact, RecipeFoldCheck& rc, Pending& pd) {
  FoldedParams fp = fold_parameters(L.weight, L.per_channel, L.bias, L.bn, L.dtype, r, ro, ar);
  const FoldInfo& fi = fp.info;
  pd.single_bias = !fi.has_post_add;
  if (obs && !pd.single_bias) return false;  // a single observed bias cannot be this recipe's output
  pd.w = obs ? obs->weight : std::move(fp.weight);
  pd.b = obs ? obs->bias : std::move(fp.bias);
  if (pd.b.empty()) pd.b.assign(static_cast<std::size_t>(L.channels), 0.0);
  rc.recipe = r;
  rc.fold_dtype = ar.fold_dtype;
  pd.wb.resize(pd.w.size());
  for (std::size_t k = 0; k < pd.w.size(); ++k) {
    const std::size_t o = k / static_cast<std::size_t>(L.per_channel);
    pd.wb[k] = fi.weight_bound(o, L.weight[k]);
    const double q = ratio(pd.w[k], exact.weight[k], pd.wb[k]);
    if (q > rc.worst_ratio) {
      rc.worst_ratio = q;
      rc.worst_channel = static_cast<std::int64_t>(o);
      rc.worst_in_bias = false;
    }
  }
  if (pd.single_bias) {
    pd.bb.resize(pd.b.size());
    for (std::size_t o = 0; o < pd.b.size(); ++o) {
      pd.bb[o] = fi.bias[o].e;
      const double q = ratio(pd.b[o], exact.bias[o], pd.bb[o]);
      if (q > rc.worst_ratio) {
        rc.worst_ratio = q;
        rc.worst_channel = static_cast<std::int64_t>(o);
        rc.worst_in_bias = true;
      }
    }
  }
  rc.verdict = judgement::of_check({.failed = !(rc.worst_ratio <= 1)});
  return true;
}

// The overall verdict: observed -> the closest recipe's; otherwise the worst of them.
// Every exact folded weight and bias zero: any scale and shift would match too, so
// agreeing with them is no evidence (nothing compared is never a pass, as in compare()).
Verdict overall_verdict(const FoldCheck& out, bool observed, const ExactFold& exact) {
  Verdict v = out.verdict;
  if (observed) v = out.recipes.empty() ? Verdict::Unexpected : out.recipes[out.best].verdict;
  else
    for (const RecipeFoldCheck& rc : out.recipes) v = worst(v, rc.verdict);
  bool all_zero = std::all_of(exact.bias.begin(), exact.bias.end(), [](const ref::Value& x) { return x.approx.hi == 0; });
  for (std::size_t k = 0; all_zero && k < exact.weight.size(); ++k) all_zero = exact.weight.approx(k).hi == 0;
  return judgement::unless_uninformative(v, !all_zero);
}

}  // namespace

FoldCheck check_fold(const LayerParams& L, const std::optional<ObservedFold>& obs, const ref::Options& opts) {
  ref::Options ro = opts;
  ro.formats = ref::format_bit(*info(L.dtype).format);
  ExactFold exact{ref::fold_weights(L.weight, L.per_channel, L.bn, ro), std::vector<ref::Value>(static_cast<std::size_t>(L.channels))};
  for (std::size_t o = 0; o < exact.bias.size(); ++o)
    exact.bias[o] = ref::fold_bias(L.bias.empty() ? 0.0 : L.bias[o], L.bn.gamma[o], L.bn.beta[o], L.bn.mean[o], L.bn.var[o],
                                   L.bn.eps, ro);
  FoldCheck out;
  out.observed = obs.has_value();
  std::vector<Pending> pending;
  // An observed fold may have been computed in a 16-bit model's own type; a recipe's own
  // fold is scored in the arithmetic foldcheck's float path uses.
  const std::vector<std::optional<DType>> arithmetics =
      obs ? observed_fold_arithmetics(L.dtype) : std::vector<std::optional<DType>>{std::nullopt};
  std::optional<std::string> unbounded;  // the first recipe left out as UnboundedFold
  for (const std::optional<DType> fa : arithmetics)
    for (const Recipe r : all_recipes()) {
      if (r == Recipe::Exact) continue;
      Arithmetic ar;
      ar.fold_dtype = fa;
      RecipeFoldCheck rc;
      Pending pd;
      try {
        if (!check_recipe(L, obs, r, ar, ro, exact, rc, pd)) continue;
      } catch (const UnboundedFold& e) {  // no bound in that arithmetic: not this recipe's fold
        if (!unbounded) unbounded = e.what();
        continue;
      }
      out.recipes.push_back(std::move(rc));
      pending.push_back(std::move(pd));
    }
  if (out.recipes.empty() && unbounded) throw UnboundedFold(*unbounded);
  std::vector<FitCandidate> fit;
  for (const RecipeFoldCheck& rc : out.recipes) fit.push_back({rc.worst_ratio, rc.fold_dtype.has_value()});
  out.best = closest_fit(fit);
  // The recipe shown: observed -> the closest; otherwise the one with the largest ratio
  // (every recipe's ratio and worst channel are kept; the full comparison is for it).
  std::size_t shown = out.best;
  if (!obs)
    for (std::size_t i = 0; i < out.recipes.size(); ++i)
      if (out.recipes[i].worst_ratio > out.recipes[shown].worst_ratio) shown = i;
  out.shown = shown;
  for (std::size_t i = 0; i < out.recipes.size(); ++i) {
    if (i != shown) continue;
    const Pending& pd = pending[i];
    out.recipes[i].weights = compare(pd.w, exact.weight, L.dtype, &pd.wb);
    if (pd.single_bias) out.recipes[i].bias = compare(pd.b, exact.bias, L.dtype, &pd.bb);
  }
  out.verdict = overall_verdict(out, obs.has_value(), exact);
  return out;
}

nlohmann::json to_json(const FoldCheck& f) {
  nlohmann::json recipes = nlohmann::json::array();
  for (const RecipeFoldCheck& rc : f.recipes) {
    nlohmann::json j{{"recipe", rc.label()},
                     {"fold_arithmetic", rc.fold_dtype ? nlohmann::json(name(*rc.fold_dtype)) : nlohmann::json(nullptr)},
                     {"verdict", name(rc.verdict)},
                     {"worst_ratio", std::isinf(rc.worst_ratio) ? nlohmann::json(nullptr) : nlohmann::json(rc.worst_ratio)},
                     {"worst_channel", rc.worst_channel},
                     {"worst_in", rc.worst_in_bias ? "bias" : "weights"},
                     {"weights", rc.weights.elements ? to_json(rc.weights) : nlohmann::json(nullptr)},
                     {"bias", rc.bias ? to_json(*rc.bias) : nlohmann::json(nullptr)}};
    recipes.push_back(std::move(j));
  }
  nlohmann::json j{{"verdict", name(f.verdict)},
                   {"source", f.observed ? "observed folded model" : "each recipe's own fold"},
                   {"bound", "|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta and the bias chain's running-error bound "
                             "of the recipe (fold_pass.hpp)"},
                   {"recipes", recipes}};
  if (!f.recipes.empty()) j["shown_recipe"] = f.recipes[f.shown].label();
  if (f.observed && !f.recipes.empty()) {
    const RecipeFoldCheck& b = f.recipes[f.best];
    j["closest_recipe"] = b.label();
    j["worst_channel"] = b.verdict == Verdict::Expected ? nlohmann::json(nullptr) : nlohmann::json(b.worst_channel);
    j["worst_ratio"] = std::isinf(b.worst_ratio) ? nlohmann::json(nullptr) : nlohmann::json(b.worst_ratio);
  }
  return j;
}

}  // namespace foldcheck
