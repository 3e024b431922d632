// The moderated honest variance of the model band (model/band_moderation.hpp), on simulated
// layers of the kind it assumes and of the kinds that break it:
// - directions whose honest variance is sigma_L^2 |J v_d|^2 (isotropic) or that times a 20%
//   log-normal factor (measured on ResNet-18), their sizes from 16 probes: an honest
//   observation crosses t_nu(1 - alpha/2) sqrt(var) at the stated rate alpha, in layers of 8 and
//   of 64 channels, and the band is narrower than t_K on the direction's own runs;
// - what is not pooled (the eps direction, a layer of fewer than 3 channels, a direction no
//   probe moves) keeps its own mean square and K degrees of freedom.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <boost/math/distributions/students_t.hpp>

#include "foldcheck/model/band_moderation.hpp"

using namespace foldcheck;

namespace {

constexpr std::size_t K = 16, R = 16;

double t_quantile(double dof, double alpha) {
  return boost::math::quantile(boost::math::complement(boost::math::students_t(dof), alpha / 2));
}

// Mean of `n` squared standard normal draws times `scale`: scale chi^2_n / n.
double chi2_mean(std::mt19937_64& rng, std::size_t n, double scale) {
  std::normal_distribution<double> nd;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::pow(nd(rng), 2);
  return scale * s / static_cast<double>(n);
}

struct Rates {
  double at_1e2 = 0, at_1e3 = 0;  // crossings / (directions * alpha)
  double width = 0;               // median band width against t_K on the own runs, alpha 1e-7
};

// `directions` honest directions in layers of C channels, honest variance off isotropy by a
// log-normal factor of sigma `aniso`.
Rates simulate(std::size_t C, double aniso, std::size_t directions, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> u(-5, 5);
  std::size_t cross2 = 0, cross3 = 0, n = 0;
  std::vector<double> widths;
  for (std::size_t layer = 0; layer * C < directions; ++layer) {
    const double sigma2 = std::exp(2 * u(rng));
    std::vector<double> var(C), s2(C), size2(C);
    for (std::size_t d = 0; d < C; ++d) {
      const double size = std::exp(u(rng));
      var[d] = sigma2 * size * std::exp(aniso * nd(rng));
      s2[d] = chi2_mean(rng, K, var[d]);
      size2[d] = chi2_mean(rng, R, size);
    }
    const ModeratedVariance mv = moderate_variance(s2, size2, std::vector<bool>(C, true), K);
    const double q2 = t_quantile(mv.dof[0], 1e-2), q3 = t_quantile(mv.dof[0], 1e-3);
    const double w = t_quantile(mv.dof[0], 1e-7) / t_quantile(K, 1e-7);
    for (std::size_t d = 0; d < C; ++d) {
      const double n0 = std::fabs(std::sqrt(var[d]) * nd(rng)), sd = std::sqrt(mv.var[d]);
      cross2 += n0 > q2 * sd, cross3 += n0 > q3 * sd, ++n;
      widths.push_back(w * sd / std::sqrt(s2[d]));
    }
  }
  std::nth_element(widths.begin(), widths.begin() + static_cast<std::ptrdiff_t>(widths.size() / 2), widths.end());
  const double N = static_cast<double>(n);
  return {static_cast<double>(cross2) / (N * 1e-2), static_cast<double>(cross3) / (N * 1e-3),
          widths[widths.size() / 2]};
}

}  // namespace

TEST_CASE("band moderation: honest directions cross the moderated band at the stated rate, and it is narrower",
          "[output_band]") {
  // 120,000 directions: at alpha = 1e-3, 120 crossings expected (3 sigma: +-33); at 1e-2, 1,200 (+-104).
  for (const std::size_t C : {8, 64}) {
    for (const double aniso : {0.0, 0.2}) {
      const Rates r = simulate(C, aniso, 120000, 7 + C);
      INFO("channels " << C << ", off isotropy " << aniso);
      CHECK(r.at_1e2 > 0.85);
      CHECK(r.at_1e2 < 1.15);
      CHECK(r.at_1e3 > 0.7);
      CHECK(r.at_1e3 < 1.3);
      CHECK(r.width < 0.9);
    }
  }
}

TEST_CASE("band moderation: the eps direction, small layers and unmoved directions keep their own runs",
          "[output_band]") {
  // kMinPooled channels of one isotropic scale (s2 = size2), then an eps direction and a
  // direction no probe moves.
  const std::size_t n = kMinPooled;
  std::vector<double> s2(n + 2), size2(n + 2);
  std::vector<bool> pooled(n + 2, true);
  for (std::size_t d = 0; d < n; ++d) s2[d] = size2[d] = 1.0 + static_cast<double>(d);
  s2[n] = 4, size2[n] = 4, pooled[n] = false;  // eps
  s2[n + 1] = 5, size2[n + 1] = 0;             // unmoved
  SECTION("eps (not pooled) and a direction no probe moves") {
    const ModeratedVariance mv = moderate_variance(s2, size2, pooled, K);
    CHECK(mv.var[n] == 4);
    CHECK(mv.dof[n] == K);
    CHECK(mv.var[n + 1] == 5);
    CHECK(mv.dof[n + 1] == K);
    // Ratios that spread no more than the runs' alone: the prior's freedom at its cap, n - 1.
    CHECK(mv.dof[0] == Approx(K + static_cast<double>(n - 1)));
  }
  SECTION("fewer than kMinPooled pooled channels") {
    pooled[0] = false;
    const ModeratedVariance mv = moderate_variance(s2, size2, pooled, K);
    CHECK(mv.var == s2);
    CHECK(mv.dof == std::vector<double>(n + 2, K));
  }
}
