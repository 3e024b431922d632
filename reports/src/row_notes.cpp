// Explanations in place (row_notes.hpp).
#include "foldcheck/reports/row_notes.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

double number(const json& c, const char* a, const char* b) {
  if (!c.contains(a) || !c[a].is_object()) return -1;
  const json v = c[a].value(b, json());
  return v.is_number() ? v.get<double>() : -1;
}

// The bound in ULP at the element nearest its bound, and at the element of the largest |ULP|:
// a run's comparison keeps them in bound_check, a summary's entry at its top level.
double field(const json& c, const char* k) {
  const double inside = number(c, "bound_check", k);
  if (inside >= 0) return inside;
  const json v = c.value(k, json());
  return v.is_number() ? v.get<double>() : -1;
}

}  // namespace

// Folded weights (w' = w s) cannot cancel: their bound is a fixed multiple of |w| and differs
// in ULP between elements by the binade alone (a factor below 2 per scale), so a max |ULP| above
// the bound ULP there is not cancellation. A row shows it when the max-|ULP| element's own
// bound exceeds twice the bound ULP column, more than a binade explains.
bool shows_cancellation(const json& c) {
  if (!c.is_object() || c.value("name", "") == "weights") return false;
  const double max_ulp = number(c, "ulp", "max_abs"), at_worst = field(c, "bound_ulp_at_worst"),
               own = field(c, "bound_ulp_at_max_ulp");
  return c.value("verdict", "") != "MISTRUSTED" && max_ulp > 0 && at_worst >= 0 && own >= max_ulp && max_ulp > at_worst &&
         own > 2 * at_worst;
}

std::string cancellation_note(const json& c) {
  if (!shows_cancellation(c)) return "";
  const double max_ulp = number(c, "ulp", "max_abs"), at_worst = field(c, "bound_ulp_at_worst"),
               own = field(c, "bound_ulp_at_max_ulp");
  return fmt::format("max |ULP| {:.4g} is a cancelled result, within its own bound of {:.3g} ULP (bound ULP {:.3g} is at "
                     "the element nearest its bound)",
                     max_ulp, own, at_worst);
}

namespace {

// A run's facts on eps held in float32 (run_case.cpp), when the shift is at least an ULP.
std::string eps_note(const json& c) {
  const json e = c.value("eps_held_in_float32", json());
  if (!e.is_object() || e.value("ulp_min", 0.0) < 1) return "";
  return fmt::format("this recipe holds eps in float32 ({:g} becomes {:.9g}): the scale of the channel with the smallest "
                     "var + eps moves by {:.3g} relative, {:.3g} to {:.3g} {} ULP of the values it scales (less in the "
                     "other channels); the engine's choice, charged in the bound",
                     e.value("eps", 0.0), e.value("eps_used", 0.0), e.value("max_relative_scale_shift", 0.0),
                     e.value("ulp_min", 0.0), e.value("ulp_max", 0.0), e.value("dtype", ""));
}

std::string mistrusted_note(const json& c) {
  if (c.value("verdict", "") != "MISTRUSTED") return "";
  const std::string cause = c.value("mistrusted_cause", "");
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

std::vector<std::string> row_notes(const json& c) {
  std::vector<std::string> notes;
  if (!c.is_object()) return notes;
  for (const std::string& n : {cancellation_note(c), eps_note(c), mistrusted_note(c)})
    if (!n.empty()) notes.push_back(n);
  for (const json& n : c.value("notes", json::array()))  // a summary's entry: the notes rendered from its run
    if (n.is_string()) notes.push_back(n.get<std::string>());
  return notes;
}

}  // namespace foldcheck::reports
