// Terminal rendering of a fold check on its own (model_text.hpp): its answer line, and the
// details that follow it (where the values came from, each recipe's row, the bound). Verdicts as the check judged them
// (fold_check.hpp).
#include <fmt/format.h>

#include "foldcheck/reports/model_text.hpp"

namespace foldcheck::reports {

namespace v = result::views;

namespace {

std::string num(const v::Figure& x) { return x ? fmt::format("{:.3g}", *x) : std::string("inf"); }
std::string max_ulp(const std::optional<v::Figure>& x) { return x ? num(*x) : std::string("-"); }

// Why the verdict: the closest recipe's worst ratio (the one the check judges by) and where.
std::string reason(const v::AdiffFold& f) {
  if (f.recipes.empty()) return "no recipe was checked";
  const std::string recipe = f.closest_recipe.value_or(f.shown().recipe);
  const std::string where =
      f.worst_channel ? fmt::format(" (worst at channel {}, in the {})", *f.worst_channel, f.shown().worst_in) : "";
  switch (f.verdict) {
    case Verdict::Expected:
      return fmt::format("every folded weight and bias within {}'s rounding bound, worst ratio {}{}", recipe,
                         num(f.worst_ratio), where);
    case Verdict::Mistrusted:
      return "nothing informative was compared (every exact folded value zero or not finite in the type)";
    default:
      return fmt::format("the folded values are {} times the bound of the closest recipe, {}{}", num(f.worst_ratio),
                         recipe, where);
  }
}

}  // namespace

std::string fold_check_answer(const v::AdiffFold& f) {
  return fmt::format("verdict: {}: {}", name(f.verdict), reason(f));
}

std::string fold_check_text(const v::AdiffFold& f) {
  std::string s;
  if (f.source) s += fmt::format("folded values: {}\n\n", *f.source);
  s += fmt::format("  {:<16} {:>11} {:<8} {:>7} {:>13} {:>13}  {}\n", "recipe", "worst ratio", "in", "channel",
                   "weights |ULP|", "bias |ULP|", "verdict");
  for (const v::AdiffRecipe& r : f.recipes)
    s += fmt::format("  {:<16} {:>11} {:<8} {:>7} {:>13} {:>13}  {}\n", r.recipe, num(r.worst_ratio), r.worst_in,
                     r.worst_channel ? std::to_string(*r.worst_channel) : "-", max_ulp(r.weights_max_abs_ulp),
                     max_ulp(r.bias_max_abs_ulp), r.verdict ? name(*r.verdict) : "-");
  if (f.bound) s += fmt::format("\nbound: {}\n", *f.bound);
  return s;
}

}  // namespace foldcheck::reports
