// Fold, then quantize (quant_check.hpp).
#include "foldcheck/quant/quant_check.hpp"

#include <cmath>

#include <fmt/format.h>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/base/envelope.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

struct Prepared {
  std::int64_t channels = 0, per_channel = 0;
  ref::ValueArray exact;        // the exact fold, certified
  std::vector<double> scales;   // one per tensor or per channel
  std::string scale_source;
  double scale_of(std::size_t i, bool per_channel_spec) const {
    return per_channel_spec ? scales[i / static_cast<std::size_t>(per_channel)] : scales[0];
  }
};

Prepared prepare(const QuantCheckInput& in) {
  Prepared p;
  if (in.weights.shape.empty() || in.weights.data.empty()) throw InputError("quant-check: no weights");
  p.channels = in.weights.shape[0];
  p.per_channel = static_cast<std::int64_t>(in.weights.data.size()) / p.channels;
  for (const auto* v : {&in.bn.gamma, &in.bn.beta, &in.bn.mean, &in.bn.var})
    if (static_cast<std::int64_t>(v->size()) != p.channels)
      throw InputError(fmt::format("quant-check: the BatchNorm has {} channels, the weights {}", v->size(), p.channels));
  if (in.spec.bits < 2 || in.spec.bits > 16) throw InputError("quant-check: bits must be 2..16");
  ref::Options ro = in.ref;
  ro.formats = ref::format_bit(*info(in.weights.dtype).format);
  p.exact = ref::fold_weights(in.weights.data, p.per_channel, in.bn, ro);
  if (in.scales) {
    p.scales = *in.scales;
    const std::size_t want = in.spec.per_channel ? static_cast<std::size_t>(p.channels) : 1;
    if (p.scales.size() != want)
      throw InputError(fmt::format("quant-check: {} scales given, {} expected ({})", p.scales.size(), want,
                                   in.spec.per_channel ? "one per output channel" : "per tensor: one"));
    for (const double s : p.scales)
      if (!(s > 0) || !std::isfinite(s)) throw InputError(fmt::format("quant-check: scale {} is not a positive number", s));
    p.scale_source = "given";
  } else {
    std::vector<double> x(p.exact.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = p.exact.approx(i).hi;
    p.scales = quant_scales(x, p.per_channel, in.spec);
    p.scale_source = fmt::format("max |exact fold| / {}{}", in.spec.qmax(), in.spec.pow2 ? ", rounded up to a power of two" : "");
  }
  return p;
}

// Every recipe (recipes.hpp): a new one is checked here without a second list.
const std::vector<Recipe>& checked_recipes() { return all_recipes(); }

// The expected integers: the exact fold quantized with the scales.
std::vector<ExactQuant> expected_integers(const Prepared& p, const QuantSpec& q) {
  const std::size_t n = p.exact.size();
  std::vector<ExactQuant> ex(n);
  for (std::size_t i = 0; i < n; ++i) ex[i] = quantize_exact(p.exact.approx(i), p.scale_of(i, q.per_channel), q);
  return ex;
}

// Which rounding of recipe rc crossed the tie of weight i (channel o, scale s): the square
// root alone (w gamma / sqrt_f32(var + eps), the rest exact), then the recipe's whole scale t
// (its reciprocal or division and gamma product, in its order), else the final w * t.
const char* flip_stage(const QuantCheckInput& in, Recipe rc, const FoldedParams& unit, std::size_t i, std::size_t o,
                       double s, std::int64_t expected) {
  const QuantSpec& q = in.spec;
  const double w = in.weights.data[i];
  const double sq = static_cast<float>(std::sqrt(static_cast<double>(static_cast<float>(in.bn.var[o] + static_cast<float>(in.bn.eps)))));
  const ref::DoubleDouble wg = exact_product(w, in.bn.gamma[o]);
  const double qh = wg.hi / sq;
  const ref::DoubleDouble by_sqrt{qh, (std::fma(-qh, sq, wg.hi) + wg.lo) / sq};
  const bool sqrt_alone = quantize_exact(by_sqrt, s, q).q != expected;
  const bool scale_alone = quantize_exact(exact_product(w, unit.weight[o]), s, q).q != expected;
  return rc == Recipe::Exact ? "storage" : sqrt_alone ? "rsqrt" : scale_alone ? "fold_order" : "multiply";
}

// Recipe rc's fold: its integers against the expected ones (its flips), raising each
// weight's bound to the recipe's.
json recipe_flips(const QuantCheckInput& in, const Prepared& p, const std::vector<ExactQuant>& ex, Recipe rc,
                  std::vector<double>& bound) {
  const QuantSpec& q = in.spec;
  const FoldedParams fp = fold_parameters(in.weights.data, p.per_channel, {}, in.bn, in.weights.dtype, rc, in.ref);
  // The recipe's float scale t per channel: its fold of w = 1 (every recipe computes w * t
  // with one rounding, and 1 * t is exact).
  const FoldedParams unit = fold_parameters(std::vector<double>(static_cast<std::size_t>(p.channels), 1.0), 1, {}, in.bn,
                                            in.weights.dtype, rc, in.ref);
  json flips = json::array();
  for (std::size_t i = 0; i < ex.size(); ++i) {
    const std::size_t o = i / static_cast<std::size_t>(p.per_channel);
    bound[i] = std::max(bound[i], fp.info.weight_bound(o, in.weights.data[i]));
    const double s = p.scale_of(i, q.per_channel);
    const std::int64_t got = quantize_value(fp.weight[i], s, q);
    if (got == ex[i].q) continue;
    flips.push_back({{"index", unravel_index(in.weights.shape, i)},
                     {"flat_index", i},
                     {"recipe", got},
                     {"expected", ex[i].q},
                     {"tie_distance", ex[i].tie_distance},
                     {"stage", flip_stage(in, rc, unit, i, o, s, ex[i].q)}});
  }
  return {{"recipe", name(rc)}, {"flip_count", flips.size()}, {"flips", flips}};
}

// The result without the found integers: spec, weights, scales, near-tie count, bound and recipes.
json check_json(const QuantCheckInput& in, const Prepared& p, std::int64_t near, const json& recipes) {
  const QuantSpec& q = in.spec;
  json out = result_envelope("quant-check");
  out.update(json{{"spec",
            {{"bits", q.bits}, {"per_channel", q.per_channel}, {"pow2", q.pow2}, {"rounding", name(q.rounding)}, {"qmax", q.qmax()}}},
           {"weights", {{"shape", in.weights.shape}, {"dtype", name(in.weights.dtype)}, {"elements", p.exact.size()}}},
           {"scales", p.scales},
           {"scale_source", p.scale_source},
           {"expected_summary",
            {{"near_tie", near},
             {"note", "weights whose exact fold lies within a correct float fold's error bound of a rounding tie: "
                      "their integer may flip by one step under a correct engine"}}},
           {"bound", "B = max over the recipes pytorch, tvm, onnxruntime, onnxoptimizer and exact storage of the a-priori "
                     "bound |w' - w gamma/sqrt(var+eps)| <= alpha |w| + eta; a one-step flip is EXPECTED when the tie on "
                     "its side lies within B of the exact fold"},
           {"recipes", recipes}});
  return out;
}

// The found integers against the expected ones.
FoundCheck check_found(const QuantCheckInput& in, const Prepared& p, const std::vector<ExactQuant>& ex,
                       const std::vector<double>& bound) {
  const QuantSpec& q = in.spec;
  const std::size_t n = ex.size();
  if (in.found->size() != n)
    throw InputError(fmt::format("quant-check: {} integers given for {} weights", in.found->size(), n));
  FoundCheck fc;
  fc.mismatches = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t f = (*in.found)[i];
    fc.nonzero += f != 0;
    if (f == ex[i].q) continue;
    const double s = p.scale_of(i, q.per_channel);
    const std::int64_t diff = f - ex[i].q;
    // Steps from x / s to the tie between the expected integer and the found one.
    const double toward = diff > 0 ? 0.5 - ex[i].offset : 0.5 + ex[i].offset;
    const bool ok = (diff == 1 || diff == -1) && std::llabs(f) <= q.qmax() && toward * s <= bound[i];
    (ok ? fc.expected_flips : fc.unexpected) += 1;
    fc.mismatches.push_back({{"index", unravel_index(in.weights.shape, i)},
                             {"flat_index", i},
                             {"found", f},
                             {"expected", ex[i].q},
                             {"tie_distance", toward},
                             {"bound_steps", bound[i] / s},
                             {"verdict", ok ? "EXPECTED" : "UNEXPECTED"}});
  }
  fc.matching = static_cast<std::int64_t>(n - fc.mismatches.size());
  return fc;
}

}  // namespace

QuantizedFold quantized_fold(const QuantCheckInput& in, const std::string& fold) {
  const Prepared p = prepare(in);
  QuantizedFold r;
  r.scales = p.scales;
  if (fold == "exact") {
    for (std::size_t i = 0; i < p.exact.size(); ++i) r.q.push_back(quantize_exact(p.exact.approx(i), p.scale_of(i, in.spec.per_channel), in.spec).q);
    return r;
  }
  const Recipe rc = recipe_from_name(fold);
  const FoldedParams fp = fold_parameters(in.weights.data, p.per_channel, {}, in.bn, in.weights.dtype, rc, in.ref);
  for (std::size_t i = 0; i < fp.weight.size(); ++i) r.q.push_back(quantize_value(fp.weight[i], p.scale_of(i, in.spec.per_channel), in.spec));
  return r;
}

Verdict FoundCheck::verdict() const {
  return judgement::of_check({.failed = unexpected > 0, .informative = nonzero > 0});
}

json QuantCheckResult::to_json() const {
  json out = detail;
  if (found) {
    out["mismatches"] = found->mismatches;
    out["mismatch_counts"] = {
        {"expected_flips", found->expected_flips}, {"unexpected", found->unexpected}, {"matching", found->matching}};
  }
  out["verdict"] = name(verdict());
  return out;
}

json QuantCheckResult::weights_summary() const {
  return {{"scales", detail["scales"]}, {"near_tie", near_tie}, {"recipes", detail["recipes"]}};
}

QuantCheckResult quant_check(const QuantCheckInput& in) {
  const Prepared p = prepare(in);
  const QuantSpec& q = in.spec;
  const std::size_t n = p.exact.size();
  const std::vector<ExactQuant> ex = expected_integers(p, q);
  // Every recipe's fold: its integers against the expected ones, and the largest bound B.
  std::vector<double> bound(n, 0.0);
  json recipes = json::array();
  for (const Recipe rc : checked_recipes()) recipes.push_back(recipe_flips(in, p, ex, rc, bound));
  QuantCheckResult r;
  for (std::size_t i = 0; i < n; ++i) r.near_tie += ex[i].tie_distance * p.scale_of(i, q.per_channel) <= bound[i];
  r.detail = check_json(in, p, r.near_tie, recipes);
  if (in.found) r.found = check_found(in, p, ex, bound);
  return r;
}

BnRule quant_bn_rule(const Tensor& weights) {
  BnRule rule;
  rule.fresh_defaults = false;
  rule.max_values = static_cast<std::int64_t>(weights.data.size());
  rule.channels = static_cast<std::size_t>(weights.shape.at(0));
  rule.dtype = weights.dtype;
  return rule;
}

}  // namespace foldcheck
