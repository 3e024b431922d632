#include "foldcheck/commands/run_case.hpp"

#include "foldcheck/io/limits.hpp"

#include <functional>
#include <optional>
#include <stdexcept>
#include <cmath>
#include <fmt/format.h>

#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/base/envelope.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

ref::LayerData layer_of(const Graph& g, const std::vector<double>& x) {
  const Node& conv = g.nodes.at(0);
  ref::LayerData L;
  L.geometry = conv.geometry;
  L.x = &x;
  L.w = &conv.weight.data;
  L.bias = conv.bias.empty() ? nullptr : &conv.bias;
  L.bn = g.nodes.size() > 1 ? &g.nodes[1].bn : nullptr;
  return L;
}

ScoredCheck scored(const std::string& label, const Comparison& c, const std::string& formula) {
  ScoredCheck s;
  s.name = label;
  s.comparison = c;
  s.formula = formula;
  return s;
}

// What one dtype's run shares: the case, its data, the reference and the exact fold. Each
// method scores one part and returns its typed node.
struct DtypeRun {
  const CaseSpec& spec;
  const RunOptions& opts;
  const std::function<void(const std::string&)>& say;
  DType dt;
  const CaseData& data;
  const ref::LayerResult& exact;
  std::vector<ref::Value> wexact, bexact;  // exact fold of every weight and bias
  std::size_t internal_errors = 0;  // attribution replays that did not reproduce evaluate()

  const Node& conv() const { return data.graph.nodes[0]; }
  std::int64_t per_channel() const { return conv().geometry.terms_per_output(); }

  void fold_exactly() {
    const Node& c = conv();
    const ref::BnParams& bn = data.graph.nodes[1].bn;
    wexact.resize(c.weight.data.size());
    bexact.resize(static_cast<std::size_t>(c.geometry.O));
    for (std::size_t k = 0; k < wexact.size(); ++k) {
      const std::size_t o = k / static_cast<std::size_t>(per_channel());
      wexact[k] = ref::fold_weight(c.weight.data[k], bn.gamma[o], bn.var[o], bn.eps, opts.ref);
    }
    for (std::size_t o = 0; o < bexact.size(); ++o)
      bexact[o] = ref::fold_bias(c.bias.empty() ? 0.0 : c.bias[o], bn.gamma[o], bn.beta[o], bn.mean[o], bn.var[o], bn.eps,
                                 opts.ref);
  }

  // A recipe that holds eps in float32 (recipes.hpp) folds with float(eps), which moves
  // var + eps by |float(eps) - eps| and so the scale 1/sqrt(var + eps) by half that relative
  // to var + eps: invisible in float32, hundreds of float64 ULP for a fresh BatchNorm. The
  // bound charges it (eps_value); these facts let a report say so beside the row (one ULP
  // is 2u to u relative to the value). None for PyTorch, the exact fold or an exact eps.
  std::optional<EpsHeldInFloat32> eps_facts(Recipe r, DType wdt) const {
    const ref::BnParams& bn = data.graph.nodes[1].bn;
    const double eps32 = static_cast<double>(static_cast<float>(bn.eps)), shift = std::fabs(eps32 - bn.eps);
    if (r == Recipe::Exact || !eps_through_float32(r) || shift == 0) return std::nullopt;
    double rel = 0;
    for (const double v : bn.var) rel = std::max(rel, 0.5 * shift / std::fabs(v + bn.eps));
    const double u = info(wdt).unit_roundoff;
    return EpsHeldInFloat32{r, bn.eps, eps32, rel, rel / (2 * u), rel / u, wdt};
  }

  // Why a folded bias compared nothing: every exact folded bias is 0 (a fresh BatchNorm with
  // no conv bias), or each rounds to 0 or an infinity in the type.
  BiasMistrust mistrusted_bias_cause() const {
    for (const ref::Value& b : bexact)
      if (b.approx.hi != 0) return BiasMistrust::RoundsToZeroOrInfinity;
    return BiasMistrust::AllExactZero;
  }

  // One recipe's folded weights and biases against the exact fold.
  FoldedParameterCheck folded_parameters(const Graph& fused, Recipe r, const Arithmetic& ar) const {
    const Node& fc = fused.nodes[0];
    const FoldInfo& fi = *fc.fold;
    const std::vector<double>& w = conv().weight.data;
    FoldedParameterCheck out;
    out.recipe = r;
    out.arithmetic = ar;
    out.weight_dtype = ar.weight_dtype.value_or(dt);
    std::vector<double> wb(wexact.size()), bb(bexact.size());
    for (std::size_t k = 0; k < wb.size(); ++k) wb[k] = fi.weight_bound(k / static_cast<std::size_t>(per_channel()), w[k]);
    out.weights = scored("weights", compare(fc.weight.data, wexact, out.weight_dtype, &wb),
                         "|w' - w*gamma/sqrt(var+eps)| <= alpha*|w| + eta (recipe chain)");
    out.weights.eps_held = eps_facts(r, out.weight_dtype);
    // Drift of folded weights relative to the originals (what users print).
    for (std::size_t k = 0; k < wb.size(); ++k)
      if (w[k] != 0)
        out.max_drift_ppm = std::max(out.max_drift_ppm, std::fabs(1e6 * (fc.weight.data[k] - w[k]) / w[k]));
    if (!fi.has_post_add) {
      for (std::size_t o = 0; o < bb.size(); ++o) bb[o] = fi.bias[o].e;
      ScoredCheck b = scored("bias", compare(fc.bias, bexact, dt, &bb),
                             "running-error bound of the recipe's bias chain (scales with |b-mean|*|s| and |beta|)");
      if (b.verdict() == Verdict::Mistrusted) b.mistrusted_cause = mistrusted_bias_cause();
      else b.eps_held = eps_facts(r, dt);
      out.bias = std::move(b);
    }
    return out;
  }

  // One evaluated path: its output, bounds and comparison with the reference.
  struct Path {
    std::vector<double> y;
    BoundReport bounds;
    Comparison cmp;
  };
  Path evaluate_path(const Graph& g, const Policy& pol) const {
    Path p;
    p.y = evaluate(g, data.input, pol);
    p.bounds = error_bounds(g, exact, pol, opts.confidence, &data.input);
    p.cmp = compare(p.y, exact.y, dt, &p.bounds.bound, &p.bounds.probabilistic);
    return p;
  }

  // A path's node: its outputs scored with both bounds and the tolerances its bound implies.
  RunPath path_node(const std::optional<Recipe>& r, const Graph& g, const Path& p) const {
    RunPath out;
    out.recipe = r;
    out.graph = g.describe();
    out.scored = scored(r ? std::string("fused/") + name(*r) : std::string("unfused"), p.cmp, p.bounds.formula);
    out.scored.outputs =
        ScoredCheck::OutputBounds{p.bounds.lambda, p.bounds.confidence, tolerance_from_bounds(p.bounds.bound, exact.y)};
    if (r) out.scored.eps_held = eps_facts(*r, dt);  // its outputs carry the shift too
    return out;
  }

  std::optional<Attribution> attribution(const std::optional<Recipe>& r, const Policy& pol, const Path& p,
                                         const std::vector<std::size_t>& sample) {
    // Attribution replays the path's roundings stage by stage; converted conv operands are not
    // one of its stages.
    if (!opts.attribution || pol.arith.conv_operands.operands()) return std::nullopt;
    Attribution a = attribute(data.graph, data.input, exact, PathSpec{r, pol}, p.y, sample, opts.ref, opts.threads);
    internal_errors += a.replay_mismatches;
    return a;
  }

  // Fused vs unfused, per element, in ULP of the exact value; both sit within their
  // bounds of the same exact value, so |yf - yu| <= bf + bu.
  FusedVsUnfusedPair fused_vs_unfused(Recipe r, const Path& f, const Path& u) const {
    FusedVsUnfusedPair out;
    out.recipe = r;
    for (std::size_t i = 0; i < f.y.size(); ++i) {
      const double d = (f.y[i] - u.y[i]) / ulp(dt, exact.y[i].approx.hi, exact.y[i].approx.lo);
      out.histogram.add(d);
      if (f.y[i] != u.y[i]) ++out.elements_differing;
      out.max_abs_ulp = std::max(out.max_abs_ulp, std::fabs(d));
      if (bound_ratio(std::fabs(static_cast<long double>(f.y[i]) - u.y[i]), f.bounds.bound[i] + u.bounds.bound[i]) > 1)
        ++out.beyond_combined_bound;
    }
    return out;
  }

  // Every path of one accumulation order and arithmetic variant, with attribution.
  RunOrder order(const Order& acc, const Arithmetic& ar, const std::vector<Graph>& fused) {
    Policy pol;
    pol.order = acc;
    pol.bn_form = spec.bn_form;
    pol.threads = opts.threads;
    pol.arith = ar;
    const std::string al = ar.label();
    say(fmt::format("{}: {} {} unfused", name(dt), acc.label(), al));
    const Path u = evaluate_path(data.graph, pol);
    std::vector<Path> fs;
    std::vector<std::size_t> worst_idx;
    if (u.cmp.worst_index >= 0) worst_idx.push_back(static_cast<std::size_t>(u.cmp.worst_index));
    for (std::size_t k = 0; k < spec.recipes.size(); ++k) {
      say(fmt::format("{}: {} {} fused/{}", name(dt), acc.label(), al, name(spec.recipes[k])));
      fs.push_back(evaluate_path(fused[k], pol));
      if (fs.back().cmp.worst_index >= 0) worst_idx.push_back(static_cast<std::size_t>(fs.back().cmp.worst_index));
    }
    // Attribution over the same elements for every path of this order and variant.
    const std::vector<std::size_t> sample = attribution_sample(exact.y.size(), opts.attribution_elements, worst_idx);
    say(fmt::format("{}: {} {} attribution ({} elements per path)", name(dt), acc.label(), al, sample.size()));
    RunOrder out;
    out.accumulation = acc;
    out.arithmetic = ar;
    const std::optional<Attribution> au = attribution(std::nullopt, pol, u, sample);
    out.paths.push_back(path_node(std::nullopt, data.graph, u));
    if (au) out.paths.back().attribution = to_json(*au);
    for (std::size_t k = 0; k < spec.recipes.size(); ++k) {
      const Recipe r = spec.recipes[k];
      out.paths.push_back(path_node(r, fused[k], fs[k]));
      out.fused_vs_unfused.push_back(fused_vs_unfused(r, fs[k], u));
      if (const std::optional<Attribution> af = attribution(r, pol, fs[k], sample)) {
        out.paths.back().attribution = to_json(*af);
        if (au) out.fused_vs_unfused.back().fold_order = fold_order_json(*af, *au);
      }
    }
    return out;
  }

  RunDtype run() {
    fold_exactly();
    RunDtype out;
    out.dtype = dt;
    out.outputs = conv().geometry.output_size();
    out.terms_per_output = per_channel();
    out.reference.add(exact);
    for (const Arithmetic& ar : spec.variants) {
      std::vector<Graph> fused;
      for (Recipe r : spec.recipes) {
        say(fmt::format("{}: fold with {} ({})", name(dt), name(r), ar.label()));
        fused.push_back(fold_batchnorm(data.graph, r, opts.ref, ar));
        out.folded_parameters.push_back(folded_parameters(fused.back(), r, ar));
      }
      for (const Order& acc : spec.accumulations) out.orders.push_back(order(acc, ar, fused));
    }
    return out;
  }
};

}  // namespace

void apply_arithmetic(CaseSpec& spec, const std::string& arithmetic, const std::string& conversion) {
  if (arithmetic.empty() || arithmetic == "float32") {  // as the case says
    if (!conversion.empty())
      throw InputError(field("conversion") + " needs " + field("arithmetic") + " tf32, bf16 or fp16 (" +
                       (arithmetic.empty() ? std::string("none given") : "float32 converts no operand") + ")");
    return;
  }
  for (Arithmetic& v : spec.variants) set_conv_operands(v, arithmetic, conversion);
}

void apply_algorithm(CaseSpec& spec, const ConvAlgorithm& a) {
  switch (a.kind) {
    case ConvAlgorithmKind::Direct: return;
    case ConvAlgorithmKind::SplitK: {
      const std::int64_t k = std::max<std::int64_t>(spec.geometry.terms_per_output(), 1);
      spec.accumulations = {Order(Accumulation::Blocked, (k + a.splits - 1) / a.splits)};
      return;
    }
    case ConvAlgorithmKind::Winograd2:
      check_order(Order(Accumulation::Winograd), spec.geometry);
      spec.accumulations = {Order(Accumulation::Winograd)};
      return;
    default:
      throw InputError(field("algorithm") + " " + a.name() +
                       ": run evaluates direct sums, split-k:S and winograd2 (Winograd F(2x2,3x3)); an output "
                       "computed by Winograd's larger tiles or an FFT is judged by diagnose's " +
                       field("algorithm"));
  }
}

void check_case_fits(const CaseSpec& spec) {
  // ~240 bytes per output element measured (1x16x512x512, 1x1 conv: 999 MB peak with
  // attribution): the certified reference, every path's values and sorted errors.
  check_fits_in_memory(static_cast<std::uint64_t>(spec.geometry.output_size()), 256, spec.path + ": case " + spec.name);
}

void ReferenceCounts::add(const ref::LayerResult& r) {
  escalations += r.escalations;
  fast_certified += r.fast_certified;
  compensated += r.compensated;
  fallbacks += r.fallbacks;
  max_precision = std::max(max_precision, r.max_precision_used);
}

namespace {

json layer_json(const RunResult& r) {
  const ref::ConvGeometry& g = r.geometry;
  return {{"input", {g.N, g.C, g.H, g.W}},
          {"out_channels", g.O},
          {"kernel", {g.KH, g.KW}},
          {"stride", {g.stride_h, g.stride_w}},
          {"padding", {g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}},
          {"dilation", {g.dil_h, g.dil_w}},
          {"groups", g.groups},
          {"conv_bias", r.conv_bias},
          {"eps", r.eps},
          {"bn_form", name(r.bn_form)}};
}

json reference_json(const ReferenceCounts& c, long precision) {
  return {{"arithmetic", "certified correct rounding: exact products summed in double with a gamma_K radius, "
                         "BatchNorm in binary64 with a running error bound, a compensated (TwoSum) re-sum with "
                         "double-double BatchNorm for outputs near a rounding boundary (fast path), else MPFR "
                         "interval arithmetic with directed rounding"},
          {"precision_bits", precision},
          {"escalations", c.escalations},
          {"fast_path_certified", c.fast_certified},
          {"fast_path_compensated", c.compensated},
          {"fast_path_fallbacks", c.fallbacks},
          {"max_precision_used", c.max_precision}};
}

// The case's observed engine weights (a prefix of the first dtype's weights) explained
// against its BatchNorm; each element labelled by its OIHW index and output channel.
ObservedWeights observed_weights(const CaseSpec& spec, const std::vector<double>& weights, const ref::BnParams& bn,
                                 const RunOptions& opts) {
  const auto& obs = *spec.observed_weights_prefix;
  const std::int64_t per_channel = spec.geometry.terms_per_output();
  ExplainInput ei;
  ei.dtype = spec.dtypes.front();
  ei.ref_options = opts.ref;
  ei.bn_given = true;
  ei.bn_source = "the case's BatchNorm";
  for (std::size_t i = 0; i < obs.size(); ++i) ei.observed.push_back(round_to(ei.dtype, obs[i]));
  ei.original.assign(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(obs.size()));
  // One BN channel per observed element (its output channel).
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const std::size_t o = i / per_channel;
    ei.bn.gamma.push_back(bn.gamma[o]);
    ei.bn.beta.push_back(bn.beta[o]);
    ei.bn.mean.push_back(bn.mean[o]);
    ei.bn.var.push_back(bn.var[o]);
    ei.bn.eps = bn.eps;
  }
  ObservedWeights out{explain(ei), {}, spec.observed_note};
  // explain() sees one BatchNorm channel per observed element, so its "channel" is the
  // element's position; label each element by its own OIHW index and output channel.
  const std::int64_t khw = spec.geometry.KH * spec.geometry.KW;
  for (const ExplainElement& e : out.explanation.elements) {
    const std::int64_t k = static_cast<std::int64_t>(e.index);
    const std::int64_t o = k / per_channel, r = k % per_channel;
    out.labels.push_back({o, {o, r / khw, (r % khw) / spec.geometry.KW, r % spec.geometry.KW}});
  }
  return out;
}

}  // namespace

Verdict RunResult::verdict() const {
  judgement::Tally t;
  for (const RunDtype& d : dtypes) t.add(d.verdict());
  if (observed) t.add(observed->verdict());
  return t.verdict();
}

json RunResult::to_json() const {
  json out = result_envelope("run");
  json per_dtype = json::array();
  for (const RunDtype& d : dtypes) per_dtype.push_back(d.to_json());
  out.update(json{{"case", {{"name", case_name}, {"path", case_path}, {"description", description}}},
                  {"seed", seed},
                  {"layer", layer_json(*this)},
                  {"reference", reference_json(reference, precision)},
                  {"dtypes", per_dtype},
                  {"verdict", name(verdict())}});
  if (observed) out["observed_weights"] = observed->to_json();
  return out;
}

RunResult run_case(const CaseSpec& spec, const RunOptions& opts) {
  check_case_fits(spec);
  const std::function<void(const std::string&)> say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  RunResult out;
  out.case_name = spec.name;
  out.case_path = spec.path;
  out.description = spec.description;
  out.seed = spec.seed;
  out.geometry = spec.geometry;
  out.conv_bias = spec.conv_bias;
  out.eps = spec.eps;
  out.bn_form = spec.bn_form;
  out.precision = opts.ref.precision;
  std::size_t internal_errors = 0;
  // The first dtype's weights and BatchNorm, for explaining observed weights afterwards.
  std::vector<double> first_weights;
  ref::BnParams first_bn;
  for (DType dt : spec.dtypes) {
    const CaseData data = materialize(spec, dt);
    const Node& conv = data.graph.nodes[0];
    if (dt == spec.dtypes.front()) {
      first_weights = conv.weight.data;
      first_bn = data.graph.nodes[1].bn;
    }
    say(fmt::format("{}: reference conv+BN ({} outputs x {} terms)", name(dt), conv.geometry.output_size(),
                    conv.geometry.terms_per_output()));
    // Certify the rounding into this dtype only: float32 and narrower data then takes the
    // reference's fast path (conv_bn_reference.hpp); float64 stays multiprecision.
    ref::Options ro = opts.ref;
    ro.formats = ref::format_bit(*info(dt).format);
    const ref::LayerResult exact = ref::conv_bn(layer_of(data.graph, data.input), ro);
    out.reference.add(exact);
    DtypeRun run{spec, opts, say, dt, data, exact, {}, {}};
    out.dtypes.push_back(run.run());
    internal_errors += run.internal_errors;
  }
  if (spec.observed_weights_prefix) out.observed = observed_weights(spec, first_weights, first_bn, opts);
  if (internal_errors)
    throw std::logic_error("internal error: " + std::to_string(internal_errors) +
                           " attribution replays differ from the float path (please report)");
  return out;
}

}  // namespace foldcheck
