#pragma once
// Double-word ("double-double") building blocks with proven error bounds: the conv
// reference's fast path uses them with the bounds below; the harness's attribution
// number type (xnum) uses them as its ~106-bit arithmetic.
//
// Source of the bounds: M. Joldes, J.-M. Muller, V. Popescu, "Tight and rigorous error
// bounds for basic building blocks of double-word arithmetic", ACM TOMS 44(2), 2017, with
// u = 2^-53 and round-to-nearest binary64 (no underflow in the products involved):
//   two_sum, fast_two_sum (|a| >= |b|), two_prod (with FMA): exact.
//   dd_plus_fp  (their Algorithm 4, DWPlusFP):          relative error <= 2 u^2.
//   dd_times_dd (their Algorithm 12, DWTimesDW3, FMA):  relative error <= 5 u^2.
//   plus_dd     (their Algorithm 6, AccurateDWPlusDW):  relative error <= 3 u^2 + 13 u^3.
// Callers here use the cruder 2^-102 (= 8 u^2) per operation, which covers both.
#include <cmath>

namespace foldcheck::ref::dd {

// Always inlined: the reference's vector kernels are compiled per x86-64 level
// (fast_kernels.hpp), and an out-of-line copy of a shared inline function could carry
// instructions another build's CPU lacks.

struct DD {
  double hi = 0, lo = 0;
};

[[gnu::always_inline]] inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
[[gnu::always_inline]] inline DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
[[gnu::always_inline]] inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
[[gnu::always_inline]] inline DD plus_fp(const DD& x, double y) {
  const DD s = two_sum(x.hi, y);
  return fast_two_sum(s.hi, x.lo + s.lo);
}
[[gnu::always_inline]] inline DD times_dd(const DD& x, const DD& y) {
  const DD c = two_prod(x.hi, y.hi);
  const double tl0 = x.lo * y.lo;
  const double tl1 = std::fma(x.hi, y.lo, tl0);
  const double cl2 = std::fma(x.lo, y.hi, tl1);
  return fast_two_sum(c.hi, c.lo + cl2);
}
[[gnu::always_inline]] inline DD plus_dd(const DD& x, const DD& y) {
  const DD s = two_sum(x.hi, y.hi);
  const DD t = two_sum(x.lo, y.lo);
  const DD v = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(v.hi, t.lo + v.lo);
}
[[gnu::always_inline]] inline double mag(const DD& x) { return std::fabs(x.hi) + std::fabs(x.lo); }

inline constexpr double kOpRel = 0x1p-102;  // per-operation relative error bound used here

}  // namespace foldcheck::ref::dd
