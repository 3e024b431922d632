// Explanations in place (row_notes.hpp).
#include "foldcheck/reports/row_notes.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

using json = nlohmann::json;
using result::views::NoteFacts;

// Folded weights (w' = w s) cannot cancel: their bound is a fixed multiple of |w| and differs
// in ULP between elements by the binade alone (a factor below 2 per scale), so a max |ULP| above
// the bound ULP there is not cancellation. A row shows it when the max-|ULP| element's own
// bound exceeds twice the bound ULP column, more than a binade explains.
bool shows_cancellation(const NoteFacts& c) {
  if (!c.is_row || c.weights) return false;
  const double max_ulp = c.max_ulp, at_worst = c.bound_ulp_at_worst, own = c.bound_ulp_at_max_ulp;
  return c.verdict != Verdict::Mistrusted && max_ulp > 0 && at_worst >= 0 && own >= max_ulp && max_ulp > at_worst &&
         own > 2 * at_worst;
}

std::string cancellation_note(const NoteFacts& c) {
  if (!shows_cancellation(c)) return "";
  return fmt::format(
      "max |ULP| {:.4g} is a cancelled result, within its own bound of {:.3g} ULP (bound ULP {:.3g} is at "
      "the element nearest its bound)",
      c.max_ulp, c.bound_ulp_at_max_ulp, c.bound_ulp_at_worst);
}

namespace {

// A run's facts on eps held in float32 (run_case.cpp), when the shift is at least an ULP.
std::string eps_note(const NoteFacts& c) {
  if (!c.eps_held || c.eps_held->ulp_min < 1) return "";
  const NoteFacts::EpsHeld& e = *c.eps_held;
  return fmt::format(
      "this recipe holds eps in float32 ({:g} becomes {:.9g}): the scale of the channel with the smallest "
      "var + eps moves by {:.3g} relative, {:.3g} to {:.3g} {} ULP of the values it scales (less in the "
      "other channels); the engine's choice, charged in the bound",
      e.eps, e.eps_used, e.max_relative_scale_shift, e.ulp_min, e.ulp_max, e.dtype);
}

std::string mistrusted_note(const NoteFacts& c) {
  if (c.verdict != Verdict::Mistrusted) return "";
  const std::string& cause = c.mistrusted_cause;
  if (cause == "all_exact_zero")
    return "MISTRUSTED: every exact folded bias is 0 (no conv bias, mean 0 and beta 0: a fresh BatchNorm), so there was "
           "nothing to compare; it does not count toward the verdict: the outputs, which add the bias, are scored in the paths";
  if (cause == "rounds_to_zero_or_infinity")
    return "MISTRUSTED: every exact folded bias rounds to 0 or to an infinity in this type, so there was nothing to "
           "compare; it does not count toward the verdict: the outputs, which add the bias, are scored in the paths";
  return "MISTRUSTED: no element was informative (every exact value 0, or rounding to 0 or an infinity): nothing was "
         "compared, so this is not a pass";
}

}  // namespace

std::vector<std::string> row_notes(const NoteFacts& c) {
  std::vector<std::string> notes;
  if (!c.is_row) return notes;
  for (const std::string& n : {cancellation_note(c), eps_note(c), mistrusted_note(c)})
    if (!n.empty()) notes.push_back(n);
  for (const std::string& n : c.notes) notes.push_back(n);  // a summary's entry: the notes rendered from its run
  return notes;
}

std::vector<std::string> row_notes(const json& c) { return row_notes(NoteFacts::from_json(c)); }
bool shows_cancellation(const json& c) { return shows_cancellation(NoteFacts::from_json(c)); }
std::string cancellation_note(const json& c) { return cancellation_note(NoteFacts::from_json(c)); }

}  // namespace foldcheck::reports
