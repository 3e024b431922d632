// The `accuracy-diff` result tree (accuracy_diff.hpp): each node's verdict, from its facts and
// its children through judgement.hpp, and its JSON.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/commands/accuracy_diff.hpp"
#include "output_band_json.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

// An optional value: null when absent (an infinite or undefined ratio, no such layer).
template <class T>
json figure(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
// A number, or null when not finite.
json figure(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

json LayerIdentity::to_json() const {
  json j{{"name", name},
         {"op", op},
         {"batchnorm", batchnorm},
         {"dtype", foldcheck::name(dtype)},
         {"weight_shape", weight_shape},
         {"output_channels", output_channels},
         {"conv_bias", conv_bias},
         {"eps", eps}};
  if (!through_identity.empty()) j["through_identity"] = through_identity;
  if (observed_node) j["observed_node"] = *observed_node;
  return j;
}

std::optional<Stage> PathOnActivations::dominant_stage() const {
  if (!attribution) return std::nullopt;
  double best = -1;
  std::optional<Stage> dominant;
  for (unsigned s = 0; s < kNumStages; ++s) {
    if (attribution->contribution[s].empty()) continue;
    double ss = 0;
    for (const double v : attribution->contribution[s]) ss += v * v;
    if (ss > best) {
      best = ss;
      dominant = static_cast<Stage>(s);
    }
  }
  return dominant;
}

json PathOnActivations::to_json() const {
  const Comparison& c = comparison;
  json j{{"verdict", name(c.verdict)},
         {"max_abs_ulp", c.ulp.max_abs},
         {"p99_9_abs_ulp", c.ulp.p999},
         {"worst_ratio", figure(c.worst_bound_ratio)},
         {"beyond_bound", c.beyond_bound},
         {"bound", bound},
         {"probabilistic_worst_ratio", figure(c.worst_probabilistic_ratio)}};
  if (attribution) {
    const std::optional<Stage> d = dominant_stage();
    j["dominant_stage"] = d ? name(*d) : "";
    j["attributed_elements"] = attribution->elements.size();
  }
  if (recipe) j["recipe"] = name(*recipe);
  return j;
}

Verdict LayerActivations::verdict() const {
  return worst(judgement::deterministic_only(unfused.verdict()), judgement::deterministic_only(fused.verdict()));
}

json LayerActivations::to_json() const {
  return {{"input_shape", input_shape},   {"outputs", outputs},       {"terms_per_output", terms_per_output},
          {"unfused", unfused.to_json()}, {"fused", fused.to_json()}, {"verdict", name(verdict())}};
}

Verdict LayerDiff::fold_verdict() const { return observed_not_folded || !fold ? Verdict::Unexpected : fold->verdict; }

std::optional<Verdict> LayerDiff::activations_verdict() const {
  return activations ? std::optional<Verdict>(activations->verdict()) : std::nullopt;
}

Verdict LayerDiff::verdict() const {
  judgement::LayerFacts f;
  f.fold = fold_verdict();
  f.outputs = activations_verdict();
  f.not_the_layer = !not_the_layer.empty();
  if (unmodelled) f.unmodelled = judgement::Unmodelled::Surely;
  return judgement::of_layer(f);
}

std::optional<std::string> LayerDiff::observed_note() const {
  if (unmodelled && !not_the_layer.empty())
    return *unmodelled + "; " + computation_note(not_the_layer, "the observed layer");
  if (unmodelled) return unmodelled;
  if (observed_not_folded) return "the observed model still applies a BatchNormalization after this layer: not folded";
  if (!not_the_layer.empty()) return computation_note(not_the_layer, "the observed layer");
  return std::nullopt;
}

json LayerDiff::to_json() const {
  json j = identity.to_json();
  if (const std::optional<std::string> note = observed_note()) j["observed_note"] = *note;
  if (unmodelled) j["unmodelled"] = *unmodelled;
  if (!not_the_layer.empty()) {
    j["not_the_layer"] = json::array();
    for (const ComputationDifference& d : not_the_layer)
      j["not_the_layer"].push_back({{"attribute", d.attribute}, {"observed", d.observed}, {"model", d.model}});
  }
  if (!observed_not_folded) {
    j["fold"] = foldcheck::to_json(*fold);
    if (identity.observed_node) {
      const RecipeFoldCheck& b = fold->recipes[fold->best];
      j["worst_channel"] = fold->verdict == Verdict::Expected ? json(nullptr) : json(b.worst_channel);
      j["closest_recipe"] = b.label();
    }
  }
  j["verdict"] = name(verdict());
  if (activations) j["activations"] = activations->to_json();
  if (activations_note) j["activations"] = {{"note", *activations_note}};
  return j;
}

Verdict ObservedOutputCheck::foldcheck_runs_verdict() const { return foldcheck::worst(unfused.verdict, fused.verdict); }

// The observed output's comparison with its bound, and its band (a statistic: SUSPICIOUS at most).
Verdict ObservedOutputCheck::verdict() const { return with_band(observed.verdict, band); }

json ObservedOutputCheck::to_json() const {
  json j{{"path", path},
         {"shape", shape},
         {"bound", bound},
         {"lambda", lambda},
         {"sqrt_c", sqrt_c},
         {"samples", samples},
         {"seed", seed},
         {"confidence", confidence},
         {"comparison", foldcheck::to_json(observed)},
         {"verdict", name(verdict())},
         {"foldcheck_runs",
          {{"unfused_worst_ratio", figure(unfused.worst_bound_ratio)},
           {"fused_worst_ratio", figure(fused.worst_bound_ratio)},
           {"verdict", name(foldcheck_runs_verdict())}}}};
  if (bound_ulp) j["bound_ulp"] = {{"median", bound_ulp->median}, {"max", bound_ulp->max}, {"min", bound_ulp->min}};
  if (worst)
    j["worst"] = {{"index", worst->index},         {"flat_index", worst->flat_index}, {"observed", worst->observed},
                  {"reference", worst->reference}, {"bound", worst->bound},           {"ratio", worst->ratio}};
  if (top1) j["top1_agreement"] = {{"rows", top1->rows}, {"observed_vs_reference", top1->observed_vs_reference}};
  j["band"] = output_band_json(band);
  return j;
}

bool OutputRuns::compared_nothing() const {
  return unfused.verdict == Verdict::Mistrusted || fused.verdict == Verdict::Mistrusted;
}

json OutputRuns::to_json(const ObservedOutputCheck* bound_check) const {
  json j{{"name", name},
         {"shape", shape},
         {"unfused", foldcheck::to_json(unfused)},
         {"fused", foldcheck::to_json(fused)}};
  if (bound_check) {  // foldcheck's own float32 runs against the end-to-end bound
    j["unfused"]["worst_bound_ratio"] = figure(bound_check->unfused.worst_bound_ratio);
    j["fused"]["worst_bound_ratio"] = figure(bound_check->fused.worst_bound_ratio);
  }
  if (top1)
    j["top1_agreement"] = {{"rows", top1->rows},
                           {"unfused_vs_reference", top1->unfused_vs_reference},
                           {"fused_vs_reference", top1->fused_vs_reference},
                           {"fused_vs_unfused", top1->fused_vs_unfused}};
  return j;
}

bool EndToEnd::outputs_compared_nothing() const {
  return std::ranges::any_of(outputs, [](const OutputRuns& o) { return o.compared_nothing(); });
}

std::optional<std::string> EndToEnd::first_layer_beyond_bound(const std::vector<LayerDiff>& layers) {
  for (const LayerDiff& d : layers)
    if (d.activations_verdict() == Verdict::Unexpected) return d.identity.name;
  return std::nullopt;
}

// Every analysed layer within its deterministic bounds on its activations (their verdicts are
// deterministic_only already; a MISTRUSTED layer compared nothing: it makes the whole
// MISTRUSTED, never a pass); foldcheck's own float32 runs within the end-to-end bound when it
// is computed (the bound's self-check: anything but EXPECTED there is a failed check, UNEXPECTED
// whatever the layers show); and every output compared (MISTRUSTED joins otherwise).
Verdict EndToEnd::verdict(const std::vector<LayerDiff>& layers) const {
  Verdict v = Verdict::Expected;
  for (const LayerDiff& d : layers)
    if (const std::optional<Verdict> a = d.activations_verdict()) v = worst(v, *a);
  const bool own_runs_failed = observed_output && observed_output->foldcheck_runs_verdict() != Verdict::Expected;
  return judgement::of_end_to_end(v, own_runs_failed, outputs_compared_nothing());
}

json EndToEnd::to_json(const std::vector<LayerDiff>& layers) const {
  if (not_run) return {{"not_run", *not_run}};
  json outs = json::array();
  const ObservedOutputCheck* bound_check = observed_output ? &*observed_output : nullptr;
  for (const OutputRuns& o : outputs) outs.push_back(o.to_json(bound_check));
  json j{{"reference", "float64 run of the unfused model (each operation within 2^-53 relative)"},
         {"fused_recipe", name(fused_recipe)},
         {"input", input},
         {"input_shape", input_shape},
         {"outputs", outs},
         {"first_layer_beyond_bound", figure(first_layer_beyond_bound(layers))},
         {"verdict", name(verdict(layers))}};
  if (observed_output) j["observed_output"] = observed_output->to_json();
  if (observed_output_not_checked) j["observed_output_not_checked"] = *observed_output_not_checked;
  return j;
}

json ModelFacts::to_json() const {
  json ins = json::array();
  for (const ValueInfo& v : inputs) ins.push_back({{"name", v.name}, {"shape", v.shape}});
  return {{"path", path}, {"producer", producer}, {"opset", opset}, {"nodes", nodes}, {"inputs", ins}};
}

json ObservedModel::to_json() const {
  return {{"path", path},
          {"producer", producer},
          {"matching",
           "foldable layers (Conv, ConvTranspose, Gemm, MatMul, com.microsoft:FusedConv with "
           "initializer weights) by their place in the data flow from the graph inputs, op, weight "
           "shape and group (node order, initializer names, removed BatchNorms and fused "
           "activations do not matter); node names pair layers of a symmetric graph"}};
}

// The model: its layers are its judged parts (none: MISTRUSTED, nothing checked is not a pass);
// the observed output against its bound (one deterministic check: never SUSPICIOUS) and the
// doubt of end-to-end runs that compared nothing join them. The end-to-end runs' other
// verdicts are the layers' own, already counted.
Verdict AccuracyDiffResult::verdict() const {
  judgement::Tally t;
  if (end_to_end && end_to_end->observed_output) t.also(end_to_end->observed_output->verdict());
  if (end_to_end && !end_to_end->not_run && end_to_end->verdict(layers) == Verdict::Mistrusted)
    t.also(Verdict::Mistrusted);
  for (const LayerDiff& d : layers) t.add(d.verdict());
  return t.verdict();
}

json AccuracyDiffResult::to_json() const {
  json list = json::array();
  for (const LayerDiff& d : layers) list.push_back(d.to_json());
  json unp = json::array();
  for (const UnpairedBn& u : unpaired) unp.push_back({{"batchnorm", u.name}, {"reason", u.reason}});
  json out = result_envelope("accuracy-diff");
  out.update(json{{"model", model.to_json()}, {"pairs_found", layers.size()}, {"layers", list}, {"unpaired", unp}});
  if (end_to_end) out["end_to_end"] = end_to_end->to_json(layers);
  if (observed) out["observed"] = observed->to_json();
  out["verdict"] = name(verdict());
  if (!reasoning.empty()) out["reasoning"] = reasoning;
  return out;
}

}  // namespace foldcheck
