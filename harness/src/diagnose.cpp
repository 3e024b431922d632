#include "foldcheck/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "foldcheck/bounded.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/version.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;
using ld = long double;

// The exact conv output and what the bound needs, per element.
struct Layer {
  DType dtype = DType::Float32;
  std::int64_t C = 1, plane = 1, N = 1;  // output channels, H*W, batch
  std::vector<ld> c;                     // exact conv output (x for a BN alone)
  std::vector<double> A;                 // sum |x w| (empty for a BN alone)
  std::vector<double> bias;              // conv bias (empty: none)
  double k = 0;                          // accumulation roundings
  bool has_conv = false;
  std::size_t channel(std::size_t i, bool nhwc) const {
    return nhwc ? i % static_cast<std::size_t>(C) : (i / static_cast<std::size_t>(plane)) % static_cast<std::size_t>(C);
  }
};

struct Model {
  std::string name, description, fix;
  std::vector<ld> m, a, beta;  // per channel
  bool nhwc = false;
  bool batch_stats = false;
  std::vector<double> mean_abs;  // batch-stat models: mean |c| per channel
  json params = json::object();
};

struct Score {
  double max_ratio = 0, max_abs_ulp = 0, rms_ulp = 0, p50 = 0, p99 = 0, max_abs_diff = 0;
  std::int64_t beyond = 0, nonfinite = 0, worst = -1;
  bool expected() const { return nonfinite == 0 && beyond == 0; }
};

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

Score score(const Model& h, const Layer& L, const std::vector<double>& obs) {
  const DTypeInfo& si = info(L.dtype);
  const double u = info(si.arithmetic).unit_roundoff, us = si.unit_roundoff;
  const double g8 = gamma_k(8, u), gk8 = gamma_k(L.k + 8, u);
  // Batch statistics over M values per channel.
  const double M = static_cast<double>(L.N * L.plane);
  const double Lb = std::ceil(std::log2(std::max(M, 2.0))) + 1;
  const double gL = gamma_k(Lb, u), gL3 = gamma_k(Lb + 3, u);
  Score s;
  std::vector<double> absu;
  absu.reserve(obs.size());
  long double sq = 0;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const std::size_t ch = L.channel(i, h.nhwc);
    const ld a = h.a[ch], m = h.m[ch], b = h.beta[ch];
    const ld y = (L.c[i] - m) * a + b;
    const double aa = static_cast<double>(std::fabs(a)), ac = aa * static_cast<double>(std::fabs(L.c[i]));
    double E = g8 * (ac + aa * static_cast<double>(std::fabs(m)) + static_cast<double>(std::fabs(b))) +
               us * (1 + g8) * (ac + aa * static_cast<double>(std::fabs(m)) + static_cast<double>(std::fabs(b)) +
                                static_cast<double>(std::fabs(y)));
    if (L.has_conv) E += gk8 * aa * (L.A[i] + (L.bias.empty() ? 0.0 : std::fabs(L.bias[L.channel(i, false)])));
    if (h.batch_stats)
      E += aa * gL * h.mean_abs[ch] + 0.5 * gL3 * aa * static_cast<double>(std::fabs(L.c[i] - m));
    E = round_up(E + si.underflow_eta);
    if (!std::isfinite(obs[i]) || !std::isfinite(static_cast<double>(y))) {
      ++s.nonfinite;
      continue;
    }
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
    s.max_abs_ulp = std::max(s.max_abs_ulp, std::fabs(r));
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

json score_json(const Score& s, const Layer& L, const std::vector<double>& obs, const Model& h) {
  json j{{"verdict", s.expected() ? "EXPECTED" : "UNEXPECTED"},
         {"max_ratio_to_bound", std::isfinite(s.max_ratio) ? json(s.max_ratio) : json("inf")},
         {"elements_beyond_bound", s.beyond},
         {"max_abs_difference", s.max_abs_diff},
         {"nonfinite", s.nonfinite},
         {"residual_ulp", {{"max_abs", s.max_abs_ulp}, {"rms", s.rms_ulp}, {"p50_abs", s.p50}, {"p99_abs", s.p99}}}};
  if (s.worst >= 0) {
    const std::size_t i = static_cast<std::size_t>(s.worst);
    const std::size_t ch = L.channel(i, h.nhwc);
    j["worst_element"] = {{"index", i},
                          {"observed", obs[i]},
                          {"model", static_cast<double>((L.c[i] - h.m[ch]) * h.a[ch] + h.beta[ch])}};
  }
  return j;
}

std::vector<ld> scale_of(const ref::BnParams& bn, const std::vector<ld>& var, double eps) {
  std::vector<ld> a(var.size());
  for (std::size_t o = 0; o < var.size(); ++o) a[o] = bn.gamma[o] / std::sqrt(var[o] + static_cast<ld>(eps));
  return a;
}

std::vector<ld> widen(const std::vector<double>& v) { return std::vector<ld>(v.begin(), v.end()); }

Model as_given(const ref::BnParams& bn) {
  Model h;
  h.name = "as_given";
  h.description = "the layer as given: eval-mode BatchNorm with the running statistics";
  h.m = widen(bn.mean);
  h.a = scale_of(bn, widen(bn.var), bn.eps);
  h.beta = widen(bn.beta);
  return h;
}

Model batch_stats(const ref::BnParams& bn, const Layer& L, bool unbiased) {
  Model h = as_given(bn);
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

Model with_var(const ref::BnParams& bn, const std::string& name, const std::string& desc, const std::string& fix,
               const std::vector<ld>& var) {
  Model h = as_given(bn);
  h.name = name;
  h.description = desc;
  h.fix = fix;
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

Model eps_model(const ref::BnParams& bn, double eps) {
  ref::BnParams b = bn;
  b.eps = eps;
  Model h = as_given(b);
  h.name = "eps_mismatch";
  h.description = fmt::format("BatchNorm computed with eps = {:g} instead of {:g}", eps, bn.eps);
  h.fix = fmt::format("the engine used eps = {:g}; the model's eps is {:g} (Keras/TF default 1e-3, PyTorch/ONNX/TVM "
                      "1e-5): pass epsilon={:g} when converting",
                      eps, bn.eps, bn.eps);
  h.params = {{"eps_recovered", eps}, {"eps_given", bn.eps}};
  return h;
}

}  // namespace

json diagnose(const DiagnoseInput& in) {
  // Shapes.
  std::vector<std::int64_t> xs = in.x.shape;
  if (xs.size() == 2) xs = {xs[0], xs[1], 1, 1};
  if (xs.size() != 4) throw InputError("--input must be NCHW (4-D) or N x C (2-D)");
  const std::int64_t N = xs[0], Cin = xs[1], H = xs[2], W = xs[3];
  Layer L;
  L.dtype = in.observed.dtype;
  L.N = N;
  ref::ConvGeometry g;
  g.N = N;
  g.C = Cin;
  g.H = H;
  g.W = W;
  std::vector<std::int64_t> ys = in.observed.shape;
  if (ys.size() == 2) ys = {ys[0], ys[1], 1, 1};
  if (ys.size() != 4 || ys[0] != N) throw InputError("--observed must have the input's batch size and 2 or 4 dimensions");
  json layer = json::object();
  if (in.weights) {
    const auto& ws = in.weights->shape;
    if (ws.size() != 4) throw InputError("--weights must be OIHW (4-D)");
    g.O = ws[0];
    g.KH = ws[2];
    g.KW = ws[3];
    if (ws[1] <= 0 || Cin % ws[1]) throw InputError("--weights: in_channels/groups does not divide the input's channels");
    g.groups = Cin / ws[1];
    if (g.O % g.groups) throw InputError("--weights: output channels not divisible by the groups");
    g.stride_h = g.stride_w = in.stride;
    g.dil_h = g.dil_w = in.dilation;
    bool found = false;
    for (std::int64_t p = in.padding ? *in.padding : 0; p <= (in.padding ? *in.padding : std::max(g.KH, g.KW)); ++p) {
      g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = p;
      if (g.OH() == ys[2] && g.OW() == ys[3]) {
        found = true;
        break;
      }
    }
    if (!found || ys[1] != g.O)
      throw InputError(fmt::format("--observed has shape [{}, {}, {}, {}], which no padding gives for this conv "
                                   "(stride {}, dilation {}); pass --padding/--stride",
                                   ys[0], ys[1], ys[2], ys[3], in.stride, in.dilation));
    if (!in.conv_bias.empty() && static_cast<std::int64_t>(in.conv_bias.size()) != g.O)
      throw InputError("--bias must have one value per output channel");
    ref::LayerData d;
    d.geometry = g;
    d.x = &in.x.data;
    d.w = &in.weights->data;
    d.bias = in.conv_bias.empty() ? nullptr : &in.conv_bias;
    ref::Options ro = in.ref;
    ro.formats = ref::format_bit(*info(L.dtype).format);  // float32 data: the fast path
    const ref::LayerResult r = ref::conv_bn(d, ro);
    L.c.resize(r.y.size());
    for (std::size_t i = 0; i < r.y.size(); ++i) L.c[i] = static_cast<ld>(r.y[i].approx.hi) + r.y[i].approx.lo;
    L.A = r.abs_sum;
    L.bias = in.conv_bias;
    L.has_conv = true;
    L.k = static_cast<double>(g.terms_per_output()) + (in.conv_bias.empty() ? 0 : 1);
    L.C = g.O;
    L.plane = g.OH() * g.OW();
    layer = {{"conv", {{"weights", ws}, {"groups", g.groups}, {"stride", in.stride}, {"padding", g.pad_top},
                       {"dilation", in.dilation}, {"bias", !in.conv_bias.empty()}}}};
  } else {
    if (ys != xs) throw InputError("--observed must have the input's shape when the layer is a BatchNorm alone");
    L.c.assign(in.x.data.begin(), in.x.data.end());
    L.C = Cin;
    L.plane = H * W;
    layer = {{"conv", nullptr}};
  }
  layer["input"] = xs;
  layer["output"] = ys;
  if (in.observed.data.size() != L.c.size()) throw InputError("--observed has the wrong number of elements");
  const ref::BnParams& bn = in.bn;
  if (static_cast<std::int64_t>(bn.gamma.size()) != L.C)
    throw InputError(fmt::format("BatchNorm has {} channels, the layer's output has {}", bn.gamma.size(), L.C));
  const std::vector<double>& obs = in.observed.data;

  // The layer as given.
  const Model given = as_given(bn);
  const Score gs = score(given, L, obs);

  // Hypotheses.
  std::vector<Model> hyps;
  const std::int64_t M = L.N * L.plane;
  hyps.push_back(batch_stats(bn, L, false));
  if (M >= 2) hyps.push_back(batch_stats(bn, L, true));
  if (auto e = recover_eps(bn, L, obs)) {
    // Snap to a framework default when it explains as well.
    double best = *e;
    for (double c : {1e-5, 1e-3, 1e-4, 1e-6, 1e-2, 1e-1, 1e-12, 0.0})
      if (std::fabs(*e - c) <= 0.02 * std::max(c, 1e-9)) {
        if (score(eps_model(bn, c), L, obs).expected()) best = c;
        break;
      }
    if (best != bn.eps) {
      Model h = eps_model(bn, best);
      h.params["eps_estimate"] = *e;
      hyps.push_back(h);
    }
  }
  {
    std::vector<ld> v1(bn.var.size()), v2(bn.var.size()), ve(bn.var.size());
    for (std::size_t o = 0; o < bn.var.size(); ++o) {
      v1[o] = std::sqrt(static_cast<ld>(bn.var[o]));
      v2[o] = static_cast<ld>(bn.var[o]) * bn.var[o];
    }
    hyps.push_back(with_var(bn, "std_passed_as_var", "the variance slot held the standard deviation",
                            "running_var must hold the variance sigma^2, not sigma", v1));
    hyps.push_back(with_var(bn, "var_passed_as_std", "the variance was used as a standard deviation (squared)",
                            "pass the variance unchanged; the engine squared it as if it were sigma", v2));
    Model ms = as_given(bn);
    ms.name = "missing_sqrt";
    ms.description = "divided by var + eps instead of sqrt(var + eps)";
    ms.fix = "divide by sqrt(var + eps)";
    for (std::size_t o = 0; o < bn.var.size(); ++o) ms.a[o] = bn.gamma[o] / (static_cast<ld>(bn.var[o]) + bn.eps);
    hyps.push_back(ms);
  }
  {
    Model h = as_given(bn);
    h.name = "gamma_beta_swapped";
    h.description = "gamma and beta swapped";
    h.fix = "gamma is BatchNorm's weight (scale), beta its bias (shift): swap them back";
    for (std::size_t o = 0; o < bn.gamma.size(); ++o) {
      h.a[o] = bn.beta[o] / std::sqrt(static_cast<ld>(bn.var[o]) + bn.eps);
      h.beta[o] = bn.gamma[o];
    }
    hyps.push_back(h);
  }
  {
    Model h = as_given(bn);
    h.name = "mean_not_subtracted";
    h.description = "the running mean was not subtracted";
    h.fix = "subtract the running mean: b' = (b - mean) * s + beta";
    std::fill(h.m.begin(), h.m.end(), 0.0L);
    hyps.push_back(h);
  }
  if (L.C > 1 && L.plane > 1) {
    Model h = as_given(bn);
    h.name = "channel_axis_nhwc";
    h.description = "an NHWC tensor read as NCHW (BatchNorm applied along the wrong axis)";
    h.fix = "the data is NHWC: permute it to NCHW (x.permute(0, 3, 1, 2)) or set the channel axis to -1";
    h.nhwc = true;
    hyps.push_back(h);
  }
  {
    Model h = as_given(bn);
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
    Model h = as_given(bn);
    h.name = "conv_bias_dropped";
    h.description = "the fold ignored the conv's own bias: b' = -mean * s + beta";
    h.fix = "fold the conv bias too: b' = (b - mean) * s + beta";
    for (std::size_t o = 0; o < h.m.size(); ++o) h.m[o] = static_cast<ld>(bn.mean[o]) + L.bias[o];
    hyps.push_back(h);
  }
  {
    Model h = as_given(bn);
    h.name = "bn_applied_twice";
    h.description = "BatchNorm applied twice (a folded conv still followed by its BatchNorm)";
    h.fix = "remove the BatchNorm node after folding it into the conv";
    for (std::size_t o = 0; o < h.a.size(); ++o) {
      const ld t = given.a[o];
      h.a[o] = t * t;
      h.beta[o] = (static_cast<ld>(bn.beta[o]) - bn.mean[o]) * t + bn.beta[o];
    }
    hyps.push_back(h);
  }

  std::vector<std::pair<Score, const Model*>> scored;
  for (const Model& h : hyps) scored.emplace_back(score(h, L, obs), &h);
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    if (a.first.max_ratio != b.first.max_ratio) return a.first.max_ratio < b.first.max_ratio;
    return a.first.rms_ulp < b.first.rms_ulp;
  });
  json hj = json::array();
  for (const auto& [s, h] : scored) {
    json j = score_json(s, L, obs, *h);
    j["name"] = h->name;
    j["description"] = h->description;
    j["fix"] = h->fix;
    if (!h->params.empty()) j["parameters"] = h->params;
    hj.push_back(j);
  }

  const bool ok = gs.expected();
  json best = nullptr;
  std::string summary;
  if (ok) {
    summary = fmt::format("the observed output is the layer as given, up to rounding (worst element at {:.3g} of "
                          "its bound, max {:.3g} ULP)",
                          gs.max_ratio, gs.max_abs_ulp);
  } else if (!scored.empty() && scored.front().first.expected()) {
    best = scored.front().second->name;
    summary = fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound); "
                          "explained by {}: {} — fix: {}",
                          gs.max_ratio, scored.front().second->name, scored.front().second->description,
                          scored.front().second->fix);
  } else {
    summary = fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound), and "
                          "none of the {} hypotheses explains it to within rounding; closest: {}",
                          gs.max_ratio, scored.size(), scored.empty() ? "-" : scored.front().second->name);
  }
  json out{{"tool", "foldcheck"},
           {"version", kVersion},
           {"command", "diagnose"},
           {"dtype", name(L.dtype)},
           {"layer", layer},
           {"bn", {{"channels", L.C}, {"eps", bn.eps}, {"eps_given", in.eps_given}}},
           {"bound",
            {{"kind", "deterministic"},
             {"formula", "|y - model| <= gamma_{k+8} |a| (sum|x w| + |b|) + gamma_8 (|a|(|c| + |m|) + |beta|) + "
                         "u_s (1 + gamma_8)(|a||c| + |a||m| + |beta| + |y|) [+ batch-statistics error]; "
                         "model y = (c - m) a + beta per channel"},
             {"k", L.k},
             {"u", info(info(L.dtype).arithmetic).unit_roundoff}}},
           {"as_given", score_json(gs, L, obs, given)},
           {"verdict", ok ? "EXPECTED" : "UNEXPECTED"},
           {"best", best},
           {"hypotheses", hj},
           {"summary", summary}};
  if (!best.is_null()) out["fix"] = scored.front().second->fix;
  return out;
}

}  // namespace foldcheck
