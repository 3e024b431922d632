// Symmetric integer quantization (quantize.hpp).
#include "foldcheck/numerics/quantize.hpp"

#include <algorithm>
#include <cmath>

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

QuantRounding quant_rounding_from_name(const std::string& n) {
  if (n == "half_even") return QuantRounding::HalfEven;
  if (n == "half_away") return QuantRounding::HalfAway;
  throw InputError("unknown rounding '" + n + "' (expected half_even or half_away)");
}

const char* name(QuantRounding r) { return r == QuantRounding::HalfEven ? "half_even" : "half_away"; }

std::vector<double> quant_scales(const std::vector<double>& x, std::int64_t per_channel, const QuantSpec& q) {
  const std::size_t per = q.per_channel ? static_cast<std::size_t>(per_channel) : x.size();
  std::vector<double> s;
  for (std::size_t b = 0; b < x.size(); b += per) {
    double m = 0;
    for (std::size_t i = b; i < std::min(x.size(), b + per); ++i) m = std::max(m, std::fabs(x[i]));
    const double raw = m / static_cast<double>(q.qmax());
    s.push_back(m == 0 ? 1.0 : q.pow2 ? std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(raw)))) : raw);
  }
  return s;
}

namespace {

std::int64_t clamp_q(double v, const QuantSpec& q) {
  return static_cast<std::int64_t>(std::clamp(v, -static_cast<double>(q.qmax()), static_cast<double>(q.qmax())));
}

}  // namespace

std::int64_t quantize_value(double v, double s, const QuantSpec& q) {
  const double y = v / s;
  return clamp_q(q.rounding == QuantRounding::HalfEven ? std::nearbyint(y) : std::round(y), q);
}

ExactQuant quantize_exact(const ref::DoubleDouble& x, double s, const QuantSpec& q) {
  // y = x / s as a double-double: exact for a power of two; otherwise the quotient of hi,
  // its exact remainder (fma) and lo give y to ~2^-104 relative.
  const double yh = x.hi / s;
  const double yl = (std::fma(-yh, s, x.hi) + x.lo) / s;
  const double f = std::floor(yh);
  // d = y - (f + 1/2): (yh - f) - 1/2 is exact (|yh| < 2^52), one rounding adds yl, which
  // keeps the sign of the true d.
  const double d = ((yh - f) - 0.5) + yl;
  double r;
  if (d > 0) r = f + 1;
  else if (d < 0) r = f;
  else if (q.rounding == QuantRounding::HalfEven) r = std::fmod(f, 2.0) == 0 ? f : f + 1;
  else r = yh > 0 ? f + 1 : f;
  ExactQuant e;
  e.q = clamp_q(r, q);
  e.offset = (yh - r) + yl;
  e.tie_distance = std::min({std::fabs(d), std::fabs(d + 1), std::fabs(d - 1)});
  return e;
}

}  // namespace foldcheck
