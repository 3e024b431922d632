#pragma once
// diagnose's calibrated band (DiagnoseBand in commands/diagnose.hpp): the per-channel common
// factor statistic of layer/channel_bias.hpp on an observed float32 conv (+ BatchNorm) output.
// Internal to commands.
//
// Why: the per-element bound holds for every order of every sum, so an honest float32 output
// sits at 0.004-0.007 of it (a padded 64-channel 3x3 conv + BatchNorm), and one channel's
// weights scaled by 1 + 5e-6 reaches only 0.04: a wrong channel hides under the bound. But that
// change is a common factor on all of the channel's outputs while rounding errors are not:
// rho = sum_i d_i r_i (d = observed - exact, r the channel's centred exact conv part over its
// sum of squares) is exactly 5e-6 for that channel, and 0.05 ppm rms for honest computations.
//
// Model: whatever computed the observation (a fold by any recipe, or the unfused conv ->
// BatchNorm, in any kernel order), its rho is the common error of the channel's multiplier
// (at most the allowance: the largest over the recipes' fold bounds and the unfused forms'
// 3.5 u: (var + eps), sqrt, 1/., * gamma, each u relative, halved under the sqrt), the
// folded weights' own roundings (s_fold, Azuma as channel_bias.hpp), and a drift of the
// accumulation that K honest computations measure (layer/honest_samples.hpp: every recipe's
// fold and the unfused layer in both BatchNorm forms, in the layer's order, blocked, pairwise,
// permuted; each one's fold part removed with its own weights). Taking the observation's drift
// as one more Gaussian draw like theirs, the band
//   allowance + s_fold sqrt(2 ln(2/alpha)) + t_K(1 - alpha/2) rms_m(rho_m)
// is crossed by an honest observation with probability at most alpha per channel (C alpha for
// the layer, Bonferroni). No deterministic threshold is claimed: an unfused computation's
// per-output roundings of the BatchNorm follow the sum, outside channel_bias.hpp's model.
// Computed for float32 outputs of a conv in float32 arithmetic summed directly (direct or
// split-K); otherwise `not_computed` says why.
#include <optional>

#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/diagnosis/hypotheses.hpp"

namespace foldcheck {

inline constexpr std::size_t kBandSamples = 16;
inline constexpr double kBandAlpha = 1e-6;

// g: the conv's geometry (none: a BatchNorm alone); overflow: an exact value past the range.
DiagnoseBand diagnose_band(const DiagnoseInput& in, const std::optional<ref::ConvGeometry>& g,
                           const diagnosis::Layer& L, const diagnosis::AffineModel& given, bool overflow);

}  // namespace foldcheck
