#pragma once
// Bounded: a floating-point computation's exact value together with a rigorous bound on
// how far the computed value can be from it (a-priori running error analysis).
//
// Contract: for an expression built from exact inputs with these operators, where the
// float code performs the same operations in arithmetic with unit roundoff u (round to
// nearest), |computed - exact| <= e. Each operation uses the standard model
//   fl(a op b) = (a op b)(1 + d) + h,   |d| <= u,   |h| <= eta (only x and /: underflow)
// and first-order-free propagation of the operands' own errors:
//   add:  E = ea + eb
//   mul:  E = |a| eb + |b| ea + ea eb
//   div:  E = (|b| ea + |a| eb) / (|b| (|b| - eb))              requires |b| > eb
//   sqrt: E = ea / (sqrt(a) + sqrt(a - ea))                      (sqrt(a + ea) if a <= ea)
// then e = E + u (|exact result| + E) [+ eta]. The exact value v is carried in long
// double (64-bit significand); its own error is covered by adding 2^-62 times the
// operands' magnitudes, and every bound is rounded up by a factor (1 + 2^-50), so the
// bound stays rigorous although it is evaluated in floating point.
#include <cmath>

#include "foldcheck/numerics/dtype.hpp"

namespace foldcheck {

// Unit roundoff and underflow bound of one operation performed in arithmetic type t: t's own
// for float32 and float64. For float16 and bfloat16 the operation is a float32 kernel's,
// rounded to t (narrow.hpp): with y = RN_f(x),
//   |RN_t(y) - x| <= u_t |y| + eta_t + u_f |x| + eta_f <= (u_t + u_f (1 + u_t)) |x| + eta_t + eta_f (1 + u_t).
// (For operands that are values of t the double rounding is innocuous, 24 >= 2p + 2, and
// u_t alone would do; the general bound costs u_f/u_t <= 2^-13 and needs no such proof per
// operation. eps's own conversion to t is charged by eps_value, layer_math.hpp.)
double operation_roundoff(DType t);
double operation_eta(DType t);

struct Bounded {
  long double v = 0.0L;  // exact value of the expression (to ~2^-64 relative)
  double e = 0.0;        // |computed - exact| <= e
  double u = 0.0;        // unit roundoff of the arithmetic performing the operations
  double eta = 0.0;      // underflow bound of that arithmetic

  static Bounded exact(double value, DType arithmetic) {
    return Bounded{value, 0.0, operation_roundoff(arithmetic), operation_eta(arithmetic)};
  }
  // An input whose stored value differs from `exact_value` by at most err.
  static Bounded with_error(double exact_value, double err, DType arithmetic) {
    Bounded b = exact(exact_value, arithmetic);
    b.e = err;
    return b;
  }
  double mag() const { return static_cast<double>(std::fabs(v)); }

  // The value stored into a narrower type s: one more rounding with s's unit roundoff.
  Bounded stored_as(DType s) const;
};

Bounded operator+(const Bounded& a, const Bounded& b);
Bounded operator-(const Bounded& a, const Bounded& b);
Bounded operator*(const Bounded& a, const Bounded& b);
Bounded operator/(const Bounded& a, const Bounded& b);
Bounded operator-(const Bounded& a);
Bounded sqrt(const Bounded& a);
// fl(a*b + c) with one rounding: E = |a| eb + |b| ea + ea eb + ec, then one rounding.
Bounded fma(const Bounded& a, const Bounded& b, const Bounded& c);
// The fast reciprocal square root of arithmetic.hpp: a 12-bit estimate (|rel| <= 1.5*2^-12)
// and `steps` Newton steps, with the Newton error analysis in bounded.cpp.
Bounded bounded_fast_rsqrt(const Bounded& a, int steps);

// Higham's gamma_k = k u / (1 - k u): bound on the relative error accumulated by k
// successive roundings. Requires k u < 1 (throws std::domain_error otherwise).
double gamma_k(double k, double u);
// Round a non-negative bound up so that floating-point evaluation of the bound
// formulas never understates it.
inline double round_up(double x) { return x * (1.0 + 0x1p-50); }

}  // namespace foldcheck
