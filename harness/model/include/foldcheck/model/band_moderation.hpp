#pragma once
// The honest variance of a unit's directions, moderated (output_band.cpp's band).
//
// Contract: s2[d] is direction d's mean square over K honest runs (the runs' projections are
// mean-zero draws: s2 ~ var_d chi^2_K / K), size2[d] its size |J v_d|^2 estimated from the
// probes, pooled[d] whether d is one of the unit's channels (its eps direction is not: it moves
// every channel, another kind of direction). Returns, per direction, a variance and the degrees
// of freedom of the Student t its band uses; the same for any thread count (no threads).
//
// Why: with K = 16 the band's t_K quantile at alpha / D (D ~ 4,800 directions on ResNet-18,
// ~17,000 on MobileNetV2) is 8.6-9.5, 1.6x the normal one (5.3-5.5), because each direction's
// variance rests on 16 draws. The honest
// rounding noise of one layer's channels is close to isotropic in output space (measured on
// ResNet-18: var_d / |J v_d|^2 within ~20% across a layer), so the layer's other channels say
// what var_d is before its own runs do: var_d ~ sigma_L^2 |J v_d|^2, sigma_L^2 =
// sum_d s2_d / sum_d size2_d. How far to trust that prior is estimated from the data, as
// limma does (Smyth 2004, "Linear models and empirical Bayes methods...", section 6.2): the
// log ratios e_d = log(s2_d / prior_d) have variance trigamma(K/2) from the runs plus whatever
// the prior misses (probe noise, departures from isotropy); that excess, read as the spread of
// a scaled inverse chi^2 with d0 degrees of freedom (trigamma(d0/2) = excess), gives
//   var_d = (d0 s0_d^2 + K s2_d) / (d0 + K),   s0_d^2 = prior_d exp(mean e + digamma(d0/2) - log(d0/2)),
// a t with K + d0 degrees of freedom. A layer whose ratios spread no more than the runs' alone
// would give d0 = infinity; d0 is capped at n - 1 for n pooled channels: the prior's scale
// and its spread rest on n channels, and with a larger cap small layers (n = 8, 16) crossed
// their bands 1.2-1.4x as often as stated (a layer whose ratios spread little by chance looks
// like a perfect prior); with it, simulated layers of 8 to 512 channels, isotropic or 20%
// off, cross at 0.9-1.1x the stated rate (test_band_moderation: 8 and 64), and the band is 0.75-0.83x
// as wide as t_K on the own runs at ResNet-18's alpha_d. Fewer than kMinPooled pooled
// channels, and the eps direction: d0 = 0 (the direction's own K runs, t_K: the band as
// without moderation).
#include <cstddef>
#include <vector>

namespace foldcheck {

// Fewer pooled channels keep their own runs: with 3-5 the layer's scale rests on too few
// ratios (simulated: 1.08-1.17x the stated rate at alpha = 1e-2), from 8 within 1.04x.
inline constexpr std::size_t kMinPooled = 8;

struct ModeratedVariance {
  std::vector<double> var;  // per direction
  std::vector<double> dof;  // per direction: K + d0 (K for the unpooled)
};

ModeratedVariance moderate_variance(const std::vector<double>& s2, const std::vector<double>& size2,
                                    const std::vector<bool>& pooled, std::size_t K);

}  // namespace foldcheck
