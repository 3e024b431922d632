// The English of a `diagnose` result (diagnose_summary.hpp).
#include "foldcheck/reports/diagnose_summary.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

std::string overflow_reason(const DiagnoseOverflow& o) {
  return fmt::format("the layer's exact {} at element {} is {}, past {}'s range: an overflow, not rounding, "
                     "which no rounding bound covers, so nothing was compared (MISTRUSTED)",
                     o.what, o.element, o.value ? fmt::format("{:.4g}", *o.value) : "beyond 1.8e308", o.dtype);
}

std::string diagnose_summary(const DiagnoseFacts& f) {
  if (f.overflow) return overflow_reason(*f.overflow);
  if (f.vacuous)
    return "every value of the layer as given is zero: the observation matches, but a wrong scale or shift would "
           "match too, so this compares nothing (MISTRUSTED)";
  if (f.expected)
    return fmt::format("the observed output is the layer as given, up to rounding (worst element at {:.3g} of "
                       "its bound, max {:.3g} ULP)",
                       f.max_ratio, f.max_abs_ulp);
  if (f.closest_explains)  // the fix is its own field (and its own line in the text): not repeated here
    return fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound); "
                       "explained by {}: {}",
                       f.max_ratio, f.closest, f.closest_description);
  if (f.narrow_multiplier) {
    const NarrowMultiplier& m = *f.narrow_multiplier;
    return fmt::format(
        "beyond the rounding bound of the layer as given (worst element {:.3g}x its bound): the observed "
        "output is infinite or NaN where the layer's is finite, and channel {}'s multiplier "
        "gamma/sqrt(var+eps) = {:.6g} exceeds {}'s largest finite value {:g}, so a fold computed in {} "
        "arithmetic makes that channel's weights infinite (fold in float32 and store the result as {})",
        f.max_ratio, m.channel, m.multiplier, m.dtype, m.max_finite, m.dtype, m.dtype);
  }
  return fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound), and "
                     "none of the {} hypotheses explains it to within rounding; closest: {}",
                     f.max_ratio, f.hypotheses, f.closest.empty() ? "-" : f.closest);
}

}  // namespace foldcheck::reports
