// The English of a `diagnose` result (diagnose_summary.hpp).
#include "foldcheck/reports/diagnose_summary.hpp"

#include <cmath>

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
// " in tf32 (replay: tf32 nearest-away)" under a declared arithmetic.
std::string in_arithmetic(const DiagnoseFacts& f) {
  return (f.algorithm.empty() ? "" : " by " + f.algorithm) +
         (f.arithmetic.empty() ? "" : fmt::format(" in {} (replay: {})", f.arithmetic, f.replay));
}

// A large max |ULP| at an output whose sum cancelled (|a| sum|x w| far above |y|): rounding.
std::string cancelled(const DiagnoseFacts& f) {
  if (!f.max_ulp || f.max_abs_ulp < 4 || f.max_ulp->cancellation < 8) return "";
  return fmt::format(
      "; max |ULP| {:.4g} is element {}, a cancelled output (|a| sum|x w| is {:.3g}x |y| there), "
      "within its own bound of {:.3g} ULP",
      f.max_abs_ulp, f.max_ulp->element, f.max_ulp->cancellation, f.max_ulp->bound_ulp);
}

// Under a declared arithmetic whose replays do not explain the output, what its general bound says.
std::string general(const DiagnoseFacts& f) {
  if (f.arithmetic.empty()) return "";
  std::string s = fmt::format("; no replay of {} explains it (closest: {})", f.arithmetic, f.replay);
  if (f.general_ratio && *f.general_ratio <= 1)
    s += fmt::format(
        "; it is within the general {} bound (worst element at {:.3g} of it), which holds for any operand conversion "
        "keeping the format's bits but cannot see a change this small: only if the hardware converts operands "
        "another way is this rounding",
        f.arithmetic, *f.general_ratio);
  return s;
}
}  // namespace

namespace {

// What a passing verdict under a loose algorithm bound cannot see (NUMERICS.md's figures).
const char* loose_algorithm(const std::string& algorithm) {
  if (algorithm.rfind("winograd", 0) == 0)
    return "; Winograd's bound is a worst case over every coefficient's path, 200-1000x the honest error: a "
           "change of one channel by 1e-3 can pass it";
  if (algorithm == "fft")
    return "; the FFT's bound is normwise per output plane, 2,000-30,000x the honest error: a change of one "
           "channel by 1e-3 can pass it";
  return "";
}

// A passing element check's band with no channel beyond it: what it could have seen.
std::string band_floor(const DiagnoseFacts& f) {
  if (!f.band || f.band->tested == 0 || f.band->beyond > 0) return "";
  return fmt::format(
      "; no channel's outputs share a common factor beyond what {} honest computations of the layer reach: a change "
      "of one channel's scale by more than {:.3g} ppm would have been seen here (smaller ones need the folded "
      "weights themselves)",
      f.band->samples, f.band->floor_ppm);
}

// The channels beyond their bands: a common factor rounding does not make.
std::string band_finding(const BandFacts& b) {
  const std::string worst = fmt::format(
      "channel {}'s outputs share a common factor 1 {} {:.3g}e-6 ({:+.3g} ppm), beyond the band of {:.3g} ppm that "
      "{} honest computations of the layer reach (false-alarm probability {:g} per channel)",
      b.worst_channel, b.worst_rho_ppm < 0 ? "-" : "+", std::fabs(b.worst_rho_ppm), b.worst_rho_ppm, b.worst_band_ppm,
      b.samples, b.alpha);
  if (2 * b.beyond > b.tested)
    return fmt::format(
        "{} of the layer's {} channels' outputs share common factors beyond their bands (worst: {}): a change that "
        "moves every channel (eps, the variance, a shared scale), not rounding",
        b.beyond, b.tested, worst);
  return fmt::format("{}{}: a change of that channel's scale (its folded weights, gamma or var), not rounding",
                     b.beyond > 1 ? fmt::format("{} channels are beyond their bands; ", b.beyond) : "", worst);
}

// A passing element check with a channel beyond its band: the finding first, then why the
// per-element bound did not see it.
std::string suspicious(const DiagnoseFacts& f) {
  return fmt::format(
      "{} (SUSPICIOUS); every element is within the rounding bound of the layer as given{} (worst element at {:.3g} "
      "of it), which holds for any order of the sums and is too wide to see such a change",
      band_finding(*f.band), in_arithmetic(f), f.max_ratio);
}

}  // namespace

std::string diagnose_summary(const DiagnoseFacts& f) {
  if (f.no_bound) return *f.no_bound + " (MISTRUSTED)";
  if (f.general_only && f.expected)
    return fmt::format(
        "within the general bound of {} on Winograd's transforms (worst element at {:.3g} of it), the only one that "
        "applies when the transformed operands are converted; it is too wide to see a wrong channel, so this passes "
        "nothing (MISTRUSTED): judge the layer with the algorithm alone, or in float32",
        f.arithmetic, f.max_ratio);
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
  if (f.expected && f.band && f.band->beyond > 0) return suspicious(f);
  if (f.expected)
    return fmt::format(
        "the observed output is the layer as given{}, up to rounding (worst element at {:.3g} of "
        "its bound, max {:.3g} ULP){}{}{}",
        in_arithmetic(f), f.max_ratio, f.max_abs_ulp, cancelled(f), loose_algorithm(f.algorithm), band_floor(f));
  if (f.closest_explains)  // the fix is its own field (and its own line in the text): not repeated here
    return fmt::format("beyond the rounding bound of the layer as given{} {}; explained by {}: {}", in_arithmetic(f),
                       worst(f), f.closest, f.closest_description);
  if (f.narrow_multiplier) {
    const NarrowMultiplier& m = *f.narrow_multiplier;
    return fmt::format(
        "beyond the rounding bound of the layer as given {}: the observed output is infinite or NaN where the "
        "layer's is finite, and channel {}'s multiplier gamma/sqrt(var+eps) = {:.6g} exceeds {}'s largest finite "
        "value {:g}, so a fold computed in {} arithmetic makes that channel's weights infinite (fold in float32 and "
        "store the result as {})",
        worst(f), m.channel, m.multiplier, m.dtype, m.max_finite, m.dtype, m.dtype);
  }
  if (f.closest_loose)
    return fmt::format(
        "beyond the rounding bound of the layer as given {}, and no hypothesis that can identify a cause explains "
        "it; the closest, {} ({}), fits only within a bound at least twice the layer's, which an output just "
        "beyond the layer's own bound fits whatever went wrong: it is a lead, not a finding{}",
        worst(f), f.closest, f.closest_description, general(f));
  return fmt::format(
      "beyond the rounding bound of the layer as given {}, and none of the {} hypotheses explains "
      "it to within rounding; closest: {}{}",
      worst(f), f.hypotheses, f.closest.empty() ? "-" : f.closest, general(f));
}

}  // namespace foldcheck::reports
