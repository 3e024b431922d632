#include "foldcheck/bounded.hpp"

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
