#pragma once
// The weight-level diagnosis of a fused conv that is not the fold of its conv and BatchNorm:
// which slip of the hypothesis catalogue (hypotheses.hpp: another eps, recovered from the
// folded weights; the variance read as the standard deviation or squared; the square root left
// out) every folded weight is, else which channels changed and how; for a fold whose weights
// are right, how its bias is wrong (missing, off in every channel, off in some).
//
// It names a cause; it decides no verdict. The caller has one (explain and check_fold, each
// recipe's bound) and asks for the cause of a failure. Its user is the Python module
// (foldcheck.testing's assert_fold_close, through foldcheck._core.diagnose_fold_*).
//
// The bound of a slip (fold_fits): a fold under the model h computes w' = w * a[ch] for each
// weight, a = gamma / sqrt(var + eps) or the slip's variant, in an arithmetic whose unit
// roundoff is at most the dtype's, us (the dtype itself, as PyTorch folds a .half() module, or
// wider): at most 3 roundings for the scale (add, sqrt, divide; 5 with a reciprocal square root
// refined by a Newton step), one for the product, one for the storage in the dtype, so within
// 8 roundings of w * a: |w' - w a| <= gamma_8(us) |w a| + 8 eta (eta: the dtype's underflow
// bound, each rounding that lands among the subnormals). The bias b' = (b - mean) * a + beta is
// a sum of three products evaluated by at most 8 roundings, each relative to a partial sum
// whose magnitude is at most the sum of the terms' magnitudes: |b' - exact| <= gamma_8(us)
// (|b a| + |mean a| + |beta|) + 8 eta (Higham, Accuracy and Stability, 3.1). The catalogue's
// scale is computed in long double (64-bit significand): its own error is 2^-40 of us for
// float32, inside the bound's rounding up.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/diagnosis/hypotheses.hpp"

namespace foldcheck::diagnosis {

// A conv, its BatchNorm and the fused conv (channel-major weights, values of dtype).
struct FoldedConv {
  DType dtype = DType::Float32;
  std::int64_t channels = 1, per_channel = 1;
  std::vector<double> weight, observed_weight;
  std::vector<double> bias, observed_bias;  // empty: none (zero)
  ref::BnParams bn;                         // per channel
};

// One channel beyond its bound: a few elements changed (the worst shown), or the whole channel
// by a common factor 1 + d (d the median relative change, in ppm). d is the median of
// (w' - exact) / exact, signed by the exact value: w' = exact (1 + d) gives d for a weight of
// either sign, so d > 0 says the channel grew and d < 0 that it shrank. (Dividing by |exact|, as
// a per-element ppm does, would give -d for the negative weights, and the median of a channel of
// mixed signs would take either sign.)
struct ChannelChange {
  std::int64_t channel = 0, elements = 0, beyond = 0, nonfinite = 0;
  std::int64_t worst = -1;  // flat index of its worst element (few changed)
  double observed = 0, exact = 0;
  std::optional<double> ppm;  // many changed: the median of (w' - exact) / exact * 1e6 (NaN: no nonzero exact)
  std::string text() const;   // "channel 7 +20 ppm", "channel 3: 1 of 9 weights (element 4: ..., exact ...)"
};

struct WeightDiagnosis {
  std::int64_t worst = -1;  // flat index of the largest ratio to its bound (NaN: beyond every bound)
  double worst_ratio = 0;
  std::vector<std::int64_t> channels_beyond;  // channels with an element beyond its bound
  std::optional<AffineModel> slip;            // the catalogue's model every folded weight fits (fold_fits)
  std::vector<ChannelChange> shown;           // the first 5 channels beyond, when no slip explains them
  std::string cause;  // the sentence: the slip and its fix, or the channels and what changes one
};

// ratio: each folded weight's distance to the exact fold over its bound (explain's cited
// recipe's; NaN counts as beyond); exact: the exact fold (to double), for the channels shown.
WeightDiagnosis diagnose_weights(const FoldedConv& f, const std::vector<double>& ratio,
                                 const std::vector<double>& exact);

struct BiasDiagnosis {
  std::vector<std::int64_t> off;  // channels whose folded bias is beyond the fold chain's bound
  bool missing = false;           // zero in every channel, the exact fold is not
  std::string cause;
};

BiasDiagnosis diagnose_bias(const FoldedConv& f);

// Whether every folded weight is within the bound above of w * h.a[channel].
bool fold_fits(const AffineModel& h, const FoldedConv& f);
// The slips tried, in this order: another eps (recovered from the folded weights, snapped to a
// framework default when that fits too; only when it differs from the BatchNorm's), then
// variance_misuses.
std::vector<AffineModel> fold_slips(const FoldedConv& f);
// The first slip that fits when the layer as given does not (nullopt otherwise).
std::optional<AffineModel> fold_slip(const FoldedConv& f);
// What a slip means for a fold, and its fix (the sentence of the cause).
std::string slip_sentence(const AffineModel& h);

}  // namespace foldcheck::diagnosis
