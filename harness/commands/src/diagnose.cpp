#include "foldcheck/commands/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "diagnose_fold.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/diagnosis/hypotheses.hpp"
#include "foldcheck/io/layer_files.hpp"
#include "foldcheck/reports/diagnose_summary.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck {
namespace {

using namespace diagnosis;

using json = nlohmann::json;

ModelFit fit(const Score& s, const Layer& L, const std::vector<double>& obs, const AffineModel& h) {
  ModelFit f;
  f.expected = s.expected();
  f.vacuous = s.vacuous();
  f.max_ratio = s.max_ratio;
  f.beyond = s.beyond;
  f.nonfinite = s.nonfinite;
  if (s.first_nonfinite >= 0) {
    f.first_nonfinite = static_cast<std::size_t>(s.first_nonfinite);
    f.first_nonfinite_value = obs[*f.first_nonfinite];
  }
  f.max_abs_diff = s.max_abs_diff;
  f.max_abs_ulp = s.max_abs_ulp;
  f.rms_ulp = s.rms_ulp;
  f.p50_ulp = s.p50;
  f.p99_ulp = s.p99;
  if (s.worst >= 0) {
    const std::size_t i = static_cast<std::size_t>(s.worst);
    const std::size_t ch = L.channel(i, h.nhwc);
    f.worst = ModelFit::Worst{i, obs[i], static_cast<double>((L.c[i] - h.m[ch]) * h.a[ch] + h.beta[ch])};
  }
  return f;
}

// An exact output (or conv output) past the dtype's range: the observed value is then an
// infinity, or a finite value no rounding of the exact one gives. Either way the difference
// is overflow, not rounding, and no rounding bound describes it (the ratio to the bound is
// inf or 0/0): nothing was compared, so the verdict is MISTRUSTED, as explain's is for
// folds past the range. Records the first such value in r.
void find_overflow(const Layer& L, const AffineModel& given, DiagnoseResult& r) {
  for (std::size_t i = 0; i < L.c.size(); ++i) {
    const std::size_t ch = L.channel(i, given.nhwc);
    const ld y = (L.c[i] - given.m[ch]) * given.a[ch] + given.beta[ch];
    // The inputs are finite (checked when read), so an exact value that is not finite
    // overflowed the reference's double approximation: past every dtype's range.
    for (const auto& [v, what] : {std::pair{L.c[i], "conv output"}, std::pair{y, "output"}})
      if (!std::isfinite(v) || !std::isfinite(round_to(L.dtype, static_cast<double>(v)))) {
        r.overflow_element = i;
        r.overflow_what = what;
        if (std::isfinite(v)) r.overflow_value = static_cast<double>(v);
        return;
      }
  }
}

// A 16-bit conv layer's non-finite observations where the exact output is finite, every one in
// a channel whose multiplier a = gamma / sqrt(var + eps) rounds to an infinity in the dtype (a
// fold in that arithmetic gives the channel infinite weights): the first such channel, else
// none (a non-finite value elsewhere has another cause).
std::optional<std::pair<std::int64_t, double>> narrow_multiplier(DType t, const Layer& L, const ModelFit& as_given,
                                                                 const AffineModel& given,
                                                                 const std::vector<double>& obs) {
  if ((t != DType::Float16 && t != DType::BFloat16) || !L.has_conv || as_given.nonfinite == 0) return std::nullopt;
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    if (std::isfinite(obs[i])) continue;
    const std::size_t ch = L.channel(i, given.nhwc);
    if (!std::isinf(round_to(t, static_cast<double>(given.a[ch])))) return std::nullopt;
    first = first ? std::min(*first, ch) : ch;
  }
  if (!first) return std::nullopt;
  return std::pair{static_cast<std::int64_t>(*first), static_cast<double>(given.a[*first])};
}

// Both shapes as 4-D (N x C becomes N x C x 1 x 1).
std::vector<std::int64_t> as_4d(std::vector<std::int64_t> s) {
  if (s.size() == 2) s = {s[0], s[1], 1, 1};
  return s;
}

// The conv's geometry from the input, weight and observed shapes (io/layer_files.hpp's rule;
// the padding, when not given, the smallest that gives the observed output).
ref::ConvGeometry conv_geometry(const DiagnoseInput& in, const std::vector<std::int64_t>& xs,
                                const std::vector<std::int64_t>& ys) {
  const auto& ws = in.weights->shape;
  if (ws.size() != 4) throw InputError(field("weights") + " must be OIHW (4-D)");
  const std::int64_t given_pad = in.padding.value_or(0);  // checked by the one rule (its range)
  ref::ConvGeometry g = foldcheck::conv_geometry(xs, ws, in.stride, in.dilation, given_pad, given_pad, field("weights"));
  for (std::int64_t p = in.padding ? *in.padding : 0; p <= (in.padding ? *in.padding : std::max(g.KH, g.KW)); ++p) {
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = p;
    if (g.OH() == ys[2] && g.OW() == ys[3] && ys[1] == g.O) return g;
  }
  throw InputError(fmt::format(fmt::runtime(field("observed") + " has shape [{}, {}, {}, {}], which no padding gives for this conv "
                               "(stride {}, dilation {}); pass " + field("padding") + "/" + field("stride")),
                               ys[0], ys[1], ys[2], ys[3], in.stride, in.dilation));
}

// The layer's exact conv output (certified reference) and what its bound needs.
Layer conv_layer(const DiagnoseInput& in, const ref::ConvGeometry& g, json& layer) {
  if (!in.conv_bias.empty() && static_cast<std::int64_t>(in.conv_bias.size()) != g.O)
    throw InputError(field("conv_bias") + " must have one value per output channel");
  Layer L;
  L.dtype = in.observed.dtype;
  L.N = g.N;
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
  add_fold_terms(in, g.terms_per_output(), L);  // a 16-bit output: the fused path's terms
  layer = {{"conv", {{"weights", in.weights->shape}, {"groups", g.groups}, {"stride", in.stride}, {"padding", g.pad_top},
                     {"dilation", in.dilation}, {"bias", !in.conv_bias.empty()}}}};
  return L;
}

// The layer (conv + BatchNorm, or the BatchNorm alone) checked against the observation's shape.
Layer make_layer(const DiagnoseInput& in, json& layer) {
  const std::vector<std::int64_t> xs = as_4d(in.x.shape), ys = as_4d(in.observed.shape);
  if (xs.size() != 4) throw InputError(field("x") + " must be NCHW (4-D) or N x C (2-D)");
  if (ys.size() != 4 || ys[0] != xs[0]) throw InputError(field("observed") + " must have the input's batch size and 2 or 4 dimensions");
  Layer L;
  if (in.weights) {
    L = conv_layer(in, conv_geometry(in, xs, ys), layer);
  } else {
    if (ys != xs) throw InputError(field("observed") + " must have the input's shape when the layer is a BatchNorm alone");
    L.dtype = in.observed.dtype;
    L.N = xs[0];
    L.c.assign(in.x.data.begin(), in.x.data.end());
    L.C = xs[1];
    L.plane = xs[2] * xs[3];
    layer = {{"conv", nullptr}};
  }
  layer["input"] = xs;
  layer["output"] = ys;
  if (in.observed.data.size() != L.c.size()) throw InputError(field("observed") + " has the wrong number of elements");
  if (static_cast<std::int64_t>(in.bn.gamma.size()) != L.C)
    throw InputError(fmt::format("BatchNorm has {} channels, the layer's output has {}", in.bn.gamma.size(), L.C));
  return L;
}

}  // namespace

DiagnoseResult diagnose(const DiagnoseInput& in) {
  DiagnoseResult r;
  const Layer L = make_layer(in, r.layer);
  const std::vector<double>& obs = in.observed.data;
  r.dtype = L.dtype;
  r.channels = L.C;
  r.eps = in.bn.eps;
  r.eps_given = in.eps_given;
  r.k = L.k;
  r.u = info(info(L.dtype).arithmetic).unit_roundoff;
  r.fused_path = !L.fold.empty();
  const AffineModel given = as_given(in.bn);
  find_overflow(L, given, r);
  r.as_given = fit(score(given, L, obs), L, obs, given);
  r.narrow_multiplier = narrow_multiplier(L.dtype, L, r.as_given, given, obs);
  const std::vector<AffineModel> hyps = hypotheses(in.bn, L, obs);
  std::vector<std::pair<Score, const AffineModel*>> scored;
  for (const AffineModel& h : hyps) scored.emplace_back(score(h, L, obs), &h);
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    if (a.first.max_ratio != b.first.max_ratio) return a.first.max_ratio < b.first.max_ratio;
    return a.first.rms_ulp < b.first.rms_ulp;
  });
  for (const auto& [s, h] : scored) {
    ModelFit f = fit(s, L, obs, *h);
    f.name = h->name;
    f.description = h->description;
    f.fix = h->fix;
    if (!h->params.empty()) f.parameters = h->params;
    r.hypotheses.push_back(std::move(f));
  }
  return r;
}

// A fit beyond its bound is UNEXPECTED; within it but vacuous (every model value zero),
// MISTRUSTED (judgement::of_check; vacuous implies within).
Verdict ModelFit::verdict() const { return judgement::of_check({.failed = !expected, .informative = !vacuous}); }

std::optional<std::size_t> DiagnoseResult::best() const {
  if (as_given.vacuous || as_given.expected || hypotheses.empty() || !hypotheses.front().expected) return std::nullopt;
  return 0;
}

// The layer as given. An element that overflowed leaves the bounds without meaning there: no
// evidence either way (MISTRUSTED), whatever the fit.
// The elements judged (score leaves out those past the dtype's range) give the evidence; an
// overflow keeps the whole from passing (not judged there) but does not hide a wrong element
// elsewhere (judgement's order: evidence before doubt).
Verdict DiagnoseResult::verdict() const {
  judgement::Tally t;
  t.add(as_given.verdict());
  if (overflow_element) t.also(Verdict::Mistrusted);
  return t.verdict();
}

namespace {

// The bound's formula (commands/diagnose.hpp states it with its reasoning).
std::string bound_formula(bool fused_path) {
  std::string f =
      "|y - model| <= gamma_{k+8} |a| (sum|x w| + |b|) + gamma_8 (|a|(|c| + |m|) + |beta|) + "
      "u_s (1 + gamma_8)(|a||c| + |a||m| + |beta| + |y|) [+ batch-statistics error]";
  if (fused_path)
    f += ", or, for a fold computed and stored in the 16-bit dtype, the larger fused-path bound "
         "e_t |c - b| + e_w sum|x w| + e_b + gamma_{k+1} ((|a| + e_t + e_w) sum|x w| + |b'|) + u_s (|y| + ...) "
         "(e_t: the error of the channel's multiplier gamma / sqrt(var + eps), e_w: each folded weight's own "
         "rounding to the dtype per unit |w|, e_b: the folded bias's; the largest over the fold recipes in "
         "float32 and in the 16-bit arithmetic)";
  return f + "; model y = (c - m) a + beta per channel";
}

json fit_json(const ModelFit& f) {
  json j{{"verdict", name(f.verdict())},
         {"max_ratio_to_bound", std::isfinite(f.max_ratio) ? json(f.max_ratio) : json("inf")},
         {"elements_beyond_bound", f.beyond},
         {"max_abs_difference", f.max_abs_diff},
         {"nonfinite", f.nonfinite},
         {"residual_ulp", {{"max_abs", f.max_abs_ulp}, {"rms", f.rms_ulp}, {"p50_abs", f.p50_ulp}, {"p99_abs", f.p99_ulp}}}};
  if (f.worst) j["worst_element"] = {{"index", f.worst->index}, {"observed", f.worst->observed}, {"model", f.worst->model}};
  return j;
}

json hypothesis_json(const ModelFit& f) {
  json j = fit_json(f);
  j["name"] = f.name;
  j["description"] = f.description;
  j["fix"] = f.fix;
  if (!f.parameters.is_null()) j["parameters"] = f.parameters;
  return j;
}

reports::DiagnoseFacts facts(const DiagnoseResult& r) {
  reports::DiagnoseFacts f;
  if (r.overflow_element)
    f.overflow = reports::DiagnoseOverflow{*r.overflow_element, r.overflow_what, r.overflow_value, name(r.dtype)};
  if (r.narrow_multiplier)
    f.narrow_multiplier = reports::NarrowMultiplier{r.narrow_multiplier->first, r.narrow_multiplier->second,
                                                    info(r.dtype).max_finite, name(r.dtype)};
  f.vacuous = r.as_given.vacuous;
  f.expected = r.as_given.expected;
  f.max_ratio = r.as_given.max_ratio;
  if (r.as_given.worst) f.worst_element = r.as_given.worst->index;
  if (r.as_given.first_nonfinite)
    f.nonfinite = std::pair{*r.as_given.first_nonfinite, r.as_given.first_nonfinite_value};
  f.max_abs_ulp = r.as_given.max_abs_ulp;
  f.hypotheses = r.hypotheses.size();
  if (!r.hypotheses.empty()) {
    f.closest = r.hypotheses.front().name;
    f.closest_description = r.hypotheses.front().description;
    f.closest_explains = r.hypotheses.front().expected;
  }
  return f;
}

}  // namespace

json DiagnoseResult::to_json() const {
  json hj = json::array();
  for (const ModelFit& h : hypotheses) hj.push_back(hypothesis_json(h));
  const std::optional<std::size_t> b = best();
  json out = result_envelope("diagnose");
  out.update(json{{"dtype", name(dtype)},
                  {"layer", layer},
                  {"bn", {{"channels", channels}, {"eps", eps}, {"eps_given", eps_given}}},
                  {"bound", {{"kind", "deterministic"}, {"formula", bound_formula(fused_path)}, {"k", k}, {"u", u}}},
                  {"as_given", fit_json(as_given)},
                  {"verdict", name(verdict())},
                  {"best", b ? json(hypotheses[*b].name) : json(nullptr)},
                  {"hypotheses", hj},
                  {"summary", reports::diagnose_summary(facts(*this))}});
  if (b) out["fix"] = hypotheses[*b].fix;
  return out;
}

BnRule diagnose_bn_rule(const DiagnoseInput& in) {
  BnRule rule;
  rule.max_values = static_cast<std::int64_t>(in.x.data.size());
  const bool nc = in.x.shape.size() == 2 || in.x.shape.size() == 4;
  if (in.weights && in.weights->shape.size() == 4) rule.channels = static_cast<std::size_t>(in.weights->shape[0]);
  else if (!in.weights && nc) rule.channels = static_cast<std::size_t>(in.x.shape[1]);
  rule.dtype = in.observed.dtype;
  return rule;
}

}  // namespace foldcheck
