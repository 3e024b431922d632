#include "foldcheck/reference/formats.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
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


// Double-double version of the method above, applied to hi: hi = m 2^q with
// m = hi 2^-q exact. If m is an integer, hi is in f and lo (under half an ulp of hi, far
// under half an ulp of f) cannot move the rounding away from it; if m is exactly halfway
// between integers, lo's sign breaks the tie; otherwise hi is a double strictly between
// an element of f and a midpoint (both doubles), at least one ulp(hi) from the midpoint
// (half of one beyond a binade edge, plus hi's own distance to that edge), which
// |lo| <= ulp(hi)/2 cannot reach.
namespace {

double round_dd_slow(double hi, double lo, const Format& f) {
  if (hi == 0.0 || !std::isfinite(hi)) return hi;
  const int e = std::ilogb(hi);
  const int q = std::max(e, f.emin) - (f.precision - 1);
  const double m = std::ldexp(hi, -q);
  double r = std::nearbyint(m);  // ties to even in the default rounding mode
  if (lo != 0.0 && std::fabs(m - std::trunc(m)) == 0.5) r = (lo > 0) ? std::ceil(m) : std::floor(m);
  if (r == 0.0) return std::copysign(0.0, hi);  // underflow to zero keeps the sign
  if (q + std::ilogb(r) > f.emax) return r > 0 ? HUGE_VAL : -HUGE_VAL;
  return std::ldexp(r, q);
}

}  // namespace

// The same on the bit pattern (no libm calls): hi's 53-bit significand loses its low
// `shift` bits, q - (e - 52), rounding to nearest with ties broken by lo's sign, else to
// even (the kept significand's last bit is bit `shift` of the pattern, or, when every stored
// bit is dropped (shift 52: hi in the binade of the format's smallest subnormal), the hidden
// bit, which is 1: a tie there, 1.5 times that subnormal, rounds up to twice it). Adding the carry to the whole pattern
// propagates into the exponent. Cases the bit method does not cover (zero, Inf/NaN, double subnormals, shift
// outside 1..52) take the method above.
double round_to_format(double hi, double lo, const Format& f) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(hi);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  if (biased == 0 || biased == 0x7ff) return round_dd_slow(hi, lo, f);
  const int e = biased - 1023;
  const int q = std::max(e, f.emin) - (f.precision - 1);
  const int shift = q - (e - 52);
  if (shift <= 0) return hi;  // representable
  if (shift > 52) return round_dd_slow(hi, lo, f);
  const std::uint64_t mask = (std::uint64_t{1} << shift) - 1, half = std::uint64_t{1} << (shift - 1);
  const std::uint64_t drop = bits & mask;
  bool up;
  if (drop != half) up = drop > half;
  else if (lo != 0.0) up = (lo > 0) == (hi > 0);
  else up = shift == 52 || ((bits >> shift) & 1);  // tie: to even; at shift 52 the kept bit is the hidden 1 (odd)
  const std::uint64_t r = (bits & ~mask) + (up ? (std::uint64_t{1} << shift) : 0);
  const double v = std::bit_cast<double>(r);
  if (static_cast<int>((r >> 52) & 0x7ff) - 1023 > f.emax) return hi > 0 ? HUGE_VAL : -HUGE_VAL;
  return v;
}

}  // namespace foldcheck::ref
