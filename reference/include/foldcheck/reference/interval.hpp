#pragma once
// Closed real intervals with MPFR endpoints and outward (directed) rounding.
//
// Contract: if the exact real operands lie in the operand intervals, the exact real
// result of each operation lies in the result interval. Lower endpoints are rounded
// toward -Inf and upper endpoints toward +Inf, so this holds at any working precision;
// a larger precision only narrows the interval. When every operation is exact the
// interval is a single point. This is what makes the reference certifiable: rounding
// the real result to a format is monotone, so if both endpoints round to the same value
// that value is the correctly rounded result.
#include <mpfr.h>

#include <string>

#include "foldcheck/reference/mp_number.hpp"

namespace foldcheck::ref {

class Interval {
 public:
  explicit Interval(mpfr_prec_t precision) : lo_(precision), hi_(precision) {}
  // The point interval [v, v]; exact for precision >= 53.
  Interval(mpfr_prec_t precision, double v) : lo_(precision, v), hi_(precision, v) {}

  mpfr_prec_t precision() const { return lo_.precision(); }
  mpfr_ptr lo() { return lo_.get(); }
  mpfr_ptr hi() { return hi_.get(); }
  mpfr_srcptr lo() const { return lo_.get(); }
  mpfr_srcptr hi() const { return hi_.get(); }
  bool is_point() const { return mpfr_equal_p(lo_.get(), hi_.get()) != 0; }
  // True when 0 lies in [lo, hi].
  bool contains_zero() const { return mpfr_sgn(lo_.get()) <= 0 && mpfr_sgn(hi_.get()) >= 0; }

  // Set this interval from a value computed with MPFR's round-to-nearest at this
  // precision and its ternary result t: t == 0 means exact; t > 0 means the exact value
  // is below the stored one (and within one ulp), t < 0 above it.
  void set_from_ternary(mpfr_srcptr rounded, int ternary);

 private:
  MpNumber lo_, hi_;
};

// Interval operations; the result interval's precision is the precision of `r`.
void add(Interval& r, const Interval& a, const Interval& b);
void sub(Interval& r, const Interval& a, const Interval& b);
void mul(Interval& r, const Interval& a, const Interval& b);
// Requires 0 not in b (throws std::domain_error otherwise).
void div(Interval& r, const Interval& a, const Interval& b);
// Requires lo(a) >= 0 (throws std::domain_error otherwise).
void sqrt(Interval& r, const Interval& a);
void neg(Interval& r, const Interval& a);

// Midpoint as a double-double (hi + lo): hi = RN(mid), lo = RN(mid - hi).
struct DoubleDouble {
  double hi = 0.0;
  double lo = 0.0;
};
DoubleDouble midpoint(const Interval& a);
// An upper bound on the distance from c to the farther endpoint of a (so every point of
// a lies within it of c); requires a's precision large enough to hold c exactly or not:
// the bound is rounded up either way.
double radius_of(const Interval& a, const DoubleDouble& c);

}  // namespace foldcheck::ref
