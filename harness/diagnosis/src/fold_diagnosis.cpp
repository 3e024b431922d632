// The weight-level diagnosis of a fused conv (foldcheck/diagnosis/fold_diagnosis.hpp).
#include "foldcheck/diagnosis/fold_diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "foldcheck/numerics/bounded.hpp"

namespace foldcheck::diagnosis {
namespace {

constexpr std::size_t kShownChannels = 5;

// The bound of fold_diagnosis.hpp: 8 roundings of unit roundoff at most the dtype's, relative
// to `magnitude` (the sum of the computed terms' magnitudes), and 8 underflows.
double fold_bound(DType t, long double magnitude) {
  const DTypeInfo& i = info(t);
  return round_up(gamma_k(8, i.unit_roundoff) * static_cast<double>(magnitude) + 8 * i.underflow_eta);
}

bool within(double observed, long double exact, double bound) {
  if (!std::isfinite(observed) || !std::isfinite(static_cast<double>(exact))) return false;
  return std::fabs(static_cast<long double>(observed) - exact) <= bound;
}

// The median (the mean of the two middle values of an even count); NaN when empty.
double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const std::size_t k = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  if (v.size() % 2) return v[k];
  const double hi = v[k];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k)) + hi) / 2;
}

// The eps every channel's scale implies, eps_k = (gamma_k / s_k)^2 - var_k with s_k = w'/w at
// its largest weight (the best-determined quotient), over the quarter of channels with the
// smallest variance (an error ds in s moves eps by 2 (var + eps) ds / s): their median.
std::optional<double> recover_eps(const FoldedConv& f) {
  std::vector<std::pair<double, double>> cand;  // (var, eps_k)
  const auto n = static_cast<std::size_t>(f.per_channel);
  for (std::size_t k = 0; k < static_cast<std::size_t>(f.channels); ++k) {
    std::size_t best = k * n;
    for (std::size_t i = k * n; i < (k + 1) * n; ++i)
      if (std::fabs(f.weight[i]) > std::fabs(f.weight[best])) best = i;
    if (f.weight[best] == 0 || !std::isfinite(f.observed_weight[best]) || f.bn.gamma[k] == 0) continue;
    const long double s = static_cast<long double>(f.observed_weight[best]) / f.weight[best];
    if (s == 0) continue;
    const long double g = f.bn.gamma[k] / s;
    cand.emplace_back(f.bn.var[k], static_cast<double>(g * g - f.bn.var[k]));
  }
  if (cand.empty()) return std::nullopt;
  std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  cand.resize(std::max<std::size_t>(1, cand.size() / 4));
  std::vector<double> e;
  e.reserve(cand.size());
  for (const auto& c : cand) e.push_back(c.second);
  const double est = median(e);
  if (!std::isfinite(est) || est < 0) return std::nullopt;
  return est;
}

// Another eps: the framework default nearest the recovered one when its fold fits as well (a
// default explains the weights no worse, and is what a converter would have used).
std::optional<AffineModel> eps_slip(const FoldedConv& f) {
  const std::optional<double> e = recover_eps(f);
  if (!e) return std::nullopt;
  std::vector<double> defaults{1e-5, 1e-3, 1e-4, 1e-6, 1e-2, 1e-1, 1e-12, 0.0};
  std::stable_sort(defaults.begin(), defaults.end(),
                   [&](double a, double b) { return std::fabs(a - *e) < std::fabs(b - *e); });
  double best = *e;
  for (const double c : defaults)
    if (c != f.bn.eps && fold_fits(eps_mismatch(f.bn, c), f)) {
      best = c;
      break;
    }
  if (best == f.bn.eps) return std::nullopt;
  AffineModel h = eps_mismatch(f.bn, best);
  h.params["eps_estimate"] = *e;
  return h;
}

ChannelChange channel_change(const FoldedConv& f, const std::vector<double>& ratio, const std::vector<double>& exact,
                             std::int64_t ch) {
  ChannelChange c;
  c.channel = ch;
  c.elements = f.per_channel;
  const auto n = static_cast<std::size_t>(f.per_channel), first = static_cast<std::size_t>(ch) * n;
  double worst = -1;
  std::vector<double> rel;
  for (std::size_t i = first; i < first + n; ++i) {
    const double q = std::isnan(ratio[i]) ? HUGE_VAL : ratio[i];
    if (!std::isfinite(f.observed_weight[i])) ++c.nonfinite;
    if (q > 1) ++c.beyond;
    if (q > 1 && q > worst) {
      worst = q;
      c.worst = static_cast<std::int64_t>(i);
    }
    if (exact[i] != 0) rel.push_back((f.observed_weight[i] - exact[i]) / exact[i]);  // the factor's change: signed
  }
  if (c.worst >= 0) {
    c.observed = f.observed_weight[static_cast<std::size_t>(c.worst)];
    c.exact = exact[static_cast<std::size_t>(c.worst)];
  }
  if (c.beyond > std::max<std::int64_t>(1, c.elements / 4)) c.ppm = median(rel) * 1e6;
  return c;
}

std::string join(const std::vector<std::int64_t>& v, std::size_t most) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string channels_cause(const WeightDiagnosis& d, std::int64_t channels) {
  std::string shown;
  for (const ChannelChange& c : d.shown) shown += (shown.empty() ? "" : ", ") + c.text();
  if (static_cast<std::int64_t>(d.channels_beyond.size()) == channels && channels > 1)
    return fmt::format(
        "every channel is off, each by its own amount ({}, ...), matching no common slip (another "
        "eps, the variance read as std, no sqrt): different BatchNorm parameters (another layer's, or "
        "stale running statistics), or a second transformation of the weights.",
        shown);
  return fmt::format(
      "{} of {} channels changed after or during the fold ({}); the others are within their bounds: a "
      "corrupted or mis-indexed channel, or that channel's BatchNorm parameters differ.",
      d.channels_beyond.size(), channels, shown);
}

}  // namespace

std::string ChannelChange::text() const {
  if (nonfinite) return fmt::format("channel {}: {} NaN or infinite weight(s)", channel, nonfinite);
  if (ppm) return fmt::format("channel {} {:+.3g} ppm", channel, *ppm);
  return fmt::format("channel {}: {} of {} weights (element {}: {:.9g}, exact {:.9g})", channel, beyond, elements,
                     worst - channel * elements, observed, exact);
}

bool fold_fits(const AffineModel& h, const FoldedConv& f) {
  for (std::size_t i = 0; i < f.weight.size(); ++i) {
    const long double y = f.weight[i] * h.a[i / static_cast<std::size_t>(f.per_channel)];
    if (!within(f.observed_weight[i], y, fold_bound(f.dtype, std::fabs(y)))) return false;
  }
  return true;
}

std::vector<AffineModel> fold_slips(const FoldedConv& f) {
  std::vector<AffineModel> out;
  if (std::optional<AffineModel> e = eps_slip(f)) out.push_back(std::move(*e));
  for (AffineModel& h : variance_misuses(f.bn)) out.push_back(std::move(h));
  return out;
}

std::optional<AffineModel> fold_slip(const FoldedConv& f) {
  if (fold_fits(as_given(f.bn), f)) return std::nullopt;  // within a plain fold's bound: no slip to name
  for (AffineModel& h : fold_slips(f))
    if (fold_fits(h, f)) return std::move(h);
  return std::nullopt;
}

std::string slip_sentence(const AffineModel& h) {
  if (h.name == "eps_mismatch")
    return fmt::format(
        "the fold used eps = {:.3g} where the BatchNorm's eps is {:g} (Keras/TF default 1e-3, "
        "PyTorch/ONNX 1e-5): fold with the module's eps.",
        h.params.at("eps_recovered").get<double>(), h.params.at("eps_given").get<double>());
  if (h.name == "std_passed_as_var")
    return "the variance read as the standard deviation (sqrt(var) + eps under the root): use running_var as is.";
  if (h.name == "var_passed_as_std")
    return "the variance squared as if it were the standard deviation (var^2 + eps under the root): use running_var "
           "as is.";
  if (h.name == "missing_sqrt")
    return "the square root left out (gamma / (var + eps)): the scale is gamma / sqrt(var + eps).";
  return h.description + ": " + h.fix + ".";
}

WeightDiagnosis diagnose_weights(const FoldedConv& f, const std::vector<double>& ratio,
                                 const std::vector<double>& exact) {
  WeightDiagnosis d;
  const auto n = static_cast<std::size_t>(f.per_channel);
  for (std::size_t i = 0; i < ratio.size(); ++i) {
    const double q = std::isnan(ratio[i]) ? HUGE_VAL : ratio[i];
    if (d.worst < 0 || q > d.worst_ratio) {
      d.worst = static_cast<std::int64_t>(i);
      d.worst_ratio = q;
    }
    const auto ch = static_cast<std::int64_t>(i / n);
    if (q > 1 && (d.channels_beyond.empty() || d.channels_beyond.back() != ch)) d.channels_beyond.push_back(ch);
  }
  d.slip = fold_slip(f);
  if (d.slip) {
    d.cause = slip_sentence(*d.slip);
    return d;
  }
  for (std::size_t k = 0; k < d.channels_beyond.size() && k < kShownChannels; ++k)
    d.shown.push_back(channel_change(f, ratio, exact, d.channels_beyond[k]));
  d.cause = channels_cause(d, f.channels);
  return d;
}

BiasDiagnosis diagnose_bias(const FoldedConv& f) {
  BiasDiagnosis d;
  const AffineModel given = as_given(f.bn);
  bool all_zero = true, exact_zero = true;
  for (std::size_t o = 0; o < static_cast<std::size_t>(f.channels); ++o) {
    const long double b = f.bias.empty() ? 0.0L : static_cast<long double>(f.bias[o]);
    const long double a = given.a[o], m = given.m[o], beta = given.beta[o];
    const long double y = (b - m) * a + beta;
    const double obs = f.observed_bias.empty() ? 0.0 : f.observed_bias[o];
    all_zero = all_zero && obs == 0;
    exact_zero = exact_zero && y == 0;
    if (!within(obs, y, fold_bound(f.dtype, std::fabs(b * a) + std::fabs(m * a) + std::fabs(beta))))
      d.off.push_back(static_cast<std::int64_t>(o));
  }
  d.missing = all_zero && !exact_zero;
  if (d.missing)
    d.cause = "the folded bias is missing (zero in every channel): add b' = (b - mean)*gamma/sqrt(var+eps) + beta.";
  else if (static_cast<std::int64_t>(d.off.size()) == f.channels)
    d.cause =
        "the bias is off in every channel: mean or beta not folded (or folded twice), or the conv's own bias "
        "dropped or added twice.";
  else if (d.off.empty())
    d.cause =
        "every channel's bias is within 8 roundings of the exact fold, but beyond each engine recipe's own "
        "bias chain: a bias computed in an order or a type no recipe replays.";
  else
    d.cause = fmt::format(
        "the bias is off in {} of {} channels ({}): those channels' mean or beta, or a corrupted "
        "or mis-indexed channel.",
        d.off.size(), f.channels, join(d.off, kShownChannels));
  return d;
}

}  // namespace foldcheck::diagnosis
