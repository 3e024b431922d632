// The hypothesis catalogue and its scores (foldcheck/diagnosis/hypotheses.hpp).
#include "foldcheck/diagnosis/hypotheses.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "foldcheck/numerics/bounded.hpp"

namespace foldcheck::diagnosis {
namespace {

using json = nlohmann::json;

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::vector<ld> scale_of(const ref::BnParams& bn, const std::vector<ld>& var, double eps) {
  std::vector<ld> a(var.size());
  for (std::size_t o = 0; o < var.size(); ++o) a[o] = bn.gamma[o] / std::sqrt(var[o] + static_cast<ld>(eps));
  return a;
}

std::vector<ld> widen(const std::vector<double>& v) { return std::vector<ld>(v.begin(), v.end()); }

}  // namespace

AffineModel as_given(const ref::BnParams& bn) {
  AffineModel h;
  h.name = "as_given";
  h.description = "the layer as given: eval-mode BatchNorm with the running statistics";
  h.m = widen(bn.mean);
  h.a = scale_of(bn, widen(bn.var), bn.eps);
  h.beta = widen(bn.beta);
  return h;
}

AffineModel plain_conv(std::size_t C) {
  AffineModel h;
  h.name = "as_given";
  h.description = "the layer as given: the conv alone, no BatchNorm";
  h.m.assign(C, 0.0L);
  h.a.assign(C, 1.0L);
  h.beta.assign(C, 0.0L);
  h.identity = true;
  return h;
}

namespace {

AffineModel batch_stats(const ref::BnParams& bn, const Layer& L, bool unbiased) {
  AffineModel h = as_given(bn);
  h.name = unbiased ? "training_mode_unbiased_variance" : "training_mode_batch_statistics";
  h.description = unbiased ? "BatchNorm normalised with the batch mean and the unbiased (N-1) batch variance"
                           : "BatchNorm in training mode: normalised with the batch mean and biased batch variance";
  h.fix = unbiased ? "the output used batch statistics with the unbiased variance: call model.eval() so the running "
                     "statistics are used (training-mode BatchNorm normalises with the biased variance)"
                   : "BatchNorm ran in training mode (batch statistics): call model.eval() before comparing";
  h.batch_stats = true;
  const std::size_t C = static_cast<std::size_t>(L.C);
  std::vector<ld> sum(C, 0), sumabs(C, 0);
  for (std::size_t i = 0; i < L.c.size(); ++i) {
    sum[L.channel(i, false)] += L.c[i];
    sumabs[L.channel(i, false)] += std::fabs(L.c[i]);
  }
  const ld M = static_cast<ld>(L.N * L.plane);
  std::vector<ld> mean(C), var(C, 0);
  for (std::size_t o = 0; o < C; ++o) mean[o] = sum[o] / M;
  for (std::size_t i = 0; i < L.c.size(); ++i) {
    const ld d = L.c[i] - mean[L.channel(i, false)];
    var[L.channel(i, false)] += d * d;
  }
  h.mean_abs.resize(C);
  json mj = json::array(), vj = json::array();
  for (std::size_t o = 0; o < C; ++o) {
    var[o] /= unbiased ? M - 1 : M;
    h.mean_abs[o] = static_cast<double>(sumabs[o] / M);
    if (o < 8) {
      mj.push_back(static_cast<double>(mean[o]));
      vj.push_back(static_cast<double>(var[o]));
    }
  }
  h.m = mean;
  h.a = scale_of(bn, var, bn.eps);
  h.params = {{"values_per_channel", static_cast<std::int64_t>(M)}, {"batch_mean_first_channels", mj},
              {"batch_var_first_channels", vj}};
  return h;
}

// The layer as given, renamed: each hypothesis then changes what it assumes.
AffineModel named(const ref::BnParams& bn, const std::string& name, const std::string& desc, const std::string& fix) {
  AffineModel h = as_given(bn);
  h.name = name;
  h.description = desc;
  h.fix = fix;
  return h;
}

AffineModel with_var(const ref::BnParams& bn, const std::string& name, const std::string& desc, const std::string& fix,
                     const std::vector<ld>& var) {
  AffineModel h = named(bn, name, desc, fix);
  h.a = scale_of(bn, var, bn.eps);
  return h;
}

// The eps that explains the observation: from elements far from the mean (best
// conditioned), eps_i = (gamma / s_i)^2 - var with s_i = (y_i - beta) / (c_i - mean);
// the median over them.
std::optional<double> recover_eps(const ref::BnParams& bn, const Layer& L, const std::vector<double>& obs) {
  std::vector<std::pair<double, double>> cand;  // (|c - mean| * |a|, eps_i)
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const std::size_t o = L.channel(i, false);
    const ld d = L.c[i] - bn.mean[o];
    if (d == 0 || !std::isfinite(obs[i]) || bn.gamma[o] == 0) continue;
    const ld s = (static_cast<ld>(obs[i]) - bn.beta[o]) / d;
    if (!(s != 0)) continue;
    const ld g = bn.gamma[o] / s;
    cand.emplace_back(static_cast<double>(std::fabs(d * s)), static_cast<double>(g * g - bn.var[o]));
  }
  if (cand.size() < 1) return std::nullopt;
  std::sort(cand.begin(), cand.end(), [](auto& a, auto& b) { return a.first > b.first; });
  cand.resize(std::max<std::size_t>(1, cand.size() / 4));
  std::vector<double> e;
  for (auto& c : cand) e.push_back(c.second);
  const double est = quantile(e, 0.5);
  if (!std::isfinite(est) || est < 0) return std::nullopt;
  return est;
}

}  // namespace

AffineModel eps_mismatch(const ref::BnParams& bn, double eps) {
  ref::BnParams b = bn;
  b.eps = eps;
  AffineModel h = as_given(b);
  h.name = "eps_mismatch";
  h.description = fmt::format("BatchNorm computed with eps = {:g} instead of {:g}", eps, bn.eps);
  h.fix = fmt::format("the engine used eps = {:g}; the model's eps is {:g} (Keras/TF default 1e-3, PyTorch/ONNX/TVM "
                      "1e-5): pass epsilon={:g} when converting",
                      eps, bn.eps, bn.eps);
  h.params = {{"eps_recovered", eps}, {"eps_given", bn.eps}};
  return h;
}

std::vector<AffineModel> variance_misuses(const ref::BnParams& bn) {
  std::vector<ld> v1(bn.var.size()), v2(bn.var.size());
  for (std::size_t o = 0; o < bn.var.size(); ++o) {
    v1[o] = std::sqrt(static_cast<ld>(bn.var[o]));
    v2[o] = static_cast<ld>(bn.var[o]) * bn.var[o];
  }
  std::vector<AffineModel> out;
  out.push_back(with_var(bn, "std_passed_as_var", "the variance slot held the standard deviation",
                         "running_var must hold the variance sigma^2, not sigma", v1));
  out.push_back(with_var(bn, "var_passed_as_std", "the variance was used as a standard deviation (squared)",
                         "pass the variance unchanged; the engine squared it as if it were sigma", v2));
  AffineModel ms =
      named(bn, "missing_sqrt", "divided by var + eps instead of sqrt(var + eps)", "divide by sqrt(var + eps)");
  for (std::size_t o = 0; o < bn.var.size(); ++o) ms.a[o] = bn.gamma[o] / (static_cast<ld>(bn.var[o]) + bn.eps);
  out.push_back(std::move(ms));
  return out;
}

namespace {

// The bound of the fused path: the observed output computed by a conv whose weights and bias
// are a fold of the model (a, m, beta) computed and stored in the 16-bit dtype (FoldTerms),
// for element i of channel ch with model value y. The conv computes
//   z = fl_u(sum_j w'_j x_j + b_hat')   (float32 accumulation: k products and sums, bias included;
//                                        measured for PyTorch CPU .half()/.bfloat16() convs)
// and stores y_hat = fl_s(z). With w'_j = w_j (a + tau) + eps_j and sum_j w_j x_j = c - b exactly,
//   sum_j w'_j x_j + b_hat' - y = tau (c - b) + sum_j eps_j x_j + (b_hat' - b')
// so the shared multiplier's error costs scale_err |c - b| (not scale_err sum|w x|: a wrong
// scale of a channel stays visible), each weight's own rounding weight_err A (A = sum|x w|),
// a weight that may underflow weight_eta max|x|, the bias bias_err:
//   E_fold = scale_err |c - b| + weight_err A + weight_eta n_small max|x| + bias_err
//   E_acc  = gamma_k(u) ((|a| + scale_err + weight_err) A + weight_eta n_small max|x| + bias_mag)
//   E      = E' + u_s (|y| + E') + eta_s,   E' = E_fold + E_acc
// (the storage rounding: |fl_s(z) - z| <= u_s |z| + eta_s, |z| <= |y| + E'). A separate shift
// (TVM with a conv bias) adds its error and one more storage rounding of the conv's output
// before it, |conv output| <= |y| + shift_mag + E'. For a hypothesis the terms are those of the
// layer as given scaled by its |a| (weights) and its bias magnitude (bias): exact for the layer
// as given (both ratios 1), the verdict's model; the hypotheses' bounds follow the same shape.
double fused_bound(const FoldTerms& f, const AffineModel& h, const Layer& L, std::size_t i, std::size_t ch, ld y,
                   double u, const DTypeInfo& si) {
  const double aa = static_cast<double>(std::fabs(h.a[ch]));
  const double b = L.bias.empty() ? 0.0 : L.bias[L.channel(i, false)];
  const double bias_h = static_cast<double>(std::fabs(h.a[ch]) * (std::fabs(static_cast<ld>(b)) + std::fabs(h.m[ch])) +
                                            std::fabs(h.beta[ch]));
  const double ra = f.a > 0 ? aa / f.a : 1.0, rb = f.bias_given > 0 ? bias_h / f.bias_given : 1.0;
  const double A = L.A[i], under = ra * f.weight_eta * f.small_weights * L.x_max;
  const double cb = static_cast<double>(std::fabs(L.c[i] - static_cast<ld>(b)));
  const double k = L.k + (L.bias.empty() ? 1 : 0);  // the fused conv always adds a bias
  const double e_fold = ra * (f.scale_err * cb + f.weight_err * A) + under + rb * f.bias_err;
  const double ua = std::max(u, L.u_acc);  // a narrower accumulator (fp16-accumulate's general bound): its u
  const double e_acc = gamma_k(k, ua) * ((aa + ra * (f.scale_err + f.weight_err)) * A + under + rb * f.bias_mag);
  double E = e_fold + e_acc;
  const double ay = static_cast<double>(std::fabs(y));
  if (f.shift_mag >= 0) {
    E += rb * f.shift_err;
    E += si.unit_roundoff * (ay + rb * f.shift_mag + E) + si.underflow_eta;
  }
  return round_up(E + si.unit_roundoff * (ay + E) + si.underflow_eta);
}

// Whether v, an exact value of the layer, is past the dtype's range: a computation in the
// dtype overflows there, which no rounding bound describes.
bool past_range(DType t, ld v) { return !std::isfinite(v) || !std::isfinite(round_to(t, static_cast<double>(v))); }

}  // namespace

namespace {

// The bound E of one element (commands/diagnose.hpp states it): the conv's accumulation in
// u_acc, the affine map's and the fold's 8 roundings in u, storage in u_s. With u_acc = u
// the two compound to gamma_{k+8}(u) (as before); otherwise (1 + gamma_k(u_acc))(1 +
// gamma_8(u)) - 1 bounds the product of the two relative errors. Products and sums in the
// accumulator's subnormal range lose up to eta_acc each, absolutely: k eta_acc. An identity model computes
// no affine map: only the accumulation, the replay's extra and the storage.
struct ElementBound {
  double u, us, g8, gconv, gacc, gL, gL3, under;
  ElementBound(const Layer& L, const DTypeInfo& si)
      : u(info(si.arithmetic).unit_roundoff), us(std::max(si.unit_roundoff, L.c_store_u)) {  // stored 16-bit: its u
    const double ua = L.u_acc > 0 ? L.u_acc : u;
    under = L.has_conv ? L.k * (L.eta_acc > 0 ? L.eta_acc : info(si.arithmetic).underflow_eta) : 0.0;
    g8 = gamma_k(8, u);
    gacc = L.has_conv ? gamma_k(L.k, ua) : 0.0;
    gconv = ua == u ? gamma_k(L.k + 8, u) : round_up((1 + gacc) * (1 + g8) - 1);
    const double M = static_cast<double>(L.N * L.plane);  // batch statistics over M values per channel
    const double Lb = std::ceil(std::log2(std::max(M, 2.0))) + 1;
    gL = gamma_k(Lb, u);
    gL3 = gamma_k(Lb + 3, u);
  }
  // How large a partial sum of element i may get: (sum|x w| + |b|)(1 + gamma_k).
  double acc_reach(const Layer& L, std::size_t i) const {
    return (L.A[i] + (L.bias.empty() ? 0.0 : std::fabs(L.bias[L.channel(i, false)]))) * (1 + gacc);
  }
  double of(const AffineModel& h, const Layer& L, std::size_t i, std::size_t ch, ld y) const {
    const double aa = static_cast<double>(std::fabs(h.a[ch])), ay = static_cast<double>(std::fabs(y));
    const double Ab = L.has_conv ? L.A[i] + (L.bias.empty() ? 0.0 : std::fabs(L.bias[L.channel(i, false)])) : 0.0;
    double E = L.extra.empty() ? 0.0 : L.extra[i];
    if (L.operand_factor > 0) E += L.operand_factor * aa * Ab;
    if (!L.conv_err.empty()) E += (h.identity ? 1.0 : (1 + g8) * aa) * L.conv_err[i];
    if (h.identity) {
      E += gacc * Ab + under;
      return E + us * (ay + E) + L.c_store_eta;
    }
    const double ac = aa * static_cast<double>(std::fabs(L.c[i]));
    const double am = aa * static_cast<double>(std::fabs(h.m[ch])) + static_cast<double>(std::fabs(h.beta[ch]));
    E += g8 * (ac + am) + us * (1 + g8) * (ac + am + ay);
    if (L.c_store_u > 0) E += (L.c_store_u * ac + aa * L.c_store_eta) * (1 + g8) + L.c_store_eta;
    if (L.has_conv) E += gconv * aa * Ab + aa * under;
    if (h.batch_stats)
      E += aa * gL * h.mean_abs[ch] + 0.5 * gL3 * aa * static_cast<double>(std::fabs(L.c[i] - h.m[ch]));
    return E;
  }
};

}  // namespace

Score score(const AffineModel& h, const Layer& L, const std::vector<double>& obs) {
  const DTypeInfo& si = info(L.dtype);
  const ElementBound bound(L, si);
  const double u = bound.u;
  Score s;
  std::vector<double> absu;
  absu.reserve(obs.size());
  long double sq = 0;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const std::size_t ch = L.channel(i, h.nhwc);
    const ld y = (L.c[i] - h.m[ch]) * h.a[ch] + h.beta[ch];
    double E = bound.of(h, L, i, ch, y);
    // A 16-bit output may come from a fused conv (a fold computed and stored in the dtype)
    // instead: within the larger of the two paths' bounds.
    const std::size_t co = L.channel(i, false);  // the conv's channel (its weights)
    if (!L.fold.empty()) E = std::max(E, fused_bound(L.fold[co], h, L, i, ch, y, u, si));
    if (!L.fold_shift.empty()) E = std::max(E, fused_bound(L.fold_shift[co], h, L, i, ch, y, u, si));
    E = round_up(E + si.underflow_eta);
    // An element whose exact conv output or output is past the range is not judged, except
    // where only the output is: overflowing there gives y's infinity (or, at the range's edge,
    // the largest finite value); a NaN or a value of the other sign is no rounding or overflow
    // of y (an overflowing conv output, summed, may give either).
    const bool acc_past = L.acc_max > 0 && L.has_conv && bound.acc_reach(L, i) >= L.acc_max;
    if (const bool c_past = acc_past || past_range(L.dtype, L.c[i]); c_past || past_range(L.dtype, y)) {
      if (s.first_past < 0) s.first_past = static_cast<std::int64_t>(i);
      const bool wrong = !c_past && (std::isnan(obs[i]) ||
                                     (obs[i] != 0 && std::signbit(obs[i]) != std::signbit(static_cast<double>(y))));
      if (wrong && s.first_nonfinite < 0) s.first_nonfinite = static_cast<std::int64_t>(i);
      ++(wrong ? s.nonfinite : s.past_range);
      continue;
    }
    if (!std::isfinite(obs[i])) {
      if (s.first_nonfinite < 0) s.first_nonfinite = static_cast<std::int64_t>(i);
      ++s.nonfinite;
      continue;
    }
    if (y != 0) ++s.nonzero;
    s.bound_sum += E;
    const ld d = static_cast<ld>(obs[i]) - y;
    const double yd = static_cast<double>(y);
    const double q = ulp(L.dtype, yd, static_cast<double>(y - static_cast<ld>(yd)));
    const double r = static_cast<double>(d / q);
    const double ratio = static_cast<double>(std::fabs(d)) / E;
    if (ratio > 1) ++s.beyond;
    if (ratio > s.max_ratio) {
      s.max_ratio = ratio;
      s.worst = static_cast<std::int64_t>(i);
    }
    if (std::fabs(r) > s.max_abs_ulp) {
      s.max_abs_ulp = std::fabs(r);
      s.max_ulp_at = static_cast<std::int64_t>(i);
      s.max_ulp_bound = E / q;
      const double Ab = L.has_conv ? L.A[i] + (L.bias.empty() ? 0.0 : std::fabs(L.bias[L.channel(i, false)])) : 0.0;
      s.max_ulp_cancellation = yd != 0 ? static_cast<double>(std::fabs(h.a[ch])) * Ab / std::fabs(yd) : 0.0;
    }
    s.max_abs_diff = std::max(s.max_abs_diff, static_cast<double>(std::fabs(d)));
    sq += static_cast<long double>(r) * r;
    absu.push_back(std::fabs(r));
  }
  if (!absu.empty()) s.rms_ulp = static_cast<double>(std::sqrt(sq / absu.size()));
  s.p50 = quantile(absu, 0.5);
  s.p99 = quantile(absu, 0.99);
  if (s.nonfinite) s.max_ratio = std::numeric_limits<double>::infinity();
  return s;
}


namespace {

// Batch statistics instead of running ones (training mode), and another eps.
void statistics_hypotheses(const ref::BnParams& bn, const Layer& L, const std::vector<double>& obs,
                           std::vector<AffineModel>& hyps) {
  const std::int64_t M = L.N * L.plane;
  hyps.push_back(batch_stats(bn, L, false));
  if (M >= 2) hyps.push_back(batch_stats(bn, L, true));
  if (auto e = recover_eps(bn, L, obs)) {
    // Snap to a framework default when it explains as well.
    double best = *e;
    for (double c : {1e-5, 1e-3, 1e-4, 1e-6, 1e-2, 1e-1, 1e-12, 0.0})
      if (std::fabs(*e - c) <= 0.02 * std::max(c, 1e-9)) {
        if (score(eps_mismatch(bn, c), L, obs).expected()) best = c;
        break;
      }
    if (best != bn.eps) {
      AffineModel h = eps_mismatch(bn, best);
      h.params["eps_estimate"] = *e;
      hyps.push_back(h);
    }
  }
}

// The BatchNorm's parameters misused: variance vs standard deviation, no sqrt, gamma and
// beta swapped, the mean not subtracted.
void parameter_hypotheses(const ref::BnParams& bn, std::vector<AffineModel>& hyps) {
  for (AffineModel& h : variance_misuses(bn)) hyps.push_back(std::move(h));
  {
    AffineModel h = named(bn, "gamma_beta_swapped", "gamma and beta swapped",
                          "gamma is BatchNorm's weight (scale), beta its bias (shift): swap them back");
    for (std::size_t o = 0; o < bn.gamma.size(); ++o) {
      h.a[o] = bn.beta[o] / std::sqrt(static_cast<ld>(bn.var[o]) + bn.eps);
      h.beta[o] = bn.gamma[o];
    }
    hyps.push_back(h);
  }
  {
    AffineModel h = named(bn, "mean_not_subtracted", "the running mean was not subtracted",
                          "subtract the running mean: b' = (b - mean) * s + beta");
    std::fill(h.m.begin(), h.m.end(), 0.0L);
    hyps.push_back(h);
  }
}

// The wrong axis, a dropped bias or shift, a conv bias left out of the fold, the BatchNorm
// applied twice.
void layout_and_bias_hypotheses(const ref::BnParams& bn, const Layer& L, std::vector<AffineModel>& hyps) {
  const AffineModel given = as_given(bn);
  if (L.C > 1 && L.plane > 1) {
    AffineModel h =
        named(bn, "channel_axis_nhwc", "an NHWC tensor read as NCHW (BatchNorm applied along the wrong axis)",
              "the data is NHWC: permute it to NCHW (x.permute(0, 3, 1, 2)) or set the channel axis to -1");
    h.nhwc = true;
    hyps.push_back(h);
  }
  {
    AffineModel h = as_given(bn);
    h.name = "bias_dropped";
    h.fix = "add the folded bias b' = (b - mean) * gamma / sqrt(var + eps) + beta";
    if (L.has_conv) {
      h.description = "the folded bias was dropped: y = conv_without_bias * s";
      for (std::size_t o = 0; o < h.m.size(); ++o) h.m[o] = L.bias.empty() ? 0.0L : static_cast<ld>(L.bias[o]);
    } else {
      h.description = "the shift was dropped: y = (x - mean) * s, without beta";
    }
    std::fill(h.beta.begin(), h.beta.end(), 0.0L);
    hyps.push_back(h);
  }
  if (!L.bias.empty()) {
    AffineModel h = named(bn, "conv_bias_dropped", "the fold ignored the conv's own bias: b' = -mean * s + beta",
                          "fold the conv bias too: b' = (b - mean) * s + beta");
    for (std::size_t o = 0; o < h.m.size(); ++o) h.m[o] = static_cast<ld>(bn.mean[o]) + L.bias[o];
    hyps.push_back(h);
  }
  {
    AffineModel h =
        named(bn, "bn_applied_twice", "BatchNorm applied twice (a folded conv still followed by its BatchNorm)",
              "remove the BatchNorm node after folding it into the conv");
    for (std::size_t o = 0; o < h.a.size(); ++o) {
      const ld t = given.a[o];
      h.a[o] = t * t;
      h.beta[o] = (static_cast<ld>(bn.beta[o]) - bn.mean[o]) * t + bn.beta[o];
    }
    hyps.push_back(h);
  }
}

}  // namespace

std::vector<AffineModel> hypotheses(const std::optional<ref::BnParams>& bn, const Layer& L,
                                    const std::vector<double>& obs) {
  std::vector<AffineModel> hyps;
  if (!bn) {
    if (!L.bias.empty()) {
      AffineModel h = plain_conv(static_cast<std::size_t>(L.C));
      h.name = "conv_bias_dropped";
      h.description = "the conv's bias was not added";
      h.fix = "add the conv's bias (the output matches the conv without it)";
      for (std::size_t o = 0; o < h.m.size(); ++o) h.m[o] = static_cast<ld>(L.bias[o]);
      hyps.push_back(h);
    }
    return hyps;
  }
  statistics_hypotheses(*bn, L, obs, hyps);
  parameter_hypotheses(*bn, hyps);
  layout_and_bias_hypotheses(*bn, L, hyps);
  return hyps;
}

}  // namespace foldcheck::diagnosis
