#include "foldcheck/layer/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/numerics/histogram.hpp"
#include "foldcheck/layer/layer_math.hpp"
#include "foldcheck/numerics/xnum.hpp"
#include "conv_kernels.hpp"

namespace foldcheck {
namespace {

// Everything a replay of one output needs, converted once.
struct Replay {
  const Graph& g;
  const Node& conv;
  const Node& bnn;
  PathSpec path;
  DType dt, arith, wdtype;
  std::int64_t per_channel;
  std::vector<XNum> x, w, conv_bias;
  std::vector<XNum> exact_scale, exact_bias;  // Recipe::Exact: the reference's fold (double-double)

  Replay(const Graph& graph, const std::vector<double>& xin, const PathSpec& p, const ref::Options& ro)
      : g(graph), conv(graph.nodes.at(0)), bnn(graph.nodes.at(1)), path(p), dt(graph.dtype),
        arith(info(graph.dtype).arithmetic), wdtype(p.policy.arith.weight_dtype.value_or(graph.dtype)),
        per_channel(conv.geometry.terms_per_output()) {
    // XNum rounds to float32 or float64 only; a fold in a 16-bit arithmetic (explain and
    // observed-fold checks) is never attributed.
    if (p.policy.arith.fold_dtype.value_or(arith) != arith) throw InputError("attribution does not model a fold computed in 16-bit arithmetic");
    x.assign(xin.begin(), xin.end());
    w.assign(conv.weight.data.begin(), conv.weight.data.end());
    conv_bias.assign(conv.bias.begin(), conv.bias.end());
    if (path.recipe == Recipe::Exact) {
      const ref::BnParams& bn = bnn.bn;
      for (std::size_t o = 0; o < bn.gamma.size(); ++o) {
        const ref::Value t = ref::fold_scale(bn.gamma[o], bn.var[o], bn.eps, ro);
        const ref::Value b = ref::fold_bias(conv.bias.empty() ? 0.0 : conv.bias[o], bn.gamma[o], bn.beta[o], bn.mean[o],
                                            bn.var[o], bn.eps, ro);
        exact_scale.emplace_back(t.approx.hi, t.approx.lo);
        exact_bias.emplace_back(b.approx.hi, b.approx.lo);
      }
    }
  }

  XNum conv_value(const XNum* wo, const XNum* bias, std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow,
                  std::vector<XNum>& scratch) const {
    StageScope<XNum> st(Stage::Accumulation);
    const ref::ConvGeometry& geo = conv.geometry;
    const Policy& p = path.policy;
    if (p.order.kind != Accumulation::Winograd)
      return detail::conv_output(geo, x.data(), wo, bias, p.order, p.arith.fma, n, o, oh, ow, scratch.data());
    const std::int64_t cg = geo.C / geo.groups;
    std::vector<XNum> U(static_cast<std::size_t>(cg * 16));
    for (std::int64_t c = 0; c < cg; ++c) detail::winograd_filter(&wo[c * 9], &U[c * 16]);
    XNum tile[4];
    detail::winograd_tile(geo, x.data(), U.data(), bias, p.arith.fma, n, o, oh - oh % 2, ow - ow % 2, tile);
    return tile[(oh % 2) * 2 + ow % 2];
  }

  // Output i of the path in the given mode, with the stages in `mask` exact (Replay).
  XNum run(std::size_t i, XMode mode, unsigned mask, std::vector<XNum>& tape, std::vector<XNum>& scratch,
           std::vector<XNum>& wf) const {
    XContext& ctx = xcontext();
    ctx.arith = arith;
    ctx.mode = mode;
    ctx.exact_mask = mask;
    ctx.stage = Stage::Accumulation;
    ctx.tape = &tape;
    ctx.pos = 0;
    if (mode == XMode::Record) tape.clear();
    const ref::ConvGeometry& geo = conv.geometry;
    const std::int64_t OH = geo.OH(), OW = geo.OW();
    const std::int64_t ii = static_cast<std::int64_t>(i);
    const std::int64_t ow = ii % OW, oh = (ii / OW) % OH, o = (ii / (OW * OH)) % geo.O, n = ii / (OW * OH * geo.O);
    const std::size_t uo = static_cast<std::size_t>(o);
    const Arithmetic& ar = path.policy.arith;
    if (!path.recipe) {
      XNum c = conv_value(&w[o * per_channel], conv_bias.empty() ? nullptr : &conv_bias[uo], n, o, oh, ow, scratch);
      {
        StageScope<XNum> st(Stage::Output);
        c = store(c, dt);
      }
      XNum y = bn_apply<XNum>(c, bnn.bn, uo, path.policy.bn_form, ar, arith);
      StageScope<XNum> st(Stage::Output);
      return store(y, dt);
    }
    const Recipe r = *path.recipe;
    XNum bias, post;
    bool has_post = false;
    if (r == Recipe::Exact) {
      StageScope<XNum> sw(Stage::Weight);
      for (std::int64_t k = 0; k < per_channel; ++k)
        wf[k] = store(exact_product(w[o * per_channel + k], exact_scale[uo]), wdtype);
      StageScope<XNum> sb(Stage::Bias);
      bias = store(exact_bias[uo], dt);
    } else {
      const FoldScalars<XNum> f = fold_scalars(r, fold_inputs<XNum>(bnn.bn, uo, conv.bias, r, arith), ar);
      {
        StageScope<XNum> sw(Stage::Weight);
        for (std::int64_t k = 0; k < per_channel; ++k) wf[k] = store(w[o * per_channel + k] * f.scale, wdtype);
      }
      StageScope<XNum> sb(Stage::Bias);
      bias = store(f.bias, dt);
      if (f.has_post_add) {
        post = store(f.post_add, dt);
        has_post = true;
      }
    }
    XNum c = conv_value(wf.data(), &bias, n, o, oh, ow, scratch);
    {
      StageScope<XNum> st(Stage::Output);
      c = store(c, dt);
    }
    if (has_post) {
      {
        StageScope<XNum> st(Stage::Bias);
        c = c + post;
      }
      StageScope<XNum> st(Stage::Output);
      c = store(c, dt);
    }
    return c;
  }
};

// (a - b) / s for double-doubles a, b, to double precision.
double diff_ulp(const XNum& a, const XNum& b, double s) {
  const long double d = (static_cast<long double>(a.hi) - b.hi) + (static_cast<long double>(a.lo) - b.lo);
  return static_cast<double>(d / s);
}

std::vector<Stage> stages_of(const PathSpec& p) {
  if (!p.recipe) return {Stage::VarEps, Stage::Rsqrt, Stage::Scale, Stage::Bias, Stage::Accumulation, Stage::Output};
  if (*p.recipe == Recipe::Exact) return {Stage::Weight, Stage::Bias, Stage::Accumulation, Stage::Output};
  return {Stage::VarEps, Stage::Rsqrt, Stage::Scale, Stage::Weight, Stage::Bias, Stage::Accumulation, Stage::Output};
}

}  // namespace

Attribution attribute(const Graph& unfused, const std::vector<double>& x, const ref::LayerResult& exact,
                      const PathSpec& path, const std::vector<double>& y, const std::vector<std::size_t>& elements,
                      const ref::Options& ref_opts, unsigned threads) {
  if (unfused.nodes.size() != 2 || unfused.nodes[0].kind != Node::Kind::Conv ||
      unfused.nodes[1].kind != Node::Kind::BatchNorm)
    throw std::invalid_argument("attribution: expects the unfused Conv -> BatchNorm graph");
  const Replay R(unfused, x, path, ref_opts);
  const std::vector<Stage> stages = stages_of(path);
  Attribution a;
  a.elements = elements;
  const std::size_t E = elements.size();
  a.total.resize(E);
  a.residual.resize(E);
  for (Stage s : stages) a.contribution[static_cast<unsigned>(s)].resize(E);
  unsigned all = 0;
  for (Stage s : stages) all |= bit(s);

  const unsigned nt = static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(threads ? threads : std::max(1u, std::thread::hardware_concurrency()), E)));
  std::vector<std::size_t> mismatches(nt, 0);
  std::vector<double> replay_err(nt, 0.0), ident_err(nt, 0.0);
  auto work = [&](unsigned t) {
    std::vector<XNum> scratch(static_cast<std::size_t>(R.per_channel) + 1), wf(static_cast<std::size_t>(R.per_channel));
    std::vector<XNum> tape;
    for (std::size_t e = t; e < E; e += nt) {
      const std::size_t i = elements[e];
      const XNum xe(exact.y[i].approx.hi, exact.y[i].approx.lo);
      const double s = ulp(unfused.dtype, xe.hi, xe.lo);
      const XNum yf = R.run(i, XMode::Record, 0, tape, scratch, wf);
      if (yf.hi != y[i] || yf.lo != 0) ++mismatches[t];
      const XNum yr = R.run(i, XMode::Replay, 0, tape, scratch, wf);    // = y up to ~2^-100
      const XNum yx = R.run(i, XMode::Replay, all, tape, scratch, wf);  // = x up to ~2^-100
      replay_err[t] = std::max({replay_err[t], std::fabs(diff_ulp(yx, xe, s)), std::fabs(diff_ulp(yr, yf, s))});
      a.total[e] = diff_ulp(XNum(y[i]), xe, s);
      long double sum = 0;
      for (Stage st : stages) {
        const XNum ys = R.run(i, XMode::Replay, bit(st), tape, scratch, wf);
        const double c = diff_ulp(yr, ys, s);
        a.contribution[static_cast<unsigned>(st)][e] = c;
        sum += c;
      }
      a.residual[e] = static_cast<double>(a.total[e] - sum);
      ident_err[t] = std::max(ident_err[t], static_cast<double>(std::fabs(a.total[e] - (sum + a.residual[e]))));
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (unsigned t = 0; t < nt; ++t) {
    a.replay_mismatches += mismatches[t];
    a.replay_error_ulp = std::max(a.replay_error_ulp, replay_err[t]);
    a.identity_error_ulp = std::max(a.identity_error_ulp, ident_err[t]);
  }
  return a;
}

std::vector<std::size_t> attribution_sample(std::size_t outputs, std::size_t limit,
                                            const std::vector<std::size_t>& worst) {
  std::vector<std::size_t> v;
  if (limit == 0 || outputs <= limit) {
    v.resize(outputs);
    for (std::size_t i = 0; i < outputs; ++i) v[i] = i;
    return v;
  }
  const std::size_t n = limit > worst.size() ? limit - worst.size() : 1;
  for (std::size_t k = 0; k < n; ++k) v.push_back(k * outputs / n);
  for (std::size_t w : worst)
    if (w < outputs) v.push_back(w);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

namespace {

struct Stats {
  double rms = 0, max_abs = 0, mean = 0, sum_sq = 0;
};
Stats stats_of(const std::vector<double>& v) {
  Stats s;
  long double sq = 0, sum = 0;
  for (double d : v) {
    sq += static_cast<long double>(d) * d;
    sum += d;
    s.max_abs = std::max(s.max_abs, std::fabs(d));
  }
  if (!v.empty()) {
    s.rms = static_cast<double>(std::sqrt(sq / v.size()));
    s.mean = static_cast<double>(sum / v.size());
  }
  s.sum_sq = static_cast<double>(sq);
  return s;
}

nlohmann::json stats_json(const Stats& s, double energy) {
  return {{"rms_ulp", s.rms}, {"max_abs_ulp", s.max_abs}, {"mean_ulp", s.mean},
          {"share_rms", energy > 0 ? s.sum_sq / energy : 0.0}};
}

// Per-element shares: each element's squared contributions (and residual) as fractions
// of their sum, averaged over elements, so near-zero outputs with huge ULP errors do not
// dominate as they do in the energy-weighted share_rms. Index kNumStages: the residual.
std::array<double, kNumStages + 1> share_means(const Attribution& a) {
  std::array<long double, kNumStages + 1> share_sum{};
  std::size_t counted = 0;
  for (std::size_t e = 0; e < a.total.size(); ++e) {
    long double tot = static_cast<long double>(a.residual[e]) * a.residual[e];
    for (const auto& c : a.contribution)
      if (!c.empty()) tot += static_cast<long double>(c[e]) * c[e];
    if (!(tot > 0)) continue;
    ++counted;
    for (unsigned k = 0; k < kNumStages; ++k)
      if (!a.contribution[k].empty()) share_sum[k] += static_cast<long double>(a.contribution[k][e]) * a.contribution[k][e] / tot;
    share_sum[kNumStages] += static_cast<long double>(a.residual[e]) * a.residual[e] / tot;
  }
  std::array<double, kNumStages + 1> mean{};
  for (unsigned k = 0; k <= kNumStages; ++k) mean[k] = counted ? static_cast<double>(share_sum[k] / counted) : 0.0;
  return mean;
}

// Each stage's statistics once; the totals the shares divide by.
struct StageTotals {
  std::array<Stats, kNumStages> st{};
  Stats rs, ts;      // the residual's and the total's
  double energy = 0;  // sum of squares over the stages and the residual
  double max_sum = 0;  // sum of the stages' and the residual's max |contribution|
};

StageTotals stage_totals(const Attribution& a) {
  StageTotals t;
  t.rs = stats_of(a.residual);
  t.ts = stats_of(a.total);
  t.energy = t.rs.sum_sq;
  for (unsigned k = 0; k < kNumStages; ++k)
    if (!a.contribution[k].empty()) {
      t.st[k] = stats_of(a.contribution[k]);
      t.energy += t.st[k].sum_sq;
      t.max_sum += t.st[k].max_abs;
    }
  t.max_sum += t.rs.max_abs;
  return t;
}

// One entry per attributed stage: its statistics, shares and histogram.
nlohmann::json stages_json(const Attribution& a, const StageTotals& t, const std::array<double, kNumStages + 1>& share_mean) {
  nlohmann::json stages = nlohmann::json::array();
  for (unsigned k = 0; k < kNumStages; ++k) {
    const auto& c = a.contribution[k];
    if (c.empty()) continue;
    const Stats& s = t.st[k];
    nlohmann::json j = stats_json(s, t.energy);
    j["stage"] = name(static_cast<Stage>(k));
    j["share_max"] = t.max_sum > 0 ? s.max_abs / t.max_sum : 0.0;
    j["share_mean"] = share_mean[k];
    Histogram h = Histogram::for_ulp();
    for (double d : c) h.add(d);
    j["histogram"] = to_json(h);
    stages.push_back(j);
  }
  return stages;
}

// The element with the largest total error, with its decomposition (null without elements).
nlohmann::json worst_element_json(const Attribution& a) {
  nlohmann::json worst = nullptr;
  if (a.total.empty()) return worst;
  std::size_t e = 0;
  for (std::size_t k = 1; k < a.total.size(); ++k)
    if (std::fabs(a.total[k]) > std::fabs(a.total[e])) e = k;
  worst = {{"index", a.elements[e]}, {"total_ulp", a.total[e]}, {"residual_ulp", a.residual[e]}};
  nlohmann::json parts = nlohmann::json::object();
  for (unsigned k = 0; k < kNumStages; ++k)
    if (!a.contribution[k].empty()) parts[name(static_cast<Stage>(k))] = a.contribution[k][e];
  worst["contributions_ulp"] = parts;
  return worst;
}

// Element-wise sums over the attributed elements: sum of stages + residual = total.
nlohmann::json sums_json(const Attribution& a) {
  nlohmann::json sums = nlohmann::json::object();
  long double total_sum = 0;
  for (double t : a.total) total_sum += t;
  for (unsigned k = 0; k < kNumStages; ++k)
    if (!a.contribution[k].empty()) {
      long double s = 0;
      for (double d : a.contribution[k]) s += d;
      sums[name(static_cast<Stage>(k))] = static_cast<double>(s);
    }
  long double rsum = 0;
  for (double d : a.residual) rsum += d;
  sums["residual"] = static_cast<double>(rsum);
  sums["total"] = static_cast<double>(total_sum);
  return sums;
}

}  // namespace

nlohmann::json to_json(const Attribution& a) {
  using json = nlohmann::json;
  const std::array<double, kNumStages + 1> share_mean = share_means(a);
  const StageTotals t = stage_totals(a);
  const json stages = stages_json(a, t, share_mean);
  json res = stats_json(t.rs, t.energy);
  res["share_max"] = t.max_sum > 0 ? t.rs.max_abs / t.max_sum : 0.0;
  res["share_mean"] = share_mean[kNumStages];
  return {{"shares",
           "share_mean: each element's squared contributions as fractions of their sum, averaged over elements; "
           "share_rms: sum over elements of squared contributions / total (dominated by the largest ULP errors); "
           "share_max: max |contribution| / sum of the stages' max"},
          {"method", "one stage exact at a time, the other stages' rounding errors held at their recorded values; "
                     "ULP of the storage dtype at the exact value"},
          {"elements", a.elements.size()},
          {"total", {{"rms_ulp", t.ts.rms}, {"max_abs_ulp", t.ts.max_abs}, {"mean_ulp", t.ts.mean}}},
          {"stages", stages},
          {"residual", res},
          {"sums_ulp", sums_json(a)},
          {"worst_element", worst_element_json(a)},
          {"checks",
           {{"replay_mismatches", a.replay_mismatches},
            {"all_exact_replay_error_ulp", a.replay_error_ulp},
            {"identity_error_ulp", a.identity_error_ulp}}}};
}

nlohmann::json fold_order_json(const Attribution& f, const Attribution& u) {
  using json = nlohmann::json;
  if (f.elements != u.elements) throw std::invalid_argument("fold order: attributions over different elements");
  const std::size_t E = f.elements.size();
  std::vector<double> order(E), params(E), resid(E), diff(E);
  auto at = [](const Attribution& a, Stage s, std::size_t e) {
    const auto& c = a.contribution[static_cast<unsigned>(s)];
    return c.empty() ? 0.0L : static_cast<long double>(c[e]);
  };
  for (std::size_t e = 0; e < E; ++e) {
    const long double of = at(f, Stage::Accumulation, e) + at(f, Stage::Output, e);
    const long double ou = at(u, Stage::Accumulation, e) + at(u, Stage::Output, e);
    long double pf = 0, pu = 0;
    for (Stage s : {Stage::VarEps, Stage::Rsqrt, Stage::Scale, Stage::Weight, Stage::Bias}) {
      pf += at(f, s, e);
      pu += at(u, s, e);
    }
    order[e] = static_cast<double>(of - ou);
    params[e] = static_cast<double>(pf - pu);
    resid[e] = static_cast<double>(static_cast<long double>(f.residual[e]) - u.residual[e]);
    diff[e] = static_cast<double>(static_cast<long double>(f.total[e]) - u.total[e]);
  }
  const Stats so = stats_of(order), sp = stats_of(params), sr = stats_of(resid), sd = stats_of(diff);
  const double energy = so.sum_sq + sp.sum_sq + sr.sum_sq;
  Histogram h = Histogram::for_ulp();
  for (double d : order) h.add(d);
  json jo = stats_json(so, energy);
  jo["histogram"] = to_json(h);
  return {{"method", "(accumulation + output) fused - (accumulation + output) unfused, per element, ULP at the exact value"},
          {"elements", E},
          {"difference", {{"rms_ulp", sd.rms}, {"max_abs_ulp", sd.max_abs}, {"mean_ulp", sd.mean}}},
          {"fold_order", jo},
          {"parameters", stats_json(sp, energy)},
          {"residual", stats_json(sr, energy)}};
}

}  // namespace foldcheck
