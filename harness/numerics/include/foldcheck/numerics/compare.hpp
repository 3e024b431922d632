#pragma once
// Per-element comparison of values of a dtype against certified exact values.
//
// Conventions (every command's): ULP error = (v - x) / ulp_T(x), signed and fractional,
// ulp_T the spacing of T at the exact x (floored at the subnormal spacing); ppm =
// 1e6 (v - x) / |x|. Special values are counted as their own kinds, never folded into
// the numbers and never dropped: every element is either scored (in the ULP statistics
// and histogram) or counted in one of the unscored kinds, and the counts are reported
// beside the histograms.
//   Unscored (no finite error exists):
//   nan             v is NaN, the reference is not                        -> UNEXPECTED
//   nan_match       v and the reference are both NaN (a file's reference)   agreement
//   reference_nan   the reference is NaN, v is not                         -> UNEXPECTED
//   inf_mismatch    v is +-Inf, the reference rounds to a finite value or
//                   the other infinity                                     -> UNEXPECTED
//   inf_missed      the reference is itself +-Inf (a file's), v is finite  -> UNEXPECTED
//   overflow_match  v and the reference rounded to T are the same infinity  agreement
//   Scored, and also counted (their ULP or ppm needs reading with care):
//   overflow_finite the exact value rounds to +-Inf in T but v is finite (a saturating
//                   engine, or one rounding below the threshold): scored against the
//                   exact x with the top binade's spacing
//   subnormal_reference 0 < |x| < T's smallest normal: ULP is the fixed subnormal spacing,
//                   so relative accuracy is lower than the ULP suggests
//   signed_zero     v and the reference are zeros of opposite signs (0 ULP)
//   ppm_undefined   the reference is exactly 0 (ULP still scored; ppm has no meaning)
// A comparison with no informative element (every exact value zero, or rounding to zero or to
// an infinity in T, or no element at all) is MISTRUSTED: it would pass vacuously.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/numerics/histogram.hpp"
#include "foldcheck/reference/certify.hpp"
#include "foldcheck/result/judgement.hpp"  // Verdict, and how a comparison's facts become one (of_check)

namespace foldcheck {

struct Distribution {
  double max_abs = 0, mean_abs = 0, mean = 0, rms = 0, p50 = 0, p99 = 0, p999 = 0;
  std::int64_t count = 0;
};

struct KindCounts {
  std::int64_t nan = 0, nan_match = 0, reference_nan = 0, inf_mismatch = 0, inf_missed = 0, overflow_match = 0;
  std::int64_t overflow_finite = 0, subnormal_reference = 0, signed_zero = 0, ppm_undefined = 0;
  std::int64_t unscored() const;  // elements outside the ULP statistics: elements = ulp.count + unscored()
};
nlohmann::json to_json(const KindCounts& k);

struct Comparison {
  std::int64_t elements = 0, exact_matches = 0;
  Distribution ulp, ppm;
  Histogram ulp_hist = Histogram::for_ulp(), ppm_hist = Histogram::for_ppm();
  // With bounds: each scored element's (v - x) / bound, signed (the error's sign), the same
  // scale on every path whatever its magnitude: |ratio| <= 1 is within the bound.
  std::optional<Histogram> bound_hist;
  KindCounts kinds;
  std::int64_t worst_index = -1;  // element with the largest |ULP|
  // With bounds: the largest |v - x| / bound, and how many elements exceed their bound.
  std::optional<double> worst_bound_ratio;
  std::int64_t worst_bound_index = -1;
  double worst_bound_ulp = 0.0;  // the bound at that element, in ULP
  // The bound, in ULP, at the element of the largest |ULP| (worst_index): much larger than
  // worst_bound_ulp where that element is a cancelled result (|x| far below the magnitudes
  // its bound scales with), which is how a large |ULP| stays within its bound.
  double bound_ulp_at_max_ulp = 0.0;
  std::int64_t beyond_bound = 0;
  // With probabilistic bounds: the largest |v - x| / probabilistic bound, elements beyond.
  std::optional<double> worst_probabilistic_ratio;
  std::int64_t beyond_probabilistic = 0;
  Verdict verdict = Verdict::Expected;
};

// Compare values v[i] (of dtype t) with the exact x[i]. `bounds`, if given, is a per-
// element absolute bound on |v - x|; the verdict is UNEXPECTED when any element exceeds
// it (or is NaN / a spurious Inf), MISTRUSTED when no element is informative. With
// `probabilistic` bounds too, SUSPICIOUS when within `bounds` but beyond these.
Comparison compare(const std::vector<double>& v, const ref::ValueArray& x, DType t,
                   const std::vector<double>* bounds = nullptr, const std::vector<double>* probabilistic = nullptr);
// The same for separately certified values (folded weights and biases).
inline Comparison compare(const std::vector<double>& v, const std::vector<ref::Value>& x, DType t,
                          const std::vector<double>* bounds = nullptr,
                          const std::vector<double>* probabilistic = nullptr) {
  return compare(v, ref::ValueArray(x), t, bounds, probabilistic);
}

// The smallest tolerances a torch.testing.assert_close-style check (|a - e| <= atol +
// rtol |e|) needs to accept every result within `bounds` of the exact values x: derived
// from the bounds, never from the observed errors.
struct Tolerance {
  double atol_alone = 0;  // rtol = 0
  double rtol_alone = 0;  // atol = 0 (inf if some exact value is 0)
  double rtol = 0, atol = 0;  // rtol = median of bound/|x|, atol covers the rest
};
Tolerance tolerance_from_bounds(const std::vector<double>& bounds, const ref::ValueArray& x);
nlohmann::json to_json(const Tolerance& t);

// Values known to double precision (a float64 run, a reference .npy) as comparison
// targets for dtype t: taken as exact, their rounding to t marked certified. Only for
// targets whose own error is negligible against t's rounding (float64 against float32 or
// narrower: 2^-29 of a float32 ULP per operation).
ref::ValueArray approximate_values(const std::vector<double>& x, DType t);

// Signed ULP error of v against the double-double x (finite values).
double ulp_error(double v, const ref::DoubleDouble& x, DType t);

// |v - x| for a finite double v and a double-double x, in long double (relative error
// about 2^-64), and its ratio to an absolute bound. The ratio allows a 2^-40 relative
// margin that covers the error of evaluating the distance; a ratio above 1 means beyond.
long double distance(double v, const ref::DoubleDouble& x);
double bound_ratio(long double distance, double bound);

nlohmann::json to_json(const Distribution& d);
nlohmann::json to_json(const Comparison& c);

}  // namespace foldcheck
