// Reading an `engines` result into its view (views/engines.hpp).
#include "foldcheck/result/views/engines.hpp"

#include "model_views_common.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

EngineWeights EngineWeights::from_json(const json& j) {
  EngineWeights w;
  w.not_folded = j.contains("not_folded");
  if (w.not_folded) return w;
  w.worst_ratio = optional<double>(j, "worst_ratio");
  w.closest_recipe = optional<std::string>(j, "closest_recipe");
  w.worst_channel = optional_count(j, "worst_channel");
  return w;
}

EngineOutputs EngineOutputs::from_json(const json& j) {
  EngineOutputs o;
  o.left_out = optional<std::string>(j, "left_out");
  o.not_checked = optional<std::string>(j, "not_checked");
  if (o.left_out || o.not_checked) return o;
  o.worst_ratio = optional<double>(j, "worst_ratio");
  o.probabilistic_worst_ratio = optional<double>(j, "probabilistic_worst_ratio");
  o.nonfinite = optional_count(j, "nonfinite").value_or(0);
  const json& ch = j.at("channels");
  if (auto w = ch.find("worst"); w != ch.end())
    o.worst = EngineWorstChannel{required<double>(*w, "rho_ppm"), required<double>(*w, "estimated_threshold_ppm"),
                                 required<double>(*w, "threshold_ppm"), required_count(*w, "channel")};
  o.channels_not_computed = optional<std::string>(ch, "not_computed");
  o.too_wide = optional<std::string>(j, "too_wide");
  return o;
}

namespace {

// j[key] restored by from when it is an object; none when null.
template <class T>
std::optional<T> object_or_null(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  return T::from_json(v);
}

}  // namespace

EngineLayer EngineLayer::from_json(const json& j) {
  EngineLayer l;
  l.name = required<std::string>(j, "name");
  const std::string v = required<std::string>(j, "verdict");
  if (v != "LEFT OUT") l.verdict = verdict_of(j.at("verdict"));
  l.weights = object_or_null<EngineWeights>(j, "weights");
  l.outputs = object_or_null<EngineOutputs>(j, "outputs");
  l.input_mismatch = optional<std::string>(j, "input_mismatch");
  l.not_the_layer = optional<std::string>(j, "not_the_layer");
  return l;
}

EngineFinalOutput EngineFinalOutput::from_json(const json& j) {
  EngineFinalOutput f{required<std::string>(j, "name"), required_verdict(j, "verdict"),
                      optional<double>(j, "worst_ratio"), required_count<std::size_t>(j, "samples"), std::nullopt};
  if (const json* b = object_at(j, "band")) f.band = AdiffBand::from_json(*b);
  return f;
}

EngineRun EngineRun::from_json(const json& j) {
  EngineRun r;
  r.label = required<std::string>(j, "label");
  r.engine = required<std::string>(j, "engine");
  r.verdict = required_verdict(j, "verdict");
  r.seconds = required<double>(j, "seconds");
  r.failed = optional<std::string>(j, "failed");
  if (r.failed) return r;
  r.notes = required<std::vector<std::string>>(j, "notes");
  r.fusion_preserved = optional<bool>(j, "fusion_preserved");
  r.arithmetic = optional<std::string>(j, "arithmetic").value_or("float32");
  r.algorithm = optional<std::string>(j, "algorithm").value_or("direct");
  r.final_outputs = list_of(j, "final_outputs", EngineFinalOutput::from_json);
  r.final_not_checked = optional<std::string>(j, "final_not_checked");
  r.first_weights_beyond = optional<std::string>(j, "first_weights_beyond");
  r.first_outputs_beyond = optional<std::string>(j, "first_outputs_beyond");
  r.layers = list_of(j, "layers", EngineLayer::from_json);
  return r;
}

Engines Engines::from_json(const json& j) {
  Engines e;
  e.model_path = required<std::string>(j.at("model"), "path");
  e.pairs = required_count<std::size_t>(j.at("model"), "pairs");
  e.false_alarm_per_channel = required<double>(j.at("channel_statistic"), "false_alarm_per_channel");
  e.engines = list_of(j, "engines", EngineRun::from_json);
  e.verdict = required_verdict(j, "verdict");
  e.seconds = timing_seconds(j);
  return e;
}

}  // namespace foldcheck::result::views
