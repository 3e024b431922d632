#pragma once
// Per-channel systematic bias of a folded conv's outputs: the statistic that sees a fold
// error too small for any per-element bound.
//
// Why: a per-element bound on an n-term output is of order sqrt(n) u sum|w x| (probabilistic)
// or n u sum|w x| (deterministic): for a 1,152-term conv that is a few ppm of the terms'
// magnitude, so a channel whose folded weights are all off by 2 ppm stays inside it. But a
// fold error is a common factor on every output of its channel, while accumulation rounding
// errors are mean-zero under the probabilistic model: averaged over the channel's outputs,
// the common factor stands out and the rounding noise shrinks.
//
// Model (H0: a correct fold by a recipe whose bound this is, and any order of a direct
// conv in the accumulation arithmetic, unit roundoff u):
//   folded weight  w'_k = w*_k (1 + theta)(1 + delta_k) + e_k,  w*_k = w_k t exactly,
//     |theta| <= theta_c (the channel's scale t, computed once: a common relative error),
//     |delta_k| <= delta_c (the weight's own multiply, and storage), |e_k| <= eta (underflow);
//   engine output  y_i = sum_k w'_k x_ik + b' + sum_j eps_j P_j: every rounding of the
//     accumulation contributes eps_j P_j exactly (additions are linear), |eps_j| <= u, P_j
//     the rounded operation's exact result: a product w'_k x_ik (n of them, sum of squares
//     <= A_i^2, A_i >= sum_k |w'_k x_ik| + |b'|) or a partial sum (n additions with the bias,
//     k - 1 of them, k = n + 1 the sequential count, which bounds every order). A partial
//     sum in ANY order is a sum of a subset of the terms plus the errors so far, so
//     |P_j| <= M_i = max(positive part, negative part) + gamma_k A_i, and the positive and
//     negative parts add to A_i and differ by the exact sum: M_i <= (A_i + |sum|)/2 + gamma_k A_i.
// Statistic: with d_i = y_i - y*_i (y* the exact original layer on the engine's input),
// z_i = y*_i - b*_c (its conv part) and r_i = (z_i - mean z) / S, S = sum (z_i - mean z)^2,
// over the channel's outputs i used,
//   rho = sum_i d_i r_i = theta + (1 + theta) sum_k delta_k w*_k G_k + sum_k e_k G_k + sum_i r_i sum_j eps_j P_j,
// with G_k = sum_i x_ik r_i, because sum_k w*_k G_k = sum_i z_i r_i = 1 and sum_i r_i = 0 (a
// constant bias error drops out). A channel scaled by (1 + rho) gives exactly rho.
//   Deterministic part: |theta| + eta sum_k |G_k| <= allowance.
//   Random part (rounding errors mean-zero given the past, as in Higham & Mary 2019): a sum of
//   martingale differences bounded by c_j = u |r_i| |P_j| and delta_c (1 + theta_c) |w*_k G_k|;
//   Azuma-Hoeffding: P(|random| >= s sqrt(2 ln(2/alpha))) <= alpha, s^2 = sum c_j^2
//   <= sum_i r_i^2 u^2 (A_i^2 + (k - 1) M_i^2) + sum_k (delta_c (1 + theta_c) w*_k G_k)^2.
// So under H0, P(|rho| > allowance + s sqrt(2 ln(2/alpha))) <= alpha: the channel's
// threshold, and alpha its false-alarm probability. A channel with S = 0 (one output, or
// all equal) is not tested.
//
// That bound holds for every order of the sum, so it takes every partial sum as large as a
// subset of the terms can make it: typically 10-100x what real kernels reach. The estimated
// threshold measures instead what honest computations of THIS layer on THIS input reach. It
// cannot come from the channel's own residuals: accumulation errors of different outputs are
// not independent on real data (MobileNetV2's projection convs, inputs from ReLU6 with half
// zeros: ONNX Runtime's errors correlate with z at -0.25, and a plain float32 sequential sum
// drifts by rho = -1.25 ppm, 10 u), and any drift along z is absorbed into the fitted rho.
// So K honest computations are run (`samples`: the folded layer in float32 with other kernel
// orders: input channels permuted, sequential, pairwise or blocked, with or without fma), and
// each one's accumulation drift rho_m = sum_i r_i (y_m,i - y*_i) - sum_k (w'_m,k - w*_k) G_k
// is measured exactly (its fold part removed with its own weights). Taking an engine's drift
// as one more draw, Gaussian with mean 0 like them, rho_acc / sqrt(mean rho_m^2) is Student-t
// with K degrees of freedom. But a kind of kernel can drift systematically: a sum that starts
// from a bias large beside the outputs' spread drifts by the same +2 ppm in every order
// (PyTorch's oneDNN conv, bias +10, 256 channels; layer/honest_samples.hpp computes that kind
// too), so its drift is mu_kind + a mean-zero part, and the observation's kind is unknown: the
// largest |rho_m| stands for the largest mu, and the estimated threshold is
//   allowance + s_fold sqrt(2 ln(2/alpha)) + max_m |rho_m| + t_K(1 - alpha/2) sqrt(mean_m rho_m^2)
// (s_fold: the per-weight fold part of s; for mean-zero drifts the max term adds at most
// sqrt(K) rms, about half of t_K rms at K = 16). Beyond it only: SUSPICIOUS (a change the channel's
// honest computations do not make, at the estimated false-alarm probability alpha); beyond the
// bound: UNEXPECTED.
#include <cmath>
#include <cstdint>
#include <vector>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

struct ChannelBiasInput {
  ref::ConvGeometry geometry;
  const std::vector<double>* x = nullptr;       // the engine's input to the layer, NCHW
  const std::vector<double>* w_star = nullptr;  // exact folded weights w*_k (to double), OIHW
  const std::vector<double>* z = nullptr;       // per output: y* - b* (the exact conv part)
  const std::vector<double>* d = nullptr;       // per output: engine y - y*
  const std::vector<double>* ystar = nullptr;   // per output: y* (the exact original layer)
  const std::vector<double>* magnitude = nullptr;  // per output: A_i (see above)
  const std::vector<double>* partial = nullptr;    // per output: M_i (see above)
  const std::vector<char>* use = nullptr;       // per output: used (null: all)
  // Honest computations (outputs per element) and the folded weights each used; none: the
  // estimated threshold is the bound's.
  std::vector<const std::vector<double>*> samples, sample_weights;
  std::vector<double> theta, delta;             // per channel (see above)
  double eta = 0;                               // underflow bound per folded weight
  double roundings = 1;                         // k
  double unit_roundoff = 0x1p-24;               // u of the accumulation
  double alpha = 1e-6;                          // false-alarm probability per channel
  // false: the observation may come from a computation the model above does not describe
  // (diagnose: an unfused conv -> BatchNorm, whose per-output roundings follow the conv's sum):
  // no deterministic threshold (infinite), and the estimated one is the honest samples' alone.
  bool bound_holds = true;
  unsigned threads = 0;                         // 0: hardware concurrency
};

struct ChannelBias {
  bool tested = false;       // S > 0
  std::int64_t outputs = 0;  // outputs used
  double rho = 0;            // the estimated common relative change of the channel
  double allowance = 0;      // the systematic change a correct fold may make
  double spread = 0;         // s
  double threshold = 0;      // allowance + s sqrt(2 ln(2/alpha))
  double estimated_threshold = 0;  // from the honest computations' drift (at most threshold)
  double honest_rms = 0;           // sqrt(mean rho_m^2) of those
  double honest_largest = 0;       // max |rho_m| of those
  bool beyond() const { return tested && !(std::fabs(rho) <= threshold); }
  bool beyond_estimate() const { return tested && !(std::fabs(rho) <= estimated_threshold); }
};

// One entry per output channel. Results do not depend on `threads`.
std::vector<ChannelBias> channel_bias(const ChannelBiasInput& in);

}  // namespace foldcheck
