#pragma once
// diagnose's hypothesis catalogue: the layer (exact conv output), per-channel affine models
// of the BatchNorm (the layer as given and each common bug: another eps, training-mode
// statistics, the variance used as a standard deviation, a missing sqrt, ...), and their
// scores against an observation with the bound stated in commands/diagnose.hpp. Its user is
// `diagnose` (commands/src/diagnose.cpp), which ranks the scores and types the result.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck::diagnosis {

using ld = long double;

// What a fold of the BatchNorm into the conv, computed and stored in a 16-bit dtype, can
// change in the layer's output: one output channel's terms, bounds for the layer as given
// (its |a|, and the recipe chains of every fold recipe in every arithmetic an observed fold
// may use, from the fold pass's bounds: layer/fold_pass.hpp), taken channel by channel as
// the maximum over those recipes. The folded weights of the channel are
//   w'_j = w_j t_hat + eps_j,   t_hat = a + tau,   |tau| <= scale_err,
//   |eps_j| <= weight_err |w_j| (+ weight_eta where w_j t_hat may be subnormal in the dtype),
// tau the chain's error in the multiplier every weight of the channel shares (var + eps,
// rsqrt, times gamma), eps_j each weight's own rounding of w * t_hat to the dtype; the folded
// bias is within bias_err of (b - mean) a + beta. score() states the bound they enter.
struct FoldTerms {
  double a = 0;              // |a| of the layer as given
  double bias_given = 0;     // |a| (|b| + |mean|) + |beta| of the layer as given
  double scale_err = 0;      // |t_hat - a|
  double weight_err = 0;     // per unit |w|: a weight's own rounding
  double weight_eta = 0;     // absolute, per weight that may underflow
  double small_weights = 0;  // how many weights of the channel may underflow (nonzero, |w a| < 2 * min normal)
  double bias_err = 0;       // |b_hat' - b'| (with a separate shift: the conv's bias part)
  double bias_mag = 0;       // |b'| + bias_err: the bias the conv accumulates
  double shift_err = 0;      // TVM's separate shift (a conv bias kept apart): its error ...
  double shift_mag = -1;     // ... and |shift| + shift_err; < 0: no separate shift
};

// The exact conv output and what the bound needs, per element.
struct Layer {
  DType dtype = DType::Float32;
  std::int64_t C = 1, plane = 1, N = 1;  // output channels, H*W, batch
  std::vector<ld> c;                     // exact conv output (x for a BN alone)
  std::vector<double> A;                 // sum |x w| (empty for a BN alone)
  std::vector<double> bias;              // conv bias (empty: none)
  double k = 0;                          // accumulation roundings
  bool has_conv = false;
  // A 16-bit output (storage narrower than the arithmetic) of a conv: the fused path's terms
  // per channel, for folds kept in one conv and for TVM's with a separate shift (empty: none),
  // and max |x| (for weights that may underflow). Empty for float32/float64 outputs, whose
  // fold the unfused bound's gamma_{k+8}(u) already covers (score()).
  std::vector<FoldTerms> fold, fold_shift;
  double x_max = 0;
  // The conv's arithmetic (numerics/conv_arithmetic.hpp) when its operands were converted:
  // c and A are then the exact conv of the converted operands, summed in an accumulator of
  // unit roundoff u_acc (0: the dtype's arithmetic). extra: a per-element absolute error the
  // replay could not pin down (a fused replay's weights whose conversion a fold's rounding may
  // flip, and its folded bias; empty: none). operand_factor > 0: the general bound of an
  // operand conversion keeping some number of bits, per unit |a| A (score adds it).
  double u_acc = 0;
  // The accumulator's absolute error bound for a result in its subnormal range (0: the dtype's
  // arithmetic's): each of the k products and sums may lose up to it, k eta_acc in all.
  double eta_acc = 0;
  std::vector<double> extra;
  // An absolute error of the conv output beyond what its accumulation's gamma_k charges, times
  // |a| through the affine map (empty: none): an FFT conv's whole bound (a normwise bound per
  // output plane, layer/fft_bound.hpp; k = 0 then), or operand conversions' underflow in the
  // general bound (commands/src/diagnose_replay.hpp).
  std::vector<double> conv_err;
  double operand_factor = 0;
  // Activations stored in a 16-bit type (torch.autocast, an output given as its float32
  // values): the conv's output before the BatchNorm, |c^ - c| <= c_store_u |c| + c_store_eta
  // (times |a| through the affine map), and the output itself at that u (0: kept wide).
  double c_store_u = 0, c_store_eta = 0;
  // The accumulator's largest finite value when it is narrower than the output (fp16 sums:
  // 65504; 0: none). An element whose sum|x w| (1 + gamma_k) reaches it may overflow a partial
  // sum, which no rounding bound covers: not judged, as an exact value past the range.
  double acc_max = 0;
  std::size_t channel(std::size_t i, bool nhwc) const {
    return nhwc ? i % static_cast<std::size_t>(C) : (i / static_cast<std::size_t>(plane)) % static_cast<std::size_t>(C);
  }
};

// One model of the layer's output, y = (c - m[ch]) * a[ch] + beta[ch]: the layer as given, or
// a hypothesis of what went wrong (its name, what it assumes, and the fix it implies).
struct AffineModel {
  std::string name, description, fix;
  std::vector<ld> m, a, beta;  // per channel
  bool nhwc = false;
  bool batch_stats = false;
  // y = c exactly, no BatchNorm computed (a plain conv, or a fused replay whose c already is
  // the folded layer's output): no affine map's roundings are charged.
  bool identity = false;
  std::vector<double> mean_abs;  // batch-stat models: mean |c| per channel
  nlohmann::json params = nlohmann::json::object();
};

struct Score {
  double max_ratio = 0, max_abs_ulp = 0, rms_ulp = 0, p50 = 0, p99 = 0, max_abs_diff = 0;
  std::int64_t beyond = 0, nonfinite = 0, worst = -1;
  std::int64_t past_range = 0;   // elements not judged: an exact value past the dtype's range (overflow)
  std::int64_t first_past = -1;  // the first of those
  // nonfinite counts the elements no rounding or overflow gives: NaN or infinite where y is
  // finite, NaN or of the other sign where only y is past the range; the first of them (-1: none).
  std::int64_t first_nonfinite = -1;
  std::int64_t nonzero = 0;  // elements whose model value is not zero
  // The element of max |ULP|, its bound in ULP, and |a| (sum|x w| + |b|) / |y| there (how far
  // the sum cancelled; 0 for a BatchNorm alone).
  std::int64_t max_ulp_at = -1;
  double max_ulp_bound = 0, max_ulp_cancellation = 0;
  double bound_sum = 0;  // sum of the elements' bounds E judged: how wide the model's bound is
  bool expected() const { return nonfinite == 0 && beyond == 0; }
  // Within the bound, but every model value is zero (or there were none): nothing that a
  // wrong scale or shift would move was compared, so this is no evidence (MISTRUSTED).
  bool vacuous() const { return expected() && nonzero == 0; }
};

Score score(const AffineModel& h, const Layer& L, const std::vector<double>& obs);
// The layer as given: eval-mode BatchNorm with the running statistics.
AffineModel as_given(const ref::BnParams& bn);
// A layer without BatchNorm: y = c (the conv's output, its bias included), C channels.
AffineModel plain_conv(std::size_t C);
// BatchNorm computed with another eps (the layer as given otherwise); params: eps_recovered,
// eps_given.
AffineModel eps_mismatch(const ref::BnParams& bn, double eps);
// The variance misused: read as the standard deviation (std_passed_as_var), squared as if it
// were one (var_passed_as_std), the square root left out (missing_sqrt); in this order.
std::vector<AffineModel> variance_misuses(const ref::BnParams& bn);
// Every hypothesis about the BatchNorm and the bias that applies to this layer (best first is
// decided by the caller). Without a BatchNorm: only a dropped conv bias (when it has one).
std::vector<AffineModel> hypotheses(const std::optional<ref::BnParams>& bn, const Layer& L,
                                    const std::vector<double>& obs);

}  // namespace foldcheck::diagnosis
