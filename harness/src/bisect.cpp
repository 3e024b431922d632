// `foldcheck bisect` on a case file through foldcheck's pass pipeline (bisect.hpp).
#include "foldcheck/bisect.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "foldcheck/compare.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/evaluate.hpp"
#include "foldcheck/fold_check.hpp"
#include "foldcheck/passes.hpp"
#include "foldcheck/version.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

// The case's layer (Conv -> BatchNorm) as LayerParams for the fold check.
LayerParams layer_params_of(const Graph& g) {
  const Node& c = g.nodes.at(0);
  LayerParams lp;
  lp.dtype = g.dtype;
  lp.weight_shape = c.weight.shape;
  lp.channels = c.geometry.O;
  lp.per_channel = c.geometry.terms_per_output();
  lp.weight = c.weight.data;
  for (std::size_t i = 0; i < lp.weight.size(); ++i) lp.index.push_back(i);
  lp.bias = c.bias;
  lp.bn = g.nodes.at(1).bn;
  return lp;
}

class CaseBisector {
 public:
  CaseBisector(const CaseSpec& spec, const BisectOptions& o) : o_(o) {
    dtype_ = o.dtype.value_or(spec.dtypes.front());
    CaseData d = materialize(spec, dtype_);
    layer_ = std::move(d.graph);
    x_ = std::move(d.input);
    if (layer_.nodes.size() != 2 || layer_.nodes[1].kind != Node::Kind::BatchNorm)
      throw InputError(spec.path + ": bisect needs a Conv -> BatchNorm layer");
    const Node& c = layer_.nodes[0];
    ref::Options ro = o.ref;
    ro.formats = ref::format_bit(*info(dtype_).format);
    const ref::LayerData L{c.geometry, &x_, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &layer_.nodes[1].bn};
    exact_ = ref::conv_bn(L, ro);
  }

  DType dtype() const { return dtype_; }
  std::size_t evaluations() const { return evaluations_; }

  // Step k: the first k passes of `passes`.
  json step(const std::vector<std::string>& passes, std::size_t k) {
    ++evaluations_;
    if (o_.progress) o_.progress(fmt::format("bisect: evaluation {} (first {} of {} passes)", evaluations_, k, passes.size()));
    const Lowering l = lower(layer_, passes, k);
    const Realized r = realize(l, layer_, x_, o_.ref);
    const Realized ieee = realize(l, layer_, x_, o_.ref, true);
    const std::vector<double> y = evaluate(r.graph, r.input, r.policy);
    const BoundReport br = error_bounds(ieee.graph, exact_, ieee.policy, o_.confidence, &ieee.input);
    const Comparison c = compare(y, exact_.y, dtype_, &br.bound, &br.probabilistic);
    bool bad = c.verdict != Verdict::Expected;
    if (o_.threshold_ulp) bad = c.ulp.max_abs > *o_.threshold_ulp;
    json j{{"prefix", k},
           {"enabled", l.applied},
           {"how", r.note},
           {"max_abs_ulp", c.ulp.max_abs},
           {"p99_9_abs_ulp", c.ulp.p999},
           {"p50_abs_ulp", c.ulp.p50},
           {"worst_ratio", c.worst_bound_ratio ? json(*c.worst_bound_ratio) : json(nullptr)},
           {"probabilistic_worst_ratio", c.worst_probabilistic_ratio ? json(*c.worst_probabilistic_ratio) : json(nullptr)},
           {"beyond_bound", c.beyond_bound},
           {"verdict", name(c.verdict)},
           {"bad", bad}};
    if (k > 0) {
      j["pass"] = passes[k - 1];
      const Lowering before = lower(layer_, passes, k - 1);
      j["applied"] = l.applied.size() > before.applied.size();
      if (!j["applied"].get<bool>()) j["skipped"] = l.skipped.back();
    }
    return j;
  }

  // Which pass changed the conv weights (every prefix lowered; no evaluation).
  json weights(const std::vector<std::string>& passes) {
    json out = json::array();
    const std::vector<double>& w0 = layer_.nodes[0].weight.data;
    std::vector<double> prev = w0;
    for (std::size_t k = 1; k <= passes.size(); ++k) {
      const Lowering l = lower(layer_, passes, k);
      const Realized r = realize(l, layer_, x_, o_.ref);
      const std::vector<double>& w = r.graph.nodes[0].weight.data;
      std::int64_t changed = 0;
      double change = 0, drift = 0;  // ppm against the previous prefix's weights and the original ones
      for (std::size_t i = 0; i < w.size(); ++i) {
        changed += w[i] != prev[i];
        // signed, the largest in magnitude
        if (prev[i] != 0 && std::fabs(1e6 * (w[i] - prev[i]) / prev[i]) > std::fabs(change)) change = 1e6 * (w[i] - prev[i]) / prev[i];
        if (w0[i] != 0 && std::fabs(1e6 * (w[i] - w0[i]) / w0[i]) > std::fabs(drift)) drift = 1e6 * (w[i] - w0[i]) / w0[i];
      }
      prev = w;
      if (changed == 0) continue;
      json e{{"pass", passes[k - 1]}, {"changed", changed}, {"max_change_ppm", change}, {"max_drift_ppm_vs_original", drift}};
      if (r.graph.nodes[0].fold || l.quantized) {
        // Is it a correct fold? The observed weights and bias against the exact fold.
        // A separate per-channel add (TVM with a conv bias) belongs to the folded bias.
        ObservedFold of{w, r.graph.nodes[0].bias};
        if (r.graph.nodes.size() > 1 && r.graph.nodes[1].kind == Node::Kind::ChannelAdd)
          for (std::size_t o = 0; o < of.bias.size(); ++o) of.bias[o] += r.graph.nodes[1].bias[o];
        ref::Options ro = o_.ref;
        ro.threads = 1;
        const FoldCheck fc = check_fold(layer_params_of(layer_), of, ro);
        const RecipeFoldCheck& b = fc.recipes[fc.best];
        e["fold_verdict"] = name(fc.verdict);
        e["closest_recipe"] = name(b.recipe);
        e["fold_worst_ratio"] = b.worst_ratio;
        e["max_abs_ulp_vs_exact_fold"] = b.weights.elements ? json(b.weights.ulp.max_abs) : json(nullptr);
      } else {
        e["fold_verdict"] = nullptr;
      }
      out.push_back(e);
    }
    return out;
  }

 private:
  const BisectOptions& o_;
  DType dtype_;
  Graph layer_;
  std::vector<double> x_;
  ref::LayerResult exact_;
  std::size_t evaluations_ = 0;
};

}  // namespace

json bisect_case(const CaseSpec& spec, const BisectOptions& o) {
  if (o.passes.empty()) throw InputError("bisect: no passes (give --passes A,B,... or --opt-level)");
  for (const std::string& p : o.passes) pass_named(p);
  CaseBisector b(spec, o);
  const std::size_t n = o.passes.size();
  json steps = json::array();
  json culprit = nullptr;
  if (o.mode == BisectMode::Linear) {
    for (std::size_t k = 0; k <= n; ++k) {
      steps.push_back(b.step(o.passes, k));
      if (culprit.is_null() && steps.back()["bad"].get<bool>()) culprit = k == 0 ? json("(none: the layer itself)") : json(o.passes[k - 1]);
    }
  } else if (o.mode == BisectMode::Search) {
    json full = b.step(o.passes, n);
    steps.push_back(full);
    if (full["bad"].get<bool>()) {
      std::size_t lo = 0, hi = n;  // prefix lo good (no pass: the plain evaluation), hi bad
      while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        json s = b.step(o.passes, mid);
        (s["bad"].get<bool>() ? hi : lo) = mid;
        steps.push_back(std::move(s));
      }
      culprit = o.passes[hi - 1];
    }
  }
  json out{{"tool", "foldcheck"},
           {"version", kVersion},
           {"schema_version", kSchemaVersion},
           {"command", "bisect"},
           {"case", {{"name", spec.name}, {"path", spec.path}, {"seed", spec.seed}}},
           {"dtype", name(b.dtype())},
           {"passes", o.passes},
           {"mode", o.mode == BisectMode::Search ? "search" : o.mode == BisectMode::Linear ? "linear" : "leave-one-out"},
           {"criterion", o.threshold_ulp ? fmt::format("max |ULP| > {:g}", *o.threshold_ulp)
                                         : std::string("outside the deterministic or probabilistic bound of the lowered "
                                                       "program with IEEE operations (fast-math approximations and int8 "
                                                       "values are not rounding)")}};
  if (o.mode == BisectMode::LeaveOneOut) {
    json rows = json::array();
    json all = b.step(o.passes, n);
    all["disabled"] = nullptr;
    rows.push_back(all);
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::string> without;
      for (std::size_t k = 0; k < n; ++k)
        if (k != i) without.push_back(o.passes[k]);
      json s = b.step(without, without.size());
      s["disabled"] = o.passes[i];
      rows.push_back(std::move(s));
    }
    // The culprit: a pass whose removal alone makes a bad pipeline good (the first such).
    if (rows[0]["bad"].get<bool>())
      for (std::size_t i = 1; i < rows.size() && culprit.is_null(); ++i)
        if (!rows[i]["bad"].get<bool>()) culprit = rows[i]["disabled"];
    out["leave_one_out"] = rows;
    steps = rows;
  }
  out["culprit"] = culprit;
  out["steps"] = steps;
  out["evaluations"] = b.evaluations();
  out["weights"] = b.weights(o.passes);
  const bool whole_bad = !steps.empty() && o.mode != BisectMode::Linear ? steps[0]["bad"].get<bool>() : !culprit.is_null();
  out["verdict"] = culprit.is_null() && !whole_bad ? "EXPECTED" : "UNEXPECTED";
  return out;
}

}  // namespace foldcheck
