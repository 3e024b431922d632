// The typed result of `foldcheck engines` (engines.hpp): verdicts and the JSON schema "engines".
#include <nlohmann/json.hpp>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/commands/engines.hpp"
#include "foldcheck/result/judgement.hpp"
#include "output_band_json.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

json weights_json(const EngineLayer& L) {
  if (L.not_folded) return {{"not_folded", *L.not_folded}};
  if (!L.weights) return nullptr;
  json j = to_json(*L.weights);
  j.erase("recipes");  // the closest recipe's figures are kept; accuracy-diff --observed shows them all
  return j;
}

json outputs_json(const EngineLayer& L) {
  if (L.left_out) return {{"left_out", *L.left_out}};
  if (L.outputs_not_checked) return {{"not_checked", *L.outputs_not_checked}};
  if (!L.outputs) return nullptr;
  const Comparison& c = *L.outputs;
  json j = L.outputs_detail.to_json();
  // The per-element verdict, and the outputs' (EngineLayer::outputs_verdict).
  j["elements_verdict"] = name(judgement::deterministic_only(c.verdict));
  j["verdict"] = name(L.outputs_verdict());
  j["elements"] = c.elements;
  j["max_abs_ulp"] = c.ulp.max_abs;
  j["worst_ratio"] = c.worst_bound_ratio ? json(*c.worst_bound_ratio) : json(nullptr);
  j["probabilistic_worst_ratio"] = c.worst_probabilistic_ratio ? json(*c.worst_probabilistic_ratio) : json(nullptr);
  j["beyond_bound"] = c.beyond_bound;
  j["beyond_probabilistic"] = c.beyond_probabilistic;
  // NaN or infinite where the layer's value is finite: within no bound, out of the ratios above.
  j["nonfinite"] = c.kinds.nan + c.kinds.inf_mismatch;
  return j;
}

json final_outputs_json(const EngineRun& r) {
  json list = json::array();
  for (const EngineRun::FinalOutput& f : r.final_outputs) list.push_back(f.to_json());
  return list;
}

json run_json(const EngineRun& r) {
  json layers = json::array();
  for (const EngineLayer& L : r.layers) {
    if (r.failed) break;  // nothing of a failed run is reported as checked
    layers.push_back({{"name", L.name},
                      {"observed", L.observed ? json(*L.observed) : json(nullptr)},
                      {"verdict", L.left_out && !L.weights ? json("LEFT OUT") : json(name(L.verdict()))},
                      {"weights", weights_json(L)},
                      {"outputs", outputs_json(L)},
                      {"input_mismatch", L.input_mismatch ? json(*L.input_mismatch) : json(nullptr)},
                      {"not_the_layer", L.not_the_layer ? json(*L.not_the_layer) : json(nullptr)}});
  }
  return {{"label", r.spec.label},
          {"engine", r.engine},
          {"command", r.spec.command},
          {"seconds", r.seconds},
          {"verdict", name(r.verdict())},
          {"failed", r.failed ? json(*r.failed) : json(nullptr)},
          {"notes", r.notes},
          {"folded_model", r.folded_model},
          {"fusion_preserved", r.fusion_preserved ? json(*r.fusion_preserved) : json(nullptr)},
          {"arithmetic", r.arithmetic},
          {"algorithm", r.algorithm},
          {"first_weights_beyond", r.first_weights_beyond ? json(*r.first_weights_beyond) : json(nullptr)},
          {"first_outputs_beyond", r.first_outputs_beyond ? json(*r.first_outputs_beyond) : json(nullptr)},
          {"final_outputs", final_outputs_json(r)},
          {"final_not_checked", r.final_not_checked ? json(*r.final_not_checked) : json(nullptr)},
          {"layers", layers}};
}

json spread_json(const PpmSpread& s) { return {{"min", s.min}, {"median", s.median}, {"max", s.max}}; }

}  // namespace

// The channels' verdict: beyond the bound UNEXPECTED, beyond the estimate only SUSPICIOUS.
Verdict EngineChannels::verdict() const { return judgement::of_channels(beyond_bound, beyond_estimate); }

json EngineChannels::to_json() const {
  json j = not_computed
               ? json{{"not_computed", *not_computed}}
               : json{{"tested", tested}, {"beyond_bound", beyond_bound}, {"beyond_estimate", beyond_estimate}};
  j["verdict"] = name(verdict());
  if (!worst) return j;
  j["worst"] = {{"channel", worst->channel},
                {"rho_ppm", worst->rho_ppm},
                {"threshold_ppm", worst->threshold_ppm},
                {"estimated_threshold_ppm", worst->estimated_threshold_ppm},
                {"allowance_ppm", worst->allowance_ppm},
                {"honest_rms_ppm", worst->honest_rms_ppm},
                {"ratio_to_estimate", worst->ratio_to_estimate},
                {"outputs", worst->outputs}};
  j["threshold_ppm"] = spread_json(threshold_ppm);
  j["estimated_threshold_ppm"] = spread_json(estimated_threshold_ppm);
  return j;
}

json EngineOutputsDetail::to_json() const {
  json j{{"bound", bound},
         {"activation", activation.empty() ? json(nullptr) : json(activation)},
         {"channels", channels.to_json()}};
  if (too_wide) j["too_wide"] = *too_wide;
  if (bound_recipes) j["bound_recipes"] = *bound_recipes;
  if (terms_per_output) j["terms_per_output"] = *terms_per_output;
  return j;
}

json EngineRun::FinalOutput::to_json() const {
  json j{{"name", name},
         {"worst_ratio", worst_ratio ? json(*worst_ratio) : json(nullptr)},
         {"max_abs_ulp", max_abs_ulp},
         {"bound", bound},
         {"samples", samples},
         {"verdict", foldcheck::name(verdict)}};
  if (band) j["band"] = output_band_json(*band);
  return j;
}

json EnginesModel::to_json() const {
  return {{"path", path}, {"producer", producer}, {"opset", opset}, {"nodes", nodes}, {"pairs", pairs}};
}

json EnginesInput::to_json() const {
  json j{{"name", name}, {"shape", shape}};
  if (path) j["path"] = *path;
  else j["seed"] = seed;
  return j;
}

// The outputs: per element against the deterministic bound only, the channel statistic
// deciding SUSPICIOUS (judgement::deterministic_only, of_channels); within a bound too wide to
// see a wrong channel, nothing passes (judgement::unless_uninformative).
Verdict EngineLayer::outputs_verdict() const {
  const Verdict v = worst(judgement::deterministic_only(outputs->verdict), outputs_detail.channels.verdict());
  return judgement::unless_uninformative(v, !outputs_detail.too_wide);
}

// The per-layer judge (judgement::of_layer): the folded parameters when the engine folded them,
// the outputs when compared, doubt when the adapter gave outputs but none usable for this layer,
// an input that is not what the engine was given, and a layer that computes something else.
Verdict EngineLayer::verdict() const {
  judgement::LayerFacts f;
  if (weights && !not_folded) f.fold = weights->verdict;
  if (outputs) f.outputs = outputs_verdict();
  f.doubt = outputs_missing;
  f.input_mismatch = input_mismatch.has_value();
  f.not_the_layer = not_the_layer.has_value();
  return judgement::of_layer(f);
}

// Layers the engine left out (an algorithm it does not offer for them) are reported, not
// judged; the final outputs join the verdict but a run that judged no layer is MISTRUSTED.
Verdict EngineRun::verdict() const {
  if (failed) return Verdict::Mistrusted;
  judgement::Tally t;
  for (const EngineLayer& L : layers)
    if (!L.left_out || L.weights) t.add(L.verdict());
  for (const FinalOutput& f : final_outputs) t.also(f.verdict);
  return t.verdict();
}

Verdict EnginesResult::verdict() const {
  judgement::Tally t;
  for (const EngineRun& r : runs) t.add(r.verdict());
  return t.verdict();
}

json EnginesResult::to_json() const {
  json j = result_envelope("engines");
  json rs = json::array();
  for (const EngineRun& r : runs) rs.push_back(run_json(r));
  j["verdict"] = name(verdict());
  j["model"] = model.to_json();
  j["input"] = input.to_json();
  j["channel_statistic"] = {{"false_alarm_per_channel", channel_alpha},
                            {"rule", "per channel: |rho| <= allowance + s sqrt(2 ln(2/alpha)) (Azuma-Hoeffding; "
                                     "channel_bias.hpp); union bound over every channel of every engine"}};
  j["engines"] = rs;
  return j;
}

}  // namespace foldcheck
