#include "foldcheck/numerics/bounded.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace foldcheck {
namespace {
constexpr double kSlack = 0x1p-62;  // long double error of v, per operation, relative to operands

Bounded finish(long double v, double E, const Bounded& a, const Bounded& b, double slack_mag, bool can_underflow) {
  Bounded r;
  r.v = v;
  r.u = std::max(a.u, b.u);
  r.eta = std::max(a.eta, b.eta);
  const double mag = static_cast<double>(std::fabs(v));
  r.e = round_up(E + r.u * (mag + E) + (can_underflow ? r.eta : 0.0) + kSlack * slack_mag);
  return r;
}
}  // namespace

double operation_roundoff(DType t) {
  const DTypeInfo& i = info(t);
  if (i.arithmetic == t) return i.unit_roundoff;
  const double uf = info(DType::Float32).unit_roundoff;
  return round_up(i.unit_roundoff + uf * (1 + i.unit_roundoff));
}

double operation_eta(DType t) {
  const DTypeInfo& i = info(t);
  if (i.arithmetic == t) return i.underflow_eta;
  return round_up(i.underflow_eta + info(DType::Float32).underflow_eta * (1 + i.unit_roundoff));
}

Bounded Bounded::stored_as(DType s) const {
  const DTypeInfo& si = info(s);
  if (si.unit_roundoff <= u) return *this;  // s is at least as wide: storing is exact
  Bounded r = *this;
  r.e = round_up(e + si.unit_roundoff * (mag() + e) + si.underflow_eta);
  return r;
}

Bounded operator+(const Bounded& a, const Bounded& b) {
  return finish(a.v + b.v, a.e + b.e, a, b, a.mag() + b.mag(), false);
}

Bounded operator-(const Bounded& a, const Bounded& b) {
  return finish(a.v - b.v, a.e + b.e, a, b, a.mag() + b.mag(), false);
}

Bounded operator*(const Bounded& a, const Bounded& b) {
  const double E = a.mag() * b.e + b.mag() * a.e + a.e * b.e;
  const long double v = a.v * b.v;
  return finish(v, E, a, b, static_cast<double>(std::fabs(v)), true);
}

Bounded operator/(const Bounded& a, const Bounded& b) {
  const double bm = b.mag();
  if (!(bm > b.e)) throw std::domain_error("bound: divisor's error bound reaches zero");
  const double E = (bm * a.e + a.mag() * b.e) / (bm * (bm - b.e));
  const long double v = a.v / b.v;
  return finish(v, E, a, b, static_cast<double>(std::fabs(v)), true);
}

Bounded operator-(const Bounded& a) {
  Bounded r = a;
  r.v = -a.v;
  return r;
}

Bounded sqrt(const Bounded& a) {
  if (a.v < 0) throw std::domain_error("bound: square root of a negative value");
  const double av = a.mag();
  const double E = (av > a.e) ? a.e / (std::sqrt(av) + std::sqrt(av - a.e)) : std::sqrt(av + a.e);
  const long double v = std::sqrt(a.v);
  return finish(v, E, a, a, static_cast<double>(v), false);
}

double gamma_k(double k, double u) {
  const double ku = k * u;
  if (!(ku < 1.0)) throw std::domain_error("bound: gamma_k undefined for k*u >= 1");
  return round_up(ku / (1.0 - ku));
}

}  // namespace foldcheck

namespace foldcheck {

Bounded fma(const Bounded& a, const Bounded& b, const Bounded& c) {
  const double E = a.mag() * b.e + b.mag() * a.e + a.e * b.e + c.e;
  const long double v = a.v * b.v + c.v;
  Bounded r = finish(v, E, a, b, static_cast<double>(std::fabs(a.v * b.v)) + c.mag(), true);
  r.u = std::max(r.u, c.u);
  return r;
}

// Error analysis of the fast rsqrt (all relative to 1/sqrt(a) of the exact a):
// 1. The computed a^ lies in [a - e, a + e]; 1/sqrt(a^) deviates from 1/sqrt(a) by a
//    relative rho <= sqrt(a / (a - e)) - 1.
// 2. The estimate y0 = (1/sqrt(a^))(1 + eps0), |eps0| <= 1.5*2^-12 (Intel's rsqrtps bound;
//    the model's 12-bit rounding is within 2^-12 + 2^-52).
// 3. A Newton step from y = (1/sqrt(a^))(1 + eps), with s = a^ y^2 = (1 + eps)^2:
//    in exact arithmetic y (1.5 - 0.5 s) = (1/sqrt(a^))(1 - 1.5 eps^2 - 0.5 eps^3); the
//    float step rounds y*(0.5a^) and that times y (together a factor (1 + theta2),
//    |theta2| <= gamma_2), 1.5 - t and the final product (one rounding each), so
//    |y1 - exact step| <= |y| (|1.5 - 0.5 s| gamma_2 + 0.5 s gamma_2 (1 + gamma_2)),
//    and with |y| sqrt(a^) <= 1 + |eps| and 0 < 1.5 - 0.5 s <= 1.5 - 0.5 (1 - |eps|)^2:
//    |eps'| <= 1.5 eps^2 + 0.5 |eps|^3 + (1 + |eps|) gamma_2 (1.5 - 0.5 (1 - |eps|)^2
//              + 0.5 (1 + |eps|)^2 (1 + gamma_2)).
//    If 0.5 a^ underflows (|error| <= eta), the product picks up a further relative
//    eta / (0.5 a^) per step, added with the factor (1 + |eps|)^3.
// 4. Total relative error (1 + rho)(1 + eps_k) - 1.
Bounded bounded_fast_rsqrt(const Bounded& a, int steps) {
  const double av = a.mag();
  if (!(a.v > 0) || !(av > a.e)) throw std::domain_error("bound: fast rsqrt of a value whose bound reaches zero");
  const double rho = round_up(std::sqrt(av / (av - a.e)) - 1.0 + 0x1p-52);
  double eps = round_up(1.5 * 0x1p-12);
  const double g2 = gamma_k(2, a.u);
  for (int i = 0; i < steps; ++i) {
    const double lo = 1 - eps, hi = 1 + eps;
    eps = round_up(1.5 * eps * eps + 0.5 * eps * eps * eps +
                   hi * g2 * ((1.5 - 0.5 * lo * lo) + 0.5 * hi * hi * (1 + g2)) +
                   hi * hi * hi * a.eta / (0.5 * (av - a.e)));  // 0.5 a^ underflowing
  }
  Bounded r = a;
  r.v = 1.0L / std::sqrt(a.v);
  const double rel = round_up((1 + rho) * (1 + eps) - 1);
  r.e = round_up(rel * r.mag() + 0x1p-62 * r.mag());
  return r;
}

}  // namespace foldcheck
