// The typed result of `foldcheck engines` (engines.hpp): verdicts and the JSON schema "engines".
#include <nlohmann/json.hpp>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/commands/engines.hpp"

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
  json j = L.outputs_detail;
  // The per-element verdict and the channel statistic's, and the outputs' as the worst of both.
  const Verdict elements = c.verdict == Verdict::Suspicious ? Verdict::Expected : c.verdict;
  const Verdict channels = L.channels_beyond > 0         ? Verdict::Unexpected
                           : L.channels_suspicious > 0   ? Verdict::Suspicious
                                                         : Verdict::Expected;
  if (j.contains("channels")) j["channels"]["verdict"] = name(channels);
  j["elements_verdict"] = name(elements);
  j["verdict"] = name(worst(elements, channels));
  j["elements"] = c.elements;
  j["max_abs_ulp"] = c.ulp.max_abs;
  j["worst_ratio"] = c.worst_bound_ratio ? json(*c.worst_bound_ratio) : json(nullptr);
  j["probabilistic_worst_ratio"] = c.worst_probabilistic_ratio ? json(*c.worst_probabilistic_ratio) : json(nullptr);
  j["beyond_bound"] = c.beyond_bound;
  j["beyond_probabilistic"] = c.beyond_probabilistic;
  return j;
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
                      {"input_mismatch", L.input_mismatch ? json(*L.input_mismatch) : json(nullptr)}});
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
          {"first_weights_beyond", r.first_weights_beyond ? json(*r.first_weights_beyond) : json(nullptr)},
          {"first_outputs_beyond", r.first_outputs_beyond ? json(*r.first_outputs_beyond) : json(nullptr)},
          {"final_outputs", r.final_outputs},
          {"final_not_checked", r.final_not_checked ? json(*r.final_not_checked) : json(nullptr)},
          {"layers", layers}};
}

}  // namespace

Verdict EngineLayer::verdict() const {
  bool checked = false;
  Verdict v = Verdict::Expected;
  if (input_mismatch) return Verdict::Unexpected;
  if (outputs_missing) v = Verdict::Mistrusted;
  if (weights && !not_folded) {
    checked = true;
    v = worst(v, weights->verdict);
  }
  if (outputs) {
    checked = true;
    v = worst(v, outputs->verdict == Verdict::Suspicious ? Verdict::Expected : outputs->verdict);
    if (channels_beyond > 0) v = worst(v, Verdict::Unexpected);
    if (channels_suspicious > 0) v = worst(v, Verdict::Suspicious);
  }
  return checked ? v : Verdict::Mistrusted;
}

// Layers the engine left out (an algorithm it does not offer for them) are reported, not
// judged; a run that judged no layer is MISTRUSTED.
Verdict EngineRun::verdict() const {
  if (failed) return Verdict::Mistrusted;
  Verdict v = Verdict::Expected;
  bool any = false;
  for (const EngineLayer& L : layers)
    if (!L.left_out || L.weights) {
      v = worst(v, L.verdict());
      any = true;
    }
  for (const json& f : final_outputs) v = worst(v, *verdict_named(f["verdict"].get<std::string>()));
  return any ? v : Verdict::Mistrusted;
}

Verdict EnginesResult::verdict() const {
  if (runs.empty()) return Verdict::Mistrusted;
  Verdict v = Verdict::Expected;
  for (const EngineRun& r : runs) v = worst(v, r.verdict());
  return v;
}

json EnginesResult::to_json() const {
  json j = result_envelope("engines");
  json rs = json::array();
  for (const EngineRun& r : runs) rs.push_back(run_json(r));
  j["verdict"] = name(verdict());
  j["model"] = model;
  j["input"] = input;
  j["channel_statistic"] = {{"false_alarm_per_channel", channel_alpha},
                            {"rule", "per channel: |rho| <= allowance + s sqrt(2 ln(2/alpha)) (Azuma-Hoeffding; "
                                     "channel_bias.hpp); union bound over every channel of every engine"}};
  j["engines"] = rs;
  return j;
}

}  // namespace foldcheck
