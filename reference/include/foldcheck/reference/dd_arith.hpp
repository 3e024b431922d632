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

// The operations are written once over the lane type T: double, or a vector of doubles
// (the fast path evaluates 8 outputs at once). Ops (default Lanes<T>) supplies a true fused
// multiply-add (one rounding) and |.|; every other operation is T's own +, -, * in
// round-to-nearest, so each lane performs exactly the scalar algorithm and has its bound.
template <class T>
struct Lanes;
template <>
struct Lanes<double> {
  [[gnu::always_inline]] static double fma(double a, double b, double c) { return std::fma(a, b, c); }
  [[gnu::always_inline]] static double abs(double a) { return std::fabs(a); }
};

template <class T>
struct DDT {
  T hi{}, lo{};
};
using DD = DDT<double>;

template <class T>
[[gnu::always_inline]] inline DDT<T> two_sum(T a, T b) {
  const T s = a + b;
  const T bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
template <class T>
[[gnu::always_inline]] inline DDT<T> fast_two_sum(T a, T b) {
  const T s = a + b;
  return {s, b - (s - a)};
}
template <class T, class Ops = Lanes<T>>
[[gnu::always_inline]] inline DDT<T> two_prod(T a, T b) {
  const T p = a * b;
  return {p, Ops::fma(a, b, -p)};
}
template <class T>
[[gnu::always_inline]] inline DDT<T> plus_fp(const DDT<T>& x, T y) {
  const DDT<T> s = two_sum(x.hi, y);
  return fast_two_sum(s.hi, x.lo + s.lo);
}
template <class T, class Ops = Lanes<T>>
[[gnu::always_inline]] inline DDT<T> times_dd(const DDT<T>& x, const DDT<T>& y) {
  const DDT<T> c = two_prod<T, Ops>(x.hi, y.hi);
  const T tl0 = x.lo * y.lo;
  const T tl1 = Ops::fma(x.hi, y.lo, tl0);
  const T cl2 = Ops::fma(x.lo, y.hi, tl1);
  return fast_two_sum(c.hi, c.lo + cl2);
}
template <class T>
[[gnu::always_inline]] inline DDT<T> plus_dd(const DDT<T>& x, const DDT<T>& y) {
  const DDT<T> s = two_sum(x.hi, y.hi);
  const DDT<T> t = two_sum(x.lo, y.lo);
  const DDT<T> v = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(v.hi, t.lo + v.lo);
}
template <class T, class Ops = Lanes<T>>
[[gnu::always_inline]] inline T mag(const DDT<T>& x) {
  return Ops::abs(x.hi) + Ops::abs(x.lo);
}

inline constexpr double kOpRel = 0x1p-102;  // per-operation relative error bound used here

}  // namespace foldcheck::ref::dd
