#pragma once
// The calibrated band of a model's outputs (`accuracy-diff --observed-output`): what another
// engine's outputs can show beyond the end-to-end bound (output_bound.hpp), which is a
// probabilistic worst case 100-2,000x the honest error, blind to a 200 ppm change of one channel.
//
// Why: a bug of a fold is structured. One channel c of layer L scaled by (1 + rho) moves the
// outputs by rho J_L v (to first order), v = that channel's part of the layer's output without
// its bias (y - b'_c on channel c, 0 elsewhere) and J_L the network's derivative from the
// layer's output to the model's; an eps of L's BatchNorm changed by (1 + rho) moves them by rho
// J_L v_eps, v_eps = eps d y / d eps = -eps (y - beta_c) / (2 (var_c + eps)) on every channel.
// Along its own direction such a change stands out of rounding noise that, element by element,
// hides it: the projection n = <J_L v, e> = <v, J_L^T e> of the output error e.
//
// Statistic: one reverse pass (the ops' transposed derivatives, op_registry.hpp's Vjp, at the
// float64 run's values) takes e back to every layer's output, so n for every channel and
// every BatchNorm's eps costs one pass. The honest spread of n is MEASURED as diagnose's band
// measures a layer's (layer/channel_bias.hpp): K float32 runs of the model by foldcheck's own
// kernels (unfused in both BatchNorm forms and folded by each engine's recipe, two of them with
// TensorFlow's rsqrt; each conv summed
// sequentially with its input channels permuted per run, from the bias or adding it last; no
// blocked, pairwise or FMA sums: an engine whose kernels drift systematically otherwise is not
// in the sample) give n_k, and the band of a direction is
//   t_nu(1 - alpha_d / 2) s_d,
// s_d^2 the direction's honest variance: its own mean square over the K runs, moderated toward
// what the layer's other channels predict for it (model/band_moderation.hpp: honest noise is near
// isotropic within a layer, so var_d ~ sigma_L^2 |J v_d|^2), with nu = K + d0 degrees of freedom
// (d0 the prior's, estimated from the spread of the layer's ratios; 0 for the eps directions:
// t_K and their own runs). The observation's n is one more mean-zero Gaussian draw like theirs.
// alpha_d = alpha / D over the D directions (Bonferroni): an honest output crosses any band with
// probability at most alpha under that model (tested on held-out honest runs: test_output_band).
// Beyond it: SUSPICIOUS with the direction named; never UNEXPECTED (no rigorous claim).
// One systematic honest drift is taken out first, from the observed and the honest errors alike:
// every BatchNorm's scale shrunk in common, as a hardware rsqrt estimate refined by one Newton
// step leaves it (TensorFlow's BatchNorm and TFLite's fold: 0 to 0.2 ppm per channel, of one
// sign, so it adds up over a network's channels where unbiased rounding cancels). The error's
// least-squares multiple of that drift's output direction, within what the arithmetic can give,
// is subtracted before the reverse pass (output_band.cpp scale_drift; OutputBand::scale_drift).
// The change's size: |J v|^2 = E_r <r, J v>^2 for r standard normal in output space, estimated
// from R random probes through the same reverse pass (relative error ~sqrt(2/R)); rho = n /
// |J v|^2, and the smallest change the band sees in that direction is band / |J v|^2.
// Results do not depend on the thread count.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"

namespace foldcheck {

struct OutputBandOptions {
  std::size_t samples = 16;  // K honest float32 runs
  std::size_t probes = 16;   // R random output directions (the directions' sizes)
  double alpha = 1e-3;       // over every direction
  std::uint64_t seed = 0;
  unsigned threads = 0;
  std::function<void(const std::string&)> progress;
};

struct BandDirection {
  std::string layer;          // the layer (a pair's name, or an unpaired conv's)
  std::int64_t channel = -1;  // -1: its BatchNorm's eps (every channel)
  double n = 0, band = 0;     // the observed projection and its band
  double ratio = 0;           // |n| / band
  double rho = 0;             // n / |J v|^2: the relative change along the direction
  double floor = 0;           // band / |J v|^2: the smallest relative change the band sees there
};

struct OutputBand {
  std::optional<std::string> not_computed;  // why there is no band
  std::size_t samples = 0, probes = 0, directions = 0;
  double alpha = 0, alpha_direction = 0;  // alpha, alpha / D
  // The t's degrees of freedom over the directions (K + d0), and the widest quantile,
  // t_{dof_min}(1 - alpha_d / 2).
  double dof_min = 0, dof_max = 0, quantile = 0;
  std::size_t beyond_count = 0;
  // The first 16 beyond their bands: the named one first (name_first in output_band.cpp: of
  // those beyond, the one whose change alone explains most of the output's), then by ratio.
  std::vector<BandDirection> beyond;
  std::optional<BandDirection> worst;  // the named direction; within every band, the closest to it
  // The smallest one-channel change seen, over the channels of every layer: median and 90th
  // percentile of their floors (relative).
  double floor_median = 0, floor_p90 = 0;
  // The common drift of every BatchNorm's scale taken out of the observed output before the
  // band (relative, in [-2.012e-7, 0]: a hardware rsqrt estimate refined by one Newton step,
  // TensorFlow's; output_band.cpp scale_drift): fitted per input of a batch, their mean.
  double scale_drift = 0;
};

// x: the model's input (float32 values), or a batch of them (a multiple of the graph's fixed
// batch: run in chunks of it, each direction's projections summed over the chunks); reference:
// the unfused float64 run's single output; observed: the other engine's output, same size.
// Never throws for a model it cannot differentiate: not_computed says why.
OutputBand output_band(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                       const std::vector<double>& observed, const OutputBandOptions& opts);

// output_band in two steps, for several observed outputs of one model on one input (the
// engines command's engines): calibrate_band makes the honest side once — the K honest runs'
// and the R probes' projections on every direction —, judge_band takes one observed output
// through one reverse pass of its own. output_band(...) is judge_band(calibrate_band(...), ...)
// (the same figures); `m` and `pairs` must outlive the calibration.
struct BandHonest;  // output_band.cpp
struct BandCalibration {
  std::optional<std::string> not_computed;  // why no band (judge_band then says so)
  std::shared_ptr<const BandHonest> honest;
};
BandCalibration calibrate_band(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                               const OutputBandOptions& opts);
OutputBand judge_band(const BandCalibration& cal, const Model& m, const BnPatterns& pairs, const Tensor& x,
                      const Tensor& reference, const std::vector<double>& observed, const OutputBandOptions& opts);

// The band's numerators for one cotangent g of the model's output (the reverse pass alone, at
// the float64 run's values): <v_d, J_L^T g> = <J_L v_d, g> for every direction d (each unit's
// channels, then a pair's eps: channel -1), in the units' order. InputError for a model the
// pass cannot take. (The derivative's own test: tests/test_output_band.cpp.)
struct DirectionProjection {
  std::string layer;
  std::int64_t channel = -1;
  double value = 0;
};
std::vector<DirectionProjection> project_cotangent(const Model& m, const BnPatterns& pairs, const Tensor& x,
                                                   const std::vector<double>& g, unsigned threads);

}  // namespace foldcheck
