// The English of an `explain` result (explain_reasoning.hpp).
#include "foldcheck/reports/explain_reasoning.hpp"

#include <cmath>
#include <fmt/format.h>

namespace foldcheck::reports {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// An infinite folded weight: the exact fold overflows the dtype (every correct fold is
// infinite), or an intermediate of the engine's fold overflowed (the exact fold is finite).
void overflow_reasoning(const ExplainFacts& f, std::vector<std::string>& r) {
  const ExplainFacts::Overflow& o = *f.overflow;
  const std::string who = f.bit_exact.empty() ? "no recipe reproduces it"
                                              : "reproduced bit for bit by " + joined(f.bit_exact);
  if (std::signbit(o.observed) != std::signbit(o.exact)) {  // no rounding of the fold changes its sign
    r.push_back(
        fmt::format("Element {} is {}inf where the exact fold is {:.6g}: an infinity of the other sign is no "
                    "rounding or overflow of the fold ({}); look for a sign error in what produced it.",
                    f.worst_index, o.observed < 0 ? "-" : "+", o.exact, who));
    return;
  }
  if (o.exact_overflows) {
    r.push_back(fmt::format("Element {} is infinite: its exact fold {:.6g} exceeds {}'s largest finite value {:g}, so "
                            "the correctly rounded fold is itself infinite ({}). The fold is not wrong, but the folded "
                            "model holds an infinite weight: keep this layer unfolded, or fold it into a wider type.",
                            f.worst_index, o.exact, o.dtype, o.max_finite, who));
    return;
  }
  if (o.replayed_by.empty()) {  // no chain overflows there: an infinity no fold gives
    r.push_back(
        fmt::format("Element {} is infinite where the exact fold is {:.6g}, within {}'s range, and no recipe's "
                    "fold overflows there in any arithmetic: no rounding or overflow of the fold gives it ({}); "
                    "look for what wrote that value.",
                    f.worst_index, o.exact, o.dtype, who));
    return;
  }
  r.push_back(
      fmt::format("Element {} is infinite where the exact fold is {:.6g}: an intermediate of the fold (such as "
                  "gamma/sqrt(var+eps)) overflowed: the {} replay{} give{} it ({}). Fold in a wider type (e.g. "
                  "float32) and store the result as {}.",
                  f.worst_index, o.exact, joined(o.replayed_by), o.replayed_by.size() > 1 ? "s" : "",
                  o.replayed_by.size() > 1 ? "" : "s", who, o.dtype));
}

// Infinities that agree with the exact fold: said, since a model holding them is not usable.
void past_range_reasoning(const ExplainFacts::PastRange& p, std::vector<std::string>& r) {
  r.push_back(
      fmt::format("{} element(s) are infinite because their exact fold exceeds {}'s largest finite value {:g}: "
                  "the correctly rounded fold is itself infinite there, so the fold is not wrong, but the "
                  "folded model holds infinite weights: keep this layer unfolded, or fold it into a wider type.",
                  p.count, p.dtype, p.max_finite));
}

}  // namespace

std::vector<std::string> explain_reasoning(const ExplainFacts& f) {
  std::vector<std::string> r;
  if (f.vacuous)
    r.push_back("Every exact folded value is zero, or rounds to zero or to an infinity in this dtype: the "
                "observation matches, but so would a wrong scale, so it tells nothing about the fold "
                "(MISTRUSTED).");
  if (f.explained) {
    if (std::isfinite(f.worst_residual_ulp))  // not when every element is an infinity that agrees
      r.push_back(
          fmt::format("Every {}observed value is within {:.3g} ULP of the exact fold w*gamma/sqrt(var+eps); the {} "
                      "chain ({}) bounds the error at element {} by {:.3g} ULP (|w' - w*gamma/sqrt(var+eps)| <= "
                      "alpha*|w| + eta, a-priori, u = 2^-{}).",
                      f.past_range ? "finite " : "", std::fabs(f.worst_residual_ulp), f.recipe, f.chain, f.worst_index,
                      f.worst_bound_ulp, f.arithmetic_precision));
    if (!f.bit_exact.empty()) {
      std::string s;
      for (const auto& name : f.bit_exact) s += (s.empty() ? "" : ", ") + name;
      r.push_back("Replaying the recipes reproduces the observed values bit for bit with: " + s + ".");
    }
    if (f.past_range) past_range_reasoning(*f.past_range, r);
  } else if (f.overflow) {
    overflow_reasoning(f, r);
  } else if (std::isnan(f.worst_residual_ulp)) {
    // Not "N ULP from the exact fold, beyond the bound": a NaN is no distance at all.
    r.push_back(fmt::format(
        "Element {} is NaN where the exact fold is a number: no recipe's rounding of finite weights and BatchNorm "
        "parameters gives a NaN (the closest, {}, allows {:.3g} ULP there).",
        f.worst_index, f.recipe, f.worst_bound_ulp));
    r.emplace_back(
        "Look for a NaN in what produced the observed values, or an invalid operation in the fold (0*inf, "
        "the square root of a negative var + eps).");
  } else {
    r.push_back(fmt::format(
        "Element {} is {:.4g} ULP from the exact fold, beyond every recipe's rounding bound (the closest, {}, allows "
        "{:.3g} ULP there: |w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta).",
        f.worst_index, f.worst_residual_ulp, f.recipe, f.worst_bound_ulp));
    r.push_back(fmt::format("The observed drift is not the rounding of folding this BatchNorm ({}); check "
                            "its parameters (eps, var, gamma) or look for a second transformation.",
                            f.bn_source));
    if (f.scale_fit) r.push_back("The observations fit one common fold scale: " + *f.scale_fit);
  }
  return r;
}

}  // namespace foldcheck::reports
