#include "foldcheck/reference/formats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace foldcheck::ref {

// Method (exact at every step):
//   e = floor(log2|x|)                      from MPFR's exponent (x = m·2^E, 1/2 <= |m| < 1)
//   q = max(e, emin) - (p - 1)              exponent of ulp_f(x), floored at the subnormal spacing
//   m = roundeven(x · 2^-q)                 an integer with |m| <= 2^p; the scaling is exact
//   r = m · 2^q                             exact in double for every format here
// The set of values of f in the binade of x (or the subnormal range) is exactly the
// integers times 2^q, so r is the nearest element of f, ties to even. If |r| reached
// 2^(emax+1) the value lies at or beyond the overflow threshold (2 - 2^-p)·2^emax, which
// IEEE 754 round-to-nearest maps to Inf.
double round_to_format(mpfr_srcptr x, const Format& f) {
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  if (mpfr_inf_p(x)) return mpfr_signbit(x) ? -HUGE_VAL : HUGE_VAL;
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;

  const long e = static_cast<long>(mpfr_get_exp(x)) - 1;
  const long q = std::max<long>(e, f.emin) - (f.precision - 1);

  mpfr_t scaled;
  mpfr_init2(scaled, mpfr_get_prec(x));
  mpfr_mul_2si(scaled, x, -q, MPFR_RNDN);  // exact: a power-of-two scaling
  mpfr_roundeven(scaled, scaled);          // |scaled| <= 2^p after rounding, so it fits p+1 bits
  const double m = mpfr_get_d(scaled, MPFR_RNDN);  // exact: an integer below 2^54
  mpfr_clear(scaled);

  const bool negative = mpfr_signbit(x) != 0;
  if (m == 0.0) return negative ? -0.0 : 0.0;  // underflow to zero keeps the sign
  if (q + static_cast<long>(std::ilogb(m)) > f.emax) return negative ? -HUGE_VAL : HUGE_VAL;
  return std::ldexp(m, static_cast<int>(q));
}

}  // namespace foldcheck::ref
