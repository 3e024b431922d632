#include "foldcheck/reference/interval.hpp"

#include <stdexcept>

namespace foldcheck::ref {

void Interval::set_from_ternary(mpfr_srcptr rounded, int ternary) {
  mpfr_set(lo(), rounded, MPFR_RNDD);
  mpfr_set(hi(), rounded, MPFR_RNDU);
  // Round-to-nearest is within one ulp of the exact value, on the side the ternary says.
  if (ternary > 0) mpfr_nextbelow(lo());
  if (ternary < 0) mpfr_nextabove(hi());
}

void add(Interval& r, const Interval& a, const Interval& b) {
  MpNumber lo(r.precision());
  mpfr_add(lo.get(), a.lo(), b.lo(), MPFR_RNDD);
  mpfr_add(r.hi(), a.hi(), b.hi(), MPFR_RNDU);
  mpfr_set(r.lo(), lo.get(), MPFR_RNDD);
}

void sub(Interval& r, const Interval& a, const Interval& b) {
  MpNumber lo(r.precision());
  mpfr_sub(lo.get(), a.lo(), b.hi(), MPFR_RNDD);
  mpfr_sub(r.hi(), a.hi(), b.lo(), MPFR_RNDU);
  mpfr_set(r.lo(), lo.get(), MPFR_RNDD);
}

namespace {
// r = [min, max] of op(x, y) over the four endpoint pairs, each rounded outward. For
// multiplication (and division with 0 not in the divisor) the extremes over a box are
// attained at its corners, so this encloses the exact range.
template <class Op>
void corners(Interval& r, const Interval& a, const Interval& b, Op op) {
  const mpfr_prec_t p = r.precision();
  MpNumber lo(p), hi(p), t(p);
  mpfr_srcptr xs[2] = {a.lo(), a.hi()};
  mpfr_srcptr ys[2] = {b.lo(), b.hi()};
  bool first = true;
  for (mpfr_srcptr x : xs) {
    for (mpfr_srcptr y : ys) {
      op(t.get(), x, y, MPFR_RNDD);
      if (first || mpfr_less_p(t.get(), lo.get())) mpfr_set(lo.get(), t.get(), MPFR_RNDD);
      op(t.get(), x, y, MPFR_RNDU);
      if (first || mpfr_greater_p(t.get(), hi.get())) mpfr_set(hi.get(), t.get(), MPFR_RNDU);
      first = false;
    }
  }
  mpfr_set(r.lo(), lo.get(), MPFR_RNDD);
  mpfr_set(r.hi(), hi.get(), MPFR_RNDU);
}
}  // namespace

void mul(Interval& r, const Interval& a, const Interval& b) { corners(r, a, b, mpfr_mul); }

void div(Interval& r, const Interval& a, const Interval& b) {
  if (b.contains_zero()) throw std::domain_error("interval division by an interval containing 0");
  corners(r, a, b, mpfr_div);
}

void sqrt(Interval& r, const Interval& a) {
  if (mpfr_sgn(a.lo()) < 0) throw std::domain_error("interval square root of a negative number");
  MpNumber lo(r.precision());
  mpfr_sqrt(lo.get(), a.lo(), MPFR_RNDD);
  mpfr_sqrt(r.hi(), a.hi(), MPFR_RNDU);
  mpfr_set(r.lo(), lo.get(), MPFR_RNDD);
}

void neg(Interval& r, const Interval& a) {
  MpNumber lo(r.precision());
  mpfr_neg(lo.get(), a.hi(), MPFR_RNDD);
  mpfr_neg(r.hi(), a.lo(), MPFR_RNDU);
  mpfr_set(r.lo(), lo.get(), MPFR_RNDD);
}

DoubleDouble midpoint(const Interval& a) {
  MpNumber mid(a.precision() + 1), rest(a.precision() + 1);
  mpfr_add(mid.get(), a.lo(), a.hi(), MPFR_RNDN);  // exact with one more bit
  mpfr_div_2ui(mid.get(), mid.get(), 1, MPFR_RNDN);
  DoubleDouble dd;
  dd.hi = mpfr_get_d(mid.get(), MPFR_RNDN);
  mpfr_sub_d(rest.get(), mid.get(), dd.hi, MPFR_RNDN);
  dd.lo = mpfr_get_d(rest.get(), MPFR_RNDN);
  return dd;
}

}  // namespace foldcheck::ref

namespace foldcheck::ref {

double radius_of(const Interval& a, const DoubleDouble& c) {
  // max(hi - c, c - lo) with c = c.hi + c.lo, every step rounded up, then to double
  // rounded up: (hi - c.hi) - c.lo and (c.hi - lo) + c.lo.
  MpNumber t(a.precision() + 64), u(a.precision() + 64);
  mpfr_sub_d(t.get(), a.hi(), c.hi, MPFR_RNDU);
  mpfr_sub_d(t.get(), t.get(), c.lo, MPFR_RNDU);
  mpfr_d_sub(u.get(), c.hi, a.lo(), MPFR_RNDU);
  mpfr_add_d(u.get(), u.get(), c.lo, MPFR_RNDU);
  mpfr_max(t.get(), t.get(), u.get(), MPFR_RNDU);
  return mpfr_get_d(t.get(), MPFR_RNDU);
}

}  // namespace foldcheck::ref
