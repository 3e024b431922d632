// The moderated honest variance of a unit's directions (band_moderation.hpp).
#include "foldcheck/model/band_moderation.hpp"

#include <cmath>

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>

namespace foldcheck {
namespace {

// x with trigamma(x) = y (y > 0), by bisection on log x: trigamma decreases from infinity to 0.
double trigamma_inverse(double y) {
  double lo = 1e-8, hi = 1e8;
  for (int i = 0; i < 200 && hi / lo > 1 + 1e-12; ++i) {
    const double mid = std::sqrt(lo * hi);
    (boost::math::trigamma(mid) > y ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

bool usable(double s2, double size2) { return std::isfinite(s2) && s2 > 0 && std::isfinite(size2) && size2 > 0; }

}  // namespace

ModeratedVariance moderate_variance(const std::vector<double>& s2, const std::vector<double>& size2,
                                    const std::vector<bool>& pooled, std::size_t K) {
  const double k = static_cast<double>(K);
  ModeratedVariance r{s2, std::vector<double>(s2.size(), k)};
  double sum_s2 = 0, sum_size2 = 0;
  std::size_t n = 0;
  for (std::size_t d = 0; d < s2.size(); ++d)
    if (pooled[d] && usable(s2[d], size2[d])) sum_s2 += s2[d], sum_size2 += size2[d], ++n;
  if (n < kMinPooled || K == 0) return r;
  const double sigma2 = sum_s2 / sum_size2;
  // e_d: log(s2_d / prior_d) less its expectation under the runs alone (E log(chi^2_K / K)).
  const double bias = boost::math::digamma(k / 2) - std::log(k / 2);
  double mean = 0, m2 = 0;
  std::size_t i = 0;
  for (std::size_t d = 0; d < s2.size(); ++d) {
    if (!pooled[d] || !usable(s2[d], size2[d])) continue;
    const double e = std::log(s2[d] / (sigma2 * size2[d])) - bias, delta = e - mean;
    mean += delta / static_cast<double>(++i);
    m2 += delta * (e - mean);
  }
  const double excess = m2 / static_cast<double>(n - 1) - boost::math::trigamma(k / 2);
  const double cap = static_cast<double>(n - 1);
  const double d0 = excess > 0 ? std::min(cap, 2 * trigamma_inverse(excess)) : cap;
  const double s0 = std::exp(mean + boost::math::digamma(d0 / 2) - std::log(d0 / 2));
  for (std::size_t d = 0; d < s2.size(); ++d) {
    if (!pooled[d] || !(size2[d] > 0) || !std::isfinite(size2[d])) continue;
    r.var[d] = (d0 * s0 * sigma2 * size2[d] + k * s2[d]) / (d0 + k);
    r.dof[d] = k + d0;
  }
  return r;
}

}  // namespace foldcheck
