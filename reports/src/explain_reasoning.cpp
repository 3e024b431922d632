// The English of an `explain` result (explain_reasoning.hpp).
#include "foldcheck/reports/explain_reasoning.hpp"

#include <cmath>
#include <fmt/format.h>

namespace foldcheck::reports {

std::vector<std::string> explain_reasoning(const ExplainFacts& f) {
  std::vector<std::string> r;
  if (f.vacuous)
    r.push_back("Every exact folded value is zero, or rounds to zero or to an infinity in this dtype: the "
                "observation matches, but so would a wrong scale, so it tells nothing about the fold "
                "(MISTRUSTED).");
  if (f.explained) {
    r.push_back(fmt::format(
        "Every observed value is within {:.3g} ULP of the exact fold w*gamma/sqrt(var+eps); the {} chain ({}) bounds "
        "the error at element {} by {:.3g} ULP (|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta, a-priori, u = 2^-{}).",
        std::fabs(f.worst_residual_ulp), f.recipe, f.chain, f.worst_index, f.worst_bound_ulp, f.arithmetic_precision));
    if (!f.bit_exact.empty()) {
      std::string s;
      for (const auto& name : f.bit_exact) s += (s.empty() ? "" : ", ") + name;
      r.push_back("Replaying the recipes reproduces the observed values bit for bit with: " + s + ".");
    }
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
