#include "foldcheck/numerics/compare.hpp"

#include <algorithm>
#include <cmath>

namespace foldcheck {

double ulp_error(double v, const ref::DoubleDouble& x, DType t) {
  const long double d = (static_cast<long double>(v) - x.hi) - x.lo;
  return static_cast<double>(d / ulp(t, x.hi, x.lo));
}

long double distance(double v, const ref::DoubleDouble& x) {
  return std::fabs((static_cast<long double>(v) - x.hi) - x.lo);
}

double bound_ratio(long double d, double bound) {
  const double b = bound * (1 + 0x1p-40);
  return b > 0 ? static_cast<double>(d / b) : (d == 0 ? 0.0 : HUGE_VAL);
}

namespace {

// The 0-based index of the nearest-rank q-percentile of n values.
std::size_t rank_index(std::size_t n, double q) {
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  return std::min(n - 1, rank == 0 ? 0 : rank - 1);
}

// Nearest-rank percentiles at increasing q (p50, p99, p99.9): the values a full sort would
// put at those ranks, found by selection, highest first (linear time; models have millions
// of elements). After nth_element at index i, v[0..i] are the i + 1 smallest values, so a
// lower rank is selected within them alone. Reorders v.
void percentiles(std::vector<double>& v, const double (&q)[3], double* (&out)[3]) {
  if (v.empty()) return;
  std::size_t end = v.size();
  for (int k = 2; k >= 0; --k) {
    const std::size_t i = rank_index(v.size(), q[k]);  // i < end: the ranks do not increase
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(end));
    *out[k] = v[i];
    end = i + 1;
  }
}

Distribution summarize(std::vector<double> signed_vals) {
  Distribution d;
  d.count = static_cast<std::int64_t>(signed_vals.size());
  if (signed_vals.empty()) return d;
  double sa = 0, s = 0, s2 = 0;
  for (double e : signed_vals) {
    sa += std::fabs(e);
    s += e;
    s2 += e * e;
  }
  const double n = static_cast<double>(signed_vals.size());
  d.mean_abs = sa / n;
  d.mean = s / n;
  d.rms = std::sqrt(s2 / n);
  for (double& e : signed_vals) e = std::fabs(e);
  d.max_abs = *std::max_element(signed_vals.begin(), signed_vals.end());
  double* out[3] = {&d.p50, &d.p99, &d.p999};
  percentiles(signed_vals, {0.50, 0.99, 0.999}, out);
  return d;
}

// A NaN reference (possible only from a file: approximate_values) has no error in ULP:
// counted, a NaN value matching it, anything else UNEXPECTED. True when the reference is NaN.
inline bool count_nan_reference(Comparison& c, double v, double xh) {
  if (!std::isnan(xh)) return false;
  if (std::isnan(v)) ++c.kinds.nan_match;
  else ++c.kinds.reference_nan;
  return true;
}

// A NaN value, or an infinity on either side: counted, not scored (true when so); UNEXPECTED
// unless an infinite value is what the reference rounds to.
inline bool count_unscored(Comparison& c, double v, double xh, double rounded) {
  if (std::isnan(v)) {
    ++c.kinds.nan;
    return true;
  }
  if (!std::isinf(v) && !std::isinf(xh)) return false;
  if (v == rounded) ++c.kinds.overflow_match;
  else if (std::isinf(v)) ++c.kinds.inf_mismatch;
  else ++c.kinds.inf_missed;
  return true;
}

// The kinds a scored element is also counted as: a zero of the other sign, a subnormal
// reference, a finite reference that overflows T.
inline void count_scored_kinds(Comparison& c, double v, double xh, double rounded, double min_normal) {
  if (v == 0.0 && xh == 0.0 && std::signbit(v) != std::signbit(xh)) ++c.kinds.signed_zero;
  if (xh != 0.0 && std::fabs(xh) < min_normal) ++c.kinds.subnormal_reference;
  if (std::isinf(rounded)) ++c.kinds.overflow_finite;
}

// Element i's error in ULP: its histogram, exact matches and the worst element so far.
inline void score_ulp(Comparison& c, std::vector<double>& ulps, double& worst_abs_ulp, std::size_t i, double v,
                      const ref::DoubleDouble& x, double rounded, DType t) {
  const double e = ulp_error(v, x, t);
  ulps.push_back(e);
  c.ulp_hist.add(e);
  if (v == rounded) ++c.exact_matches;
  if (std::fabs(e) > worst_abs_ulp) {
    worst_abs_ulp = std::fabs(e);
    c.worst_index = static_cast<std::int64_t>(i);
  }
}

// The element's relative error in ppm (undefined, and counted so, when the reference is 0).
inline void score_ppm(Comparison& c, std::vector<double>& ppms, double v, const ref::DoubleDouble& x) {
  if (x.hi == 0.0) {
    ++c.kinds.ppm_undefined;
    return;
  }
  const long double signed_d = (static_cast<long double>(v) - x.hi) - x.lo;
  const double ppm = static_cast<double>(1e6L * signed_d / std::fabs(static_cast<long double>(x.hi) + x.lo));
  ppms.push_back(ppm);
  c.ppm_hist.add(ppm);
}

// Distance d of element i against its deterministic bound: the worst ratio, UNEXPECTED beyond it.
inline void check_bound(Comparison& c, double v, long double d, double bound, std::size_t i, const ref::DoubleDouble& x,
                        DType t) {
  const double ratio = bound_ratio(d, bound);
  const bool below = v < x.hi || (v == x.hi && x.lo > 0);  // v - x < 0
  c.bound_hist->add(below ? -ratio : ratio);
  if (!c.worst_bound_ratio || ratio > *c.worst_bound_ratio) {
    c.worst_bound_ratio = ratio;
    c.worst_bound_index = static_cast<std::int64_t>(i);
    c.worst_bound_ulp = bound / ulp(t, x.hi, x.lo);
  }
  if (ratio > 1) ++c.beyond_bound;
}

// Distance d against the element's probabilistic bound: the worst ratio, and a count beyond it.
inline void check_probabilistic(Comparison& c, long double d, double bound) {
  const double ratio = bound_ratio(d, bound);
  if (!c.worst_probabilistic_ratio || ratio > *c.worst_probabilistic_ratio) c.worst_probabilistic_ratio = ratio;
  if (ratio > 1) ++c.beyond_probabilistic;
}

}  // namespace

Comparison compare(const std::vector<double>& v, const ref::ValueArray& x, DType t,
                   const std::vector<double>* bounds, const std::vector<double>* probabilistic) {
  Comparison c;
  c.elements = static_cast<std::int64_t>(v.size());
  std::vector<double> ulps, ppms;
  ulps.reserve(v.size());
  ppms.reserve(v.size());
  const ref::Format& f = *info(t).format;
  // Informative: an element whose exact value rounds to a finite non-zero value of T and
  // was scored. Zeros, underflows to zero and overflows to infinity match whatever scale or
  // shift produced them: a comparison with no informative element proved nothing.
  bool informative = false;
  double worst_abs_ulp = -1;
  const double min_normal = std::ldexp(1.0, info(t).emin);
  if (bounds) c.bound_hist = Histogram::for_bound_ratio();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ref::Value xi = x[i];
    const double xh = xi.approx.hi;
    if (count_nan_reference(c, v[i], xh)) continue;
    const double rounded = std::isinf(xh) ? xh : xi.rounded_to(f);
    if (count_unscored(c, v[i], xh, rounded)) continue;
    count_scored_kinds(c, v[i], xh, rounded, min_normal);
    if (rounded != 0.0 && std::isfinite(rounded)) informative = true;
    score_ulp(c, ulps, worst_abs_ulp, i, v[i], xi.approx, rounded, t);
    const long double d = distance(v[i], xi.approx);
    score_ppm(c, ppms, v[i], xi.approx);
    if (bounds) check_bound(c, v[i], d, (*bounds)[i], i, xi.approx, t);
    if (bounds && c.worst_index == static_cast<std::int64_t>(i))
      c.bound_ulp_at_max_ulp = (*bounds)[i] / ulp(t, xi.approx.hi, xi.approx.lo);
    if (probabilistic) check_probabilistic(c, d, (*probabilistic)[i]);
  }
  c.ulp = summarize(std::move(ulps));
  c.ppm = summarize(std::move(ppms));
  // UNEXPECTED: a NaN or spurious infinity (the kinds counted so), or an element beyond its bound.
  const KindCounts& k = c.kinds;
  const bool failed = k.nan + k.reference_nan + k.inf_mismatch + k.inf_missed + c.beyond_bound > 0;
  c.verdict =
      judgement::of_check({.failed = failed, .suspicious = c.beyond_probabilistic > 0, .informative = informative});
  return c;
}

Tolerance tolerance_from_bounds(const std::vector<double>& bounds, const ref::ValueArray& x) {
  Tolerance t;
  std::vector<double> rel;
  rel.reserve(bounds.size());
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    const double ax = std::fabs(x[i].approx.hi);
    t.atol_alone = std::max(t.atol_alone, bounds[i]);
    const double r = ax > 0 ? bounds[i] / ax : HUGE_VAL;
    t.rtol_alone = std::max(t.rtol_alone, r);
    if (ax > 0) rel.push_back(r);
  }
  if (!rel.empty()) {
    std::nth_element(rel.begin(), rel.begin() + rel.size() / 2, rel.end());
    t.rtol = rel[rel.size() / 2];
  }
  for (std::size_t i = 0; i < bounds.size(); ++i)
    t.atol = std::max(t.atol, bounds[i] - t.rtol * std::fabs(x[i].approx.hi));
  return t;
}

nlohmann::json to_json(const Tolerance& t) {
  return {{"atol_alone", t.atol_alone},
          {"rtol_alone", std::isinf(t.rtol_alone) ? nlohmann::json(nullptr) : nlohmann::json(t.rtol_alone)},
          {"rtol", t.rtol},
          {"atol", t.atol},
          {"derivation", "from the deterministic bound: rtol = median of bound/|exact|, atol = max(bound - rtol |exact|)"}};
}

std::int64_t KindCounts::unscored() const {
  return nan + nan_match + reference_nan + inf_mismatch + inf_missed + overflow_match;
}

nlohmann::json to_json(const KindCounts& k) {
  return {{"nan", k.nan},
          {"nan_match", k.nan_match},
          {"reference_nan", k.reference_nan},
          {"inf_mismatch", k.inf_mismatch},
          {"inf_missed", k.inf_missed},
          {"overflow_match", k.overflow_match},
          {"overflow_finite", k.overflow_finite},
          {"signed_zero", k.signed_zero},
          {"subnormal_reference", k.subnormal_reference},
          {"ppm_undefined", k.ppm_undefined}};
}

nlohmann::json to_json(const Distribution& d) {
  return {{"count", d.count}, {"max_abs", d.max_abs}, {"mean_abs", d.mean_abs}, {"mean", d.mean},
          {"rms", d.rms},     {"p50", d.p50},         {"p99", d.p99},           {"p99_9", d.p999}};
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j{{"verdict", name(c.verdict)},
                   {"elements", c.elements},
                   {"exact_matches", c.exact_matches},
                   {"ulp", to_json(c.ulp)},
                   {"ppm", to_json(c.ppm)},
                   {"kinds", to_json(c.kinds)},
                   {"worst_index", c.worst_index},
                   {"histograms", {{"ulp", to_json(c.ulp_hist)}, {"ppm", to_json(c.ppm_hist)}}}};
  // Elements outside a histogram are listed beside it, by kind: nothing is dropped silently.
  const nlohmann::json unscored{{"nan", c.kinds.nan},
                                {"nan_match", c.kinds.nan_match},
                                {"reference_nan", c.kinds.reference_nan},
                                {"inf_mismatch", c.kinds.inf_mismatch},
                                {"inf_missed", c.kinds.inf_missed},
                                {"overflow_match", c.kinds.overflow_match}};
  j["histograms"]["ulp"]["unscored"] = unscored;
  j["histograms"]["ppm"]["unscored"] = unscored;
  j["histograms"]["ppm"]["unscored"]["ppm_undefined"] = c.kinds.ppm_undefined;
  if (c.bound_hist) {
    j["histograms"]["bound"] = to_json(*c.bound_hist);
    j["histograms"]["bound"]["scale"] = "log2 of |error| / the element's bound";
    j["histograms"]["bound"]["unscored"] = unscored;
  }
  if (c.worst_bound_ratio) {
    j["bound_check"] = {{"worst_ratio", *c.worst_bound_ratio},
                        {"worst_index", c.worst_bound_index},
                        {"bound_ulp_at_worst", c.worst_bound_ulp},
                        {"bound_ulp_at_max_ulp", c.bound_ulp_at_max_ulp},
                        {"beyond_bound", c.beyond_bound}};
  }
  if (c.worst_probabilistic_ratio) {
    j["probabilistic_check"] = {{"worst_ratio", *c.worst_probabilistic_ratio}, {"beyond", c.beyond_probabilistic}};
  }
  return j;
}

ref::ValueArray approximate_values(const std::vector<double>& x, DType t) {
  const ref::Format& f = *info(t).format;
  ref::ValueArray v(x.size(), ref::format_bit(f));
  for (std::size_t i = 0; i < x.size(); ++i) {
    ref::Value e;
    e.approx = {x[i], 0.0};
    e.rounded[ref::format_index(f)] = round_to(t, x[i]);
    e.certified = ref::format_bit(f);
    v.set(i, e);
  }
  return v;
}

}  // namespace foldcheck
