// `foldcheck bisect` on a case file through foldcheck's pass pipeline (bisect.hpp).
#include "foldcheck/commands/bisect.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/layer/passes.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/reports/bisect_notes.hpp"

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

// One conv+BN layer to lower: its graph, input and certified reference.
struct Layer {
  std::string name;
  Graph graph;
  std::vector<double> x;
  ref::LayerResult exact;
};

Layer make_layer(std::string name, Graph g, std::vector<double> x, const ref::Options& opts) {
  if (g.nodes.size() != 2 || g.nodes[1].kind != Node::Kind::BatchNorm)
    throw InputError(name + ": bisect needs a Conv -> BatchNorm layer");
  Layer l{std::move(name), std::move(g), std::move(x), {}};
  const Node& c = l.graph.nodes[0];
  ref::Options ro = opts;
  ro.formats = ref::format_bit(*info(l.graph.dtype).format);
  const ref::LayerData L{c.geometry, &l.x, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &l.graph.nodes[1].bn};
  l.exact = ref::conv_bn(L, ro);
  return l;
}

// What the first layer's lowering under prefix k applied and how it computes; from prefix 1
// on, the prefix's last pass and whether it applied (else why it was skipped).
void describe_lowering(PipelineMeasures& m, const Lowering& l, const Realized& r, const Layer& layer,
                       const std::vector<std::string>& passes, std::size_t k) {
  m.enabled = l.applied;
  m.how = r.note;
  if (k == 0) return;
  m.pass = passes[k - 1];
  const Lowering before = lower(layer.graph, passes, k - 1);
  m.applied = l.applied.size() > before.applied.size();
  if (!*m.applied) m.skipped = l.skipped.back();
}

// Lowers and evaluates every layer under a pass prefix; a step is bad when any layer is.
class Bisector {
 public:
  Bisector(std::vector<Layer> layers, const BisectOptions& o) : o_(o), layers_(std::move(layers)) {}

  std::size_t evaluations() const { return evaluations_; }

  // Step k: the first k passes of `passes`.
  BisectStep step(const std::vector<std::string>& passes, std::size_t k) {
    ++evaluations_;
    if (o_.progress) o_.progress(fmt::format("bisect: evaluation {} (first {} of {} passes)", evaluations_, k, passes.size()));
    PipelineMeasures m;
    m.prefix = k;
    Verdict verdict = Verdict::Expected;
    bool bad = false;
    std::string worst_layer;
    bool first = true;
    for (const Layer& layer : layers_) {
      const Lowering l = lower(layer.graph, passes, k);
      const Realized r = realize(l, layer.graph, layer.x, o_.ref);
      const Realized ieee = realize(l, layer.graph, layer.x, o_.ref, true);
      const std::vector<double> y = evaluate(r.graph, r.input, r.policy);
      const BoundReport br = error_bounds(ieee.graph, layer.exact, ieee.policy, o_.confidence, &ieee.input);
      const Comparison c = compare(y, layer.exact.y, layer.graph.dtype, &br.bound, &br.probabilistic);
      // A MISTRUSTED comparison (no informative output) is no evidence against a pass.
      bad = bad || (o_.threshold_ulp ? c.ulp.max_abs > *o_.threshold_ulp : judgement::counts_against(c.verdict));
      verdict = worst(verdict, c.verdict);
      const double wr = c.worst_bound_ratio.value_or(0);
      if (wr >= m.worst_ratio) {
        m.worst_ratio = wr;
        worst_layer = layer.name;
      }
      m.probabilistic_worst_ratio = std::max(m.probabilistic_worst_ratio, c.worst_probabilistic_ratio.value_or(0));
      m.max_abs_ulp = std::max(m.max_abs_ulp, c.ulp.max_abs);
      m.p99_9_abs_ulp = std::max(m.p99_9_abs_ulp, c.ulp.p999);
      m.p50_abs_ulp = std::max(m.p50_abs_ulp, c.ulp.p50);
      m.beyond_bound += c.beyond_bound;
      if (first) describe_lowering(m, l, r, layer, passes, k);
      first = false;
    }
    if (layers_.size() > 1) m.worst_layer = worst_layer;
    BisectStep st;
    st.measures = std::move(m);
    st.bad = bad;
    st.verdict = verdict;
    return st;
  }

  // Which pass changed the conv weights (every prefix lowered; no evaluation), and whether
  // the weights it left are a correct fold of the layer.
  std::vector<BisectWeightChange> weights(const std::vector<std::string>& passes) {
    std::vector<BisectWeightChange> out;
    std::vector<std::vector<double>> prev;
    for (const Layer& layer : layers_) prev.push_back(layer.graph.nodes[0].weight.data);
    for (std::size_t k = 1; k <= passes.size(); ++k) {
      std::int64_t changed = 0, layers_changed = 0;
      double change = 0, drift = 0;  // ppm against the previous prefix's weights and the original ones (signed, largest)
      Verdict fold = Verdict::Expected;
      bool checked = false;
      std::string closest, worst_layer;
      double fold_ratio = -1, fold_ulp = 0;
      for (std::size_t li = 0; li < layers_.size(); ++li) {
        const Layer& layer = layers_[li];
        const Lowering l = lower(layer.graph, passes, k);
        const Realized r = realize(l, layer.graph, layer.x, o_.ref);
        const std::vector<double>& w = r.graph.nodes[0].weight.data;
        const std::vector<double>& w0 = layer.graph.nodes[0].weight.data;
        std::int64_t c = 0;
        for (std::size_t i = 0; i < w.size(); ++i) {
          c += w[i] != prev[li][i];
          if (prev[li][i] != 0 && std::fabs(1e6 * (w[i] - prev[li][i]) / prev[li][i]) > std::fabs(change))
            change = 1e6 * (w[i] - prev[li][i]) / prev[li][i];
          if (w0[i] != 0 && std::fabs(1e6 * (w[i] - w0[i]) / w0[i]) > std::fabs(drift)) drift = 1e6 * (w[i] - w0[i]) / w0[i];
        }
        prev[li] = w;
        if (c == 0) continue;
        changed += c;
        ++layers_changed;
        if (!r.graph.nodes[0].fold && !l.quantized) continue;
        // A separate per-channel add (TVM with a conv bias) belongs to the folded bias.
        ObservedFold of{w, r.graph.nodes[0].bias};
        if (r.graph.nodes.size() > 1 && r.graph.nodes[1].kind == Node::Kind::ChannelAdd)
          for (std::size_t o = 0; o < of.bias.size(); ++o) of.bias[o] += r.graph.nodes[1].bias[o];
        ref::Options ro = o_.ref;
        ro.threads = 1;
        const FoldCheck fc = check_fold(layer_params_of(layer.graph), of, ro);
        const RecipeFoldCheck& b = fc.recipes[fc.best];
        checked = true;
        fold = worst(fold, fc.verdict);
        if (b.worst_ratio > fold_ratio) {
          fold_ratio = b.worst_ratio;
          closest = b.label();
          worst_layer = layer.name;
          fold_ulp = b.weights.elements ? b.weights.ulp.max_abs : 0;
        }
      }
      if (changed == 0) continue;
      BisectWeightChange e{.pass = passes[k - 1],
                           .changed = changed,
                           .max_change_ppm = change,
                           .max_drift_ppm_vs_original = drift};
      if (layers_.size() > 1) e.layers_changed = layers_changed;
      if (checked) {
        e.fold_verdict = fold;
        e.closest_recipe = closest;
        e.fold_worst_ratio = fold_ratio;
        e.max_abs_ulp_vs_exact_fold = fold_ulp;
        if (layers_.size() > 1) e.worst_layer = worst_layer;
      }
      out.push_back(std::move(e));
    }
    return out;
  }

 private:
  const BisectOptions& o_;
  std::vector<Layer> layers_;
  std::size_t evaluations_ = 0;
};

// The search, linear or leave-one-out run over a bisector (see bisect.hpp).
BisectResult run_bisect(Bisector& b, const BisectOptions& o) {
  if (o.passes.empty()) throw InputError("bisect: no passes (give " + field("passes") + " A,B,... or " + field("opt_level") + ")");
  for (const std::string& p : o.passes) pass_named(p);
  const std::size_t n = o.passes.size();
  BisectResult r;
  std::vector<BisectStep>& steps = r.steps;
  if (o.mode == BisectMode::Linear) {
    for (std::size_t k = 0; k <= n; ++k) {
      steps.push_back(b.step(o.passes, k));
      if (!r.culprit && steps.back().bad) r.culprit = k == 0 ? "(none: the layer itself)" : o.passes[k - 1];
    }
  } else if (o.mode == BisectMode::Search) {
    steps.push_back(b.step(o.passes, n));
    if (steps.back().bad) {
      std::size_t lo = 0, hi = n;  // prefix lo good (no pass: the plain evaluation), hi bad
      while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        steps.push_back(b.step(o.passes, mid));
        (steps.back().bad ? hi : lo) = mid;
      }
      r.culprit = o.passes[hi - 1];
    }
  } else {
    steps.push_back(b.step(o.passes, n));
    steps.back().lists_disabled = true;  // listed: the step with none left out
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::string> without;
      for (std::size_t k = 0; k < n; ++k)
        if (k != i) without.push_back(o.passes[k]);
      steps.push_back(b.step(without, without.size()));
      steps.back().disabled = o.passes[i];
    }
    // The culprit: the one pass whose removal alone makes a bad pipeline good.
    if (steps[0].bad) {
      const std::vector<std::string> fixes = leave_one_out_fixes(steps);
      if (fixes.size() == 1) r.culprit = fixes[0];
    }
  }
  r.setup.passes = o.passes;
  r.setup.mode = o.mode;
  r.setup.criterion = o.threshold_ulp ? fmt::format("max |ULP| > {:g}", *o.threshold_ulp)
                                      : std::string(
                                            "outside the deterministic or probabilistic bound of the lowered "
                                            "program with IEEE operations (fast-math approximations and int8 "
                                            "values are not rounding)");
  if (o.mode == BisectMode::LeaveOneOut && steps[0].bad)
    if (const std::vector<std::string> fixes = leave_one_out_fixes(steps); fixes.size() > 1) {
      r.setup.note = reports::leave_one_out_note(fixes);
      r.setup.candidates = fixes;
    }
  r.setup.evaluations = b.evaluations();
  r.setup.weights = b.weights(o.passes);
  r.bad = o.mode == BisectMode::Linear ? r.culprit.has_value() : steps[0].bad;
  // Nothing compared is never a pass: a pipeline whose every step compared nothing
  // informative is MISTRUSTED, not EXPECTED.
  r.nothing_compared = !steps.empty();
  for (const BisectStep& st : steps) r.nothing_compared = r.nothing_compared && st.verdict == Verdict::Mistrusted;
  return r;
}

}  // namespace

// A bad pipeline is UNEXPECTED (SUSPICIOUS when every bad step was beyond a probabilistic bound
// only); one whose every step compared nothing is MISTRUSTED (judgement::of_check).
Verdict BisectResult::verdict() const {
  return judgement::of_check(
      {.failed = bad && !suspicious_only, .suspicious = bad && suspicious_only, .informative = !nothing_compared});
}

json BisectResult::to_json() const {
  json out = setup.to_json();
  out["culprit"] = culprit ? json(*culprit) : json(nullptr);
  out["steps"] = steps_json(steps);
  out["verdict"] = name(verdict());
  return out;
}

json PipelineMeasures::to_json() const {
  json j{{"prefix", prefix},
         {"enabled", enabled},
         {"how", how},
         {"max_abs_ulp", max_abs_ulp},
         {"p99_9_abs_ulp", p99_9_abs_ulp},
         {"p50_abs_ulp", p50_abs_ulp},
         {"worst_ratio", worst_ratio},
         {"probabilistic_worst_ratio", probabilistic_worst_ratio},
         {"beyond_bound", beyond_bound}};
  if (pass) j["pass"] = *pass;
  if (applied) j["applied"] = *applied;
  if (skipped) j["skipped"] = *skipped;
  if (worst_layer) j["worst_layer"] = *worst_layer;
  return j;
}

json BisectWeightChange::to_json() const {
  json e{{"pass", pass},
         {"changed", changed},
         {"max_change_ppm", max_change_ppm},
         {"max_drift_ppm_vs_original", max_drift_ppm_vs_original}};
  if (layers_changed) e["layers_changed"] = *layers_changed;
  if (!fold_verdict) {
    e["fold_verdict"] = nullptr;
    return e;
  }
  e["fold_verdict"] = name(*fold_verdict);
  e["closest_recipe"] = closest_recipe;
  e["fold_worst_ratio"] = fold_worst_ratio;
  e["max_abs_ulp_vs_exact_fold"] = max_abs_ulp_vs_exact_fold;
  if (worst_layer) e["worst_layer"] = *worst_layer;
  return e;
}

json BisectSetup::to_json() const {
  json j = result_envelope("bisect");
  j["passes"] = passes;
  j["mode"] = mode == BisectMode::Search ? "search" : mode == BisectMode::Linear ? "linear" : "leave-one-out";
  j["criterion"] = criterion;
  j["dtype"] = dtype;
  j["evaluations"] = evaluations;
  if (note) j["note"] = *note;
  if (candidates) j["candidates"] = *candidates;
  if (weights) {
    j["weights"] = json::array();
    for (const BisectWeightChange& w : *weights) j["weights"].push_back(w.to_json());
  }
  if (case_) j["case"] = {{"name", case_->name}, {"path", case_->path}, {"seed", case_->seed}};
  if (model) j["model"] = {{"path", model->path}, {"pairs", model->pairs}, {"not_lowered", model->not_lowered}};
  if (input) j["input"] = *input;
  for (const auto& [key, v] : {std::pair{"external_command", &external_command}, std::pair{"reference", &reference},
                               std::pair{"judged_by", &judged_by}, std::pair{"probabilistic_only", &probabilistic_only},
                               std::pair{"mistrusted", &mistrusted}})
    if (*v) j[key] = **v;
  return j;
}

BisectResult bisect_case(const CaseSpec& spec, const BisectOptions& o) {
  const DType dt = o.dtype.value_or(spec.dtypes.front());
  CaseData d = materialize(spec, dt);
  std::vector<Layer> layers;
  layers.push_back(make_layer(spec.name, std::move(d.graph), std::move(d.input), o.ref));
  Bisector b(std::move(layers), o);
  BisectResult out = run_bisect(b, o);
  out.setup.case_ = BisectSetup::Case{spec.name, spec.path, spec.seed};
  out.setup.dtype = name(dt);
  return out;
}

BisectResult bisect_model(const std::string& path, const std::optional<std::string>& input, std::uint64_t seed, const BisectOptions& o) {
  const Model m = Model::load(path);
  const BnPatterns pat = find_bn_pairs(m);
  const Tensor x = model_input(m, input, seed);
  // Each pair's input from one float32 run of the model as it is (BatchNorms unfused).
  ModelRunOptions ro;
  ro.ref = o.ref;
  ro.policy.threads = o.ref.threads;
  for (const BnPair& p : pat.pairs)
    if (p.op != "ConvTranspose") ro.keep.insert(m.nodes[p.layer].inputs[0]);
  if (o.progress) o.progress("bisect: float32 run for the layers' inputs");
  const auto acts = run_model(m, pat, {{m.inputs[0].name, x}}, ro);
  std::vector<Layer> layers;
  std::vector<std::string> skipped;
  for (const BnPair& p : pat.pairs) {
    if (p.op == "ConvTranspose") {
      skipped.push_back(p.name + " (ConvTranspose)");
      continue;
    }
    Tensor xi = acts.at(m.nodes[p.layer].inputs[0]);
    Graph g = pair_graph(m, p, layer_params(m, p), xi, DType::Float32);
    layers.push_back(make_layer(p.name, std::move(g), std::move(xi.data), o.ref));
  }
  if (layers.empty()) throw InputError(path + ": no Conv/Gemm/MatMul -> BatchNormalization pair to lower");
  Bisector b(std::move(layers), o);
  BisectResult out = run_bisect(b, o);
  out.setup.model = BisectSetup::Model{path, pat.pairs.size(), skipped};
  out.setup.input = input ? *input : fmt::format("seeded standard normal, seed {}", seed);
  out.setup.dtype = "float32";
  return out;
}

}  // namespace foldcheck
