#pragma once
// `foldcheck diagnose`: is an observed conv+BN, plain conv or BN-alone output what the given
// layer computes, up to rounding, in the arithmetic it was computed in? If not, which common
// bug or which other arithmetic (TF32, bf16 or fp16 operands, fp16 accumulation) explains it?
//
// A plain conv (no BatchNorm) is the identity model y = c: its bound is the accumulation's
// alone, gamma_k(u_acc) (sum|x w| + |b|) + u_s (|y| + ...). Another arithmetic than float32
// (numerics/conv_arithmetic.hpp) is judged by replays (commands/src/diagnose_replay.hpp): the
// exact conv of the converted operands, each conversion and path tried, and the float32
// operands; the layer passes when one replay explains it, and the result names it.
//
// Contract: every model here — the layer as given and each hypothesis — is an affine map
// per channel of the exact conv output c (certified reference; c = x for a BN alone):
//   y = (c - m[ch]) * a[ch] + beta[ch],   ch = the element's channel (NCHW, or i mod C
//   for the NHWC hypothesis). Its float evaluation by any modelled path (unfused
// textbook or scale-shift BatchNorm, any fold recipe, with or without FMA) differs from
// the exact model by at most
//   E = gamma_{k+8} |a| (sum|x w| + |b|)            conv accumulation (k roundings) and
//                                                    the folded weights' <= 8 roundings
//     + gamma_8 (|a| (|c| + |m|) + |beta|)          the affine map: subtraction, a's own
//                                                    <= 5 roundings, multiply, add
//     + u_s (1 + gamma_8)(|a||c| + |a||m| + |beta| + |y|)   storing c and y in the dtype
//     + batch statistics' error (hypotheses that compute them: a pairwise-class or
//       double-accumulated mean and two-pass variance over M values per channel:
//       |d mean| <= gamma_L mean|c|, |d var|/var <= gamma_{L+3}, L = ceil(log2 M) + 1,
//       entering as |a| |d mean| + (1/2) gamma_{L+3} |a (c - m)|)
// with u the arithmetic's unit roundoff (float32 for float32/16/bf16 data) and u_s the
// storage dtype's. The fold's 8 roundings are at u only when the folded weights are stored
// as wide as the arithmetic (float32, float64). A float16/bfloat16 output of a conv may come
// from a fold computed and stored in the 16-bit dtype (PyTorch's fuse_conv_bn_eval on a
// .half() module rounds each of rv + eps, rsqrt, gamma * r, w * t and the bias chain to it):
// its E is the larger of the above and the fused path's bound (diagnosis/hypotheses.cpp
// fused_bound, per channel from the fold pass's bounds of every recipe in float32 and in the
// 16-bit arithmetic):
//   E_f = e_t |c - b| + e_w sum|x w| + e_b + gamma_k(u)((|a| + e_t + e_w) sum|x w| + |b'|)
//       + u_s (|y| + ...) [+ weights that may underflow; TVM's separate shift]
// e_t the error of the multiplier the channel's weights share, e_w each weight's own
// rounding (per unit |w|, at u_s), e_b the folded bias's; the conv accumulates in float32
// (measured: PyTorch CPU's 16-bit convs round once from a float32 sum). A model explains
// the observation when every element is within E (EXPECTED); the verdict of the layer as
// given is the top-level verdict.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/numerics/tensor.hpp"
#include "foldcheck/reference/certify.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {

// Exact convs already computed, shared by the copies of a DiagnoseInput (bisect judges many
// outputs of one layer: its exact conv and every replay's are computed once). Each entry is
// kept with its operands and matched on them exactly, never on a hash alone.
struct ExactConvCache;
std::shared_ptr<ExactConvCache> make_exact_conv_cache();

struct DiagnoseInput {
  Tensor x;                        // NCHW (or N x C)
  std::optional<ref::BnParams> bn;  // one value per channel of the BN's input; none: a plain conv
  bool eps_given = true;           // false: eps defaulted to 1e-5
  // BatchNorm parameters given nowhere ("beta 0", ...): said in the result.
  std::vector<std::string> bn_defaulted;
  ConvArithmetic arithmetic;       // the conv's arithmetic (float32: as given)
  ConvAlgorithm algorithm;         // how its sums are formed (direct, Winograd, split-K)
  std::optional<Tensor> weights;   // OIHW; none: the layer is the BatchNorm alone
  std::vector<double> conv_bias;   // empty: none
  Tensor observed;                 // the output to diagnose, same layout as the layer's output
  std::int64_t stride = 1, dilation = 1;
  std::optional<std::int64_t> padding;  // none: inferred from the shapes
  ref::Options ref;
  std::shared_ptr<ExactConvCache> exact_cache;  // none: each diagnose computes its own
};

// One model's fit to the observation (the layer as given, or a hypothesis).
struct ModelFit {
  std::string name, description, fix;   // a hypothesis' (empty for the layer as given)
  nlohmann::json parameters;            // a hypothesis' own parameters (e.g. the eps it assumes), or null
  bool expected = false, vacuous = false;  // every element within its bound; ... but every model value is 0
  // A hypothesis whose bound is too wide to identify a cause: its elements' bounds sum to more
  // than kLooseFactor times the layer's own (fp16 accumulation: gamma_k at u = 2^-11 covers a
  // change of a whole channel by a percent; Winograd's transforms; bf16x3). Listed, never the best.
  bool loose = false;
  double bound_sum = 0;
  // An arithmetic hypothesis: its place in all_conv_arithmetics (TF32 first, the most common
  // cause); -1 for the others. Two arithmetics that both explain an output (fp16 operands give
  // TF32's values wherever they are in fp16's normal range) are ranked by it, not by noise.
  int arithmetic_rank = -1;
  double max_ratio = 0;                 // max |observed - model| / bound (inf: a non-finite element)
  std::int64_t beyond = 0, nonfinite = 0;
  std::optional<std::size_t> first_nonfinite;  // the first of those (no rounding gives it)
  double first_nonfinite_value = 0;            // ... its observed value
  double max_abs_diff = 0, max_abs_ulp = 0, rms_ulp = 0, p50_ulp = 0, p99_ulp = 0;
  struct Worst {
    std::size_t index = 0;
    double observed = 0, model = 0;
  };
  std::optional<Worst> worst;
  // The element of max |ULP|, its own bound in ULP, and how cancelled it is (|y| against
  // sum|x w| |a|): a large |ULP| at a cancelled output is rounding, said so in the summary.
  std::optional<std::size_t> max_ulp_element;
  double max_ulp_bound = 0, max_ulp_cancellation = 0;
  Verdict verdict() const;
};

// A hypothesis whose bounds sum to more than this times the layer's only widens the bound (a
// Winograd tile, fp16 accumulation, bf16x3's 3k terms): an output just beyond the layer's own
// bound fits it whatever went wrong, so it cannot name a cause. TF32, bf16 and fp16 operands
// replay a different value under a bound of the layer's size (within 1.1x): they can.
inline constexpr double kLooseFactor = 2;

// One replay of the layer in the declared arithmetic (diagnose_replay.hpp) and its fit.
struct ReplayFit {
  std::string name;
  bool expected = false, informative = true;  // within its bound; not every model value zero
  double max_ratio = 0;
};

// The calibrated band beside the rigorous bound (commands/src/diagnose_band.hpp states the
// statistic): per output channel, the common relative change rho of its outputs (a fold's or a
// kernel's bug scales a whole channel; rounding does not), against the band that K honest
// computations of the layer (every fold recipe and the unfused layer, in the kernel orders real
// engines use) reach: allowance + s_fold z + t_K(1 - alpha/2) rms(honest rho). Beyond it:
// SUSPICIOUS at the stated false-alarm probability alpha per channel.
struct DiagnoseBand {
  std::optional<std::string> not_computed;  // why no band (another dtype, arithmetic, algorithm; no conv)
  struct Channel {
    std::int64_t channel = 0, outputs = 0;
    double rho_ppm = 0, band_ppm = 0, honest_rms_ppm = 0, allowance_ppm = 0;
    double ratio = 0;  // |rho| / band (NaN: the channel holds a non-finite output)
  };
  std::int64_t tested = 0;                       // channels whose outputs are not all equal
  std::vector<Channel> beyond;                   // channels beyond their band, worst first
  std::optional<Channel> worst;                  // the largest ratio
  std::size_t samples = 0;                       // K
  double alpha = 0;                              // per channel
  double band_median_ppm = 0, band_max_ppm = 0;  // the detection floor: a channel scaled by more is seen
};

struct DiagnoseResult {
  DType dtype = DType::Float32;
  nlohmann::json layer;                 // conv geometry (or null: a BatchNorm alone), input and output shapes
  std::int64_t channels = 0;
  double eps = 0;
  bool eps_given = true;
  bool has_bn = true;                     // false: a plain conv
  std::vector<std::string> bn_defaulted;  // as given in DiagnoseInput
  ConvArithmetic arithmetic;              // declared
  ConvAlgorithm algorithm;                // declared
  std::string replay;                     // the replay the verdict used ("" under float32)
  std::vector<ReplayFit> replays;         // every replay tried (empty under float32)
  std::optional<double> general_ratio;    // the general bound's worst ratio (not float32)
  std::optional<std::string> no_bound;    // why the declared arithmetic has no bound here (MISTRUSTED)
  bool general_only = false;              // only the general bound applies (Winograd with converted operands)
  double k = 0, u = 0;                  // the bound's accumulation roundings and unit roundoff
  bool fused_path = false;              // a 16-bit conv output: the fused path's bound counts too
  ModelFit as_given;
  std::vector<ModelFit> hypotheses;     // best first (smallest worst ratio, then rms)
  std::optional<std::size_t> overflow_element;  // an exact value past the dtype's range (MISTRUSTED) ...
  std::string overflow_what;                    // ... "conv output" or "output" (or fp16 partial sums' bound)
  std::string overflow_dtype;                   // ... the type whose range it passes ("": the observed dtype)
  std::optional<double> overflow_value; // ... its value (none: beyond the double range)
  // A 16-bit output with non-finite values where the layer's are finite, and the first channel
  // whose multiplier gamma / sqrt(var + eps) is past the dtype's range: its index and value.
  std::optional<std::pair<std::int64_t, double>> narrow_multiplier;
  DiagnoseBand band;

  // The hypothesis that explains a layer the as-given model does not (index 0), if any.
  std::optional<std::size_t> best() const;
  Verdict verdict() const;
  nlohmann::json to_json() const;       // the `diagnose` result (schema "diagnose")
};

// Throws InputError on inconsistent shapes or parameters.
DiagnoseResult diagnose(const DiagnoseInput& in);

// The layer as given's exact output, each value rounded to a double (for statistics against
// it: the judgement is diagnose's), in in.observed's shape (its values are not read). bisect's
// layer form judges each run's output by diagnose and measures it against these.
std::vector<double> diagnose_exact_output(const DiagnoseInput& in);

// How the BatchNorm's values are read for this layer (bn_params.hpp): one per channel of the
// layer's output (the conv's O, or the input's C for a BatchNorm alone; a wrong shape is
// diagnose's error to name, not a count the BatchNorm misses), checked as the observed dtype
// computes sigma^2 + eps. For every caller that builds a DiagnoseInput (the CLI, the module).
BnRule diagnose_bn_rule(const DiagnoseInput& in);

// The BatchNorm as loaded for diagnose, into `in` (bn, eps_given, bn_defaulted). A conv with a
// BatchNorm none of whose gamma, beta, mean, var was given (only eps) is refused: that is a
// default BatchNorm the caller did not describe, not the plain conv a missing one means.
void set_diagnose_bn(DiagnoseInput& in, const LoadedBn& bn);

}  // namespace foldcheck
