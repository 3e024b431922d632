// The English of a `diagnose` result (diagnose_summary.hpp).
#include "foldcheck/reports/diagnose_summary.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

std::string overflow_reason(const DiagnoseOverflow& o) {
  return fmt::format(
      "the layer's exact {} at element {} is {}, past {}'s range: an overflow, not rounding, "
      "which no rounding bound covers, so the elements past the range are not judged (MISTRUSTED)",
      o.what, o.element, o.value ? fmt::format("{:.4g}", *o.value) : "beyond 1.8e308", o.dtype);
}

namespace {
// "(worst element 3.2x its bound)", or the first element observed NaN or infinite where no
// rounding or overflow gives that (score counts it in nonfinite).
std::string worst(const DiagnoseFacts& f) {
  if (f.nonfinite)
    return fmt::format("(element {} is {}: no rounding or overflow of the layer's value there gives it)",
                       f.nonfinite->first, f.nonfinite->second);
  if (f.worst_element) return fmt::format("(worst element {}, {:.3g}x its bound)", *f.worst_element, f.max_ratio);
  return fmt::format("(worst element {:.3g}x its bound)", f.max_ratio);
}
}  // namespace

std::string diagnose_summary(const DiagnoseFacts& f) {
  // An overflow is the answer unless the elements judged show a wrong one (evidence first, the
  // overflow said after it).
  if (f.overflow && (f.expected || f.vacuous)) return overflow_reason(*f.overflow);
  if (f.overflow) {
    DiagnoseFacts rest = f;
    rest.overflow.reset();
    return diagnose_summary(rest) + "; besides, " + overflow_reason(*f.overflow);
  }
  if (f.vacuous)
    return "every value of the layer as given is zero: the observation matches, but a wrong scale or shift would "
           "match too, so this compares nothing (MISTRUSTED)";
  if (f.expected)
    return fmt::format("the observed output is the layer as given, up to rounding (worst element at {:.3g} of "
                       "its bound, max {:.3g} ULP)",
                       f.max_ratio, f.max_abs_ulp);
  if (f.closest_explains)  // the fix is its own field (and its own line in the text): not repeated here
    return fmt::format("beyond the rounding bound of the layer as given {}; explained by {}: {}", worst(f), f.closest,
                       f.closest_description);
  if (f.narrow_multiplier) {
    const NarrowMultiplier& m = *f.narrow_multiplier;
    return fmt::format(
        "beyond the rounding bound of the layer as given {}: the observed output is infinite or NaN where the "
        "layer's is finite, and channel {}'s multiplier gamma/sqrt(var+eps) = {:.6g} exceeds {}'s largest finite "
        "value {:g}, so a fold computed in {} arithmetic makes that channel's weights infinite (fold in float32 and "
        "store the result as {})",
        worst(f), m.channel, m.multiplier, m.dtype, m.max_finite, m.dtype, m.dtype);
  }
  return fmt::format(
      "beyond the rounding bound of the layer as given {}, and none of the {} hypotheses explains "
      "it to within rounding; closest: {}",
      worst(f), f.hypotheses, f.closest.empty() ? "-" : f.closest);
}

}  // namespace foldcheck::reports
