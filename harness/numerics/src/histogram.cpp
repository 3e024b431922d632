#include "foldcheck/numerics/histogram.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace foldcheck {
namespace {
Histogram make(const char* unit, int lo, int hi) {
  Histogram h;
  h.unit = unit;
  h.lo = lo;
  h.hi = hi;
  h.neg.assign(static_cast<std::size_t>(hi - lo + 2), 0);
  h.pos = h.neg;
  return h;
}
// An edge as a number; a ratio histogram's edges below 1 as powers of two ("2^-12"), which
// stay short where decimals would not.
std::string edge(double x, const std::string& unit) {
  if (unit == "bound" && x < 1) return fmt::format("2^{}", std::ilogb(x));
  return fmt::format("{:g}", x);
}
}  // namespace

Histogram Histogram::for_ulp() { return make("ulp", -4, 24); }
Histogram Histogram::for_ppm() { return make("ppm", -10, 20); }
Histogram Histogram::for_bound_ratio() { return make("bound", -20, 10); }

void Histogram::add(double e) {
  if (std::isnan(e)) return;
  if (e == 0.0) {
    ++zero;
    return;
  }
  const double a = std::fabs(e);
  std::size_t i = buckets() - 1;  // an infinity: above every edge
  if (std::isfinite(a)) {
    // k: the smallest integer with a <= 2^k, exactly (a = m 2^x with 1/2 <= m < 1, subnormals
    // included); a <= 2^lo iff k <= lo, and a > 2^hi iff k > hi.
    int x;
    const double m = std::frexp(a, &x);
    const int k = (m == 0.5) ? x - 1 : x;
    i = k <= lo ? 0 : k > hi ? buckets() - 1 : static_cast<std::size_t>(k - lo);
  }
  (e < 0 ? neg : pos)[i]++;
}

double Histogram::upper_edge(std::size_t i) const {
  return i + 1 == buckets() ? std::numeric_limits<double>::infinity() : std::ldexp(1.0, lo + static_cast<int>(i));
}

std::string Histogram::label(std::size_t i) const {
  if (i == 0) return fmt::format("(0, {}]", edge(std::ldexp(1.0, lo), unit));
  if (i + 1 == buckets()) return fmt::format("> {}", edge(std::ldexp(1.0, hi), unit));
  return fmt::format("({}, {}]", edge(std::ldexp(1.0, lo + static_cast<int>(i) - 1), unit),
                     edge(std::ldexp(1.0, lo + static_cast<int>(i)), unit));
}

nlohmann::json to_json(const Histogram& h) {
  nlohmann::json buckets = nlohmann::json::array();
  for (std::size_t i = 0; i < h.buckets(); ++i) {
    if (h.neg[i] == 0 && h.pos[i] == 0) continue;
    nlohmann::json b{{"range", h.label(i)}, {"negative", h.neg[i]}, {"positive", h.pos[i]}};
    b["upper"] = std::isinf(h.upper_edge(i)) ? nlohmann::json(nullptr) : nlohmann::json(h.upper_edge(i));
    buckets.push_back(b);
  }
  return {{"unit", h.unit}, {"scale", "log2 of |error|"}, {"zero", h.zero}, {"buckets", buckets}};
}

}  // namespace foldcheck
