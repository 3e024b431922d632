#include "foldcheck/commands/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/envelope.hpp"
#include "diagnose_models.hpp"

namespace foldcheck {
namespace {

using namespace detail;

using json = nlohmann::json;

json score_json(const Score& s, const Layer& L, const std::vector<double>& obs, const Model& h) {
  json j{{"verdict", s.vacuous() ? "MISTRUSTED" : s.expected() ? "EXPECTED" : "UNEXPECTED"},
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

// An exact output (or conv output) past the dtype's range: the observed value is then an
// infinity, or a finite value no rounding of the exact one gives. Either way the difference
// is overflow, not rounding, and no rounding bound describes it (the ratio to the bound is
// inf or 0/0): nothing was compared, so the verdict is MISTRUSTED, as explain's is for
// folds past the range. The reason, or "".
std::string overflow_note(const Layer& L, const Model& given) {
  for (std::size_t i = 0; i < L.c.size(); ++i) {
    const std::size_t ch = L.channel(i, given.nhwc);
    const ld y = (L.c[i] - given.m[ch]) * given.a[ch] + given.beta[ch];
    // The inputs are finite (checked when read), so an exact value that is not finite
    // overflowed the reference's double approximation: past every dtype's range.
    for (const auto& [v, what] : {std::pair{L.c[i], "conv output"}, std::pair{y, "output"}})
      if (!std::isfinite(v) || !std::isfinite(round_to(L.dtype, static_cast<double>(v))))
        return fmt::format("the layer's exact {} at element {} is {}, past {}'s range: an overflow, not rounding, "
                           "which no rounding bound covers, so nothing was compared (MISTRUSTED)",
                           what, i, std::isfinite(v) ? fmt::format("{:.4g}", static_cast<double>(v)) : "beyond 1.8e308",
                           name(L.dtype));
  }
  return "";
}

}  // namespace

json diagnose(const DiagnoseInput& in) {
  // Shapes.
  std::vector<std::int64_t> xs = in.x.shape;
  if (xs.size() == 2) xs = {xs[0], xs[1], 1, 1};
  if (xs.size() != 4) throw InputError("`x` must be NCHW (4-D) or N x C (2-D)");
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
  if (ys.size() != 4 || ys[0] != N) throw InputError("`observed` must have the input's batch size and 2 or 4 dimensions");
  json layer = json::object();
  if (in.weights) {
    const auto& ws = in.weights->shape;
    if (ws.size() != 4) throw InputError("`weights` must be OIHW (4-D)");
    g.O = ws[0];
    g.KH = ws[2];
    g.KW = ws[3];
    if (ws[1] <= 0 || Cin % ws[1]) throw InputError("`weights`: in_channels/groups does not divide the input's channels");
    g.groups = Cin / ws[1];
    if (g.O % g.groups) throw InputError("`weights`: output channels not divisible by the groups");
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
      throw InputError(fmt::format("`observed` has shape [{}, {}, {}, {}], which no padding gives for this conv "
                                   "(stride {}, dilation {}); pass `padding`/`stride`",
                                   ys[0], ys[1], ys[2], ys[3], in.stride, in.dilation));
    if (!in.conv_bias.empty() && static_cast<std::int64_t>(in.conv_bias.size()) != g.O)
      throw InputError("`conv_bias` must have one value per output channel");
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
    if (ys != xs) throw InputError("`observed` must have the input's shape when the layer is a BatchNorm alone");
    L.c.assign(in.x.data.begin(), in.x.data.end());
    L.C = Cin;
    L.plane = H * W;
    layer = {{"conv", nullptr}};
  }
  layer["input"] = xs;
  layer["output"] = ys;
  if (in.observed.data.size() != L.c.size()) throw InputError("`observed` has the wrong number of elements");
  const ref::BnParams& bn = in.bn;
  if (static_cast<std::int64_t>(bn.gamma.size()) != L.C)
    throw InputError(fmt::format("BatchNorm has {} channels, the layer's output has {}", bn.gamma.size(), L.C));
  const std::vector<double>& obs = in.observed.data;

  // The layer as given.
  const Model given = as_given(bn);
  const std::string overflow = overflow_note(L, given);
  const Score gs = score(given, L, obs);

  const std::vector<Model> hyps = hypotheses(bn, L, obs);
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
  if (!overflow.empty()) {
    summary = overflow;
  } else if (gs.vacuous()) {
    summary = "every value of the layer as given is zero: the observation matches, but a wrong scale or shift would "
              "match too, so this compares nothing (MISTRUSTED)";
  } else if (ok) {
    summary = fmt::format("the observed output is the layer as given, up to rounding (worst element at {:.3g} of "
                          "its bound, max {:.3g} ULP)",
                          gs.max_ratio, gs.max_abs_ulp);
  } else if (!scored.empty() && scored.front().first.expected()) {
    best = scored.front().second->name;
    // The fix is its own field (and its own line in the text): not repeated here.
    summary = fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound); "
                          "explained by {}: {}",
                          gs.max_ratio, scored.front().second->name, scored.front().second->description);
  } else {
    summary = fmt::format("beyond the rounding bound of the layer as given (worst element {:.3g}x its bound), and "
                          "none of the {} hypotheses explains it to within rounding; closest: {}",
                          gs.max_ratio, scored.size(), scored.empty() ? "-" : scored.front().second->name);
  }
  json out = result_envelope("diagnose");
  out.update(json{{"dtype", name(L.dtype)},
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
           {"verdict", !overflow.empty() || gs.vacuous() ? "MISTRUSTED" : ok ? "EXPECTED" : "UNEXPECTED"},
           {"best", best},
           {"hypotheses", hj},
           {"summary", summary}});
  if (!best.is_null()) out["fix"] = scored.front().second->fix;
  return out;
}

}  // namespace foldcheck
