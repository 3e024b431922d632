// Reading an `accuracy-diff` result into its view (views/accuracy_diff.hpp).
#include "foldcheck/result/views/accuracy_diff.hpp"

#include "model_views_common.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

namespace {

// A comparison's max |ULP| (j[key]: {"ulp": {"max_abs"}}); none when j[key] is null or missing.
std::optional<Figure> max_abs_ulp(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return optional<double>(it->at("ulp"), "max_abs");
}

// j[key] as T::from_json when present.
template <class T>
std::optional<T> present(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return T::from_json(*it);
}

// j[key] as Stats; none when missing or null (json_io.hpp object_at: another type throws).
std::optional<Stats> stats_of(const json& j, const char* key) {
  const json* o = object_at(j, key);
  return o ? std::optional(Stats::from_json(*o)) : std::nullopt;
}

// j[key] as T::from_json; none when missing or null (another type throws).
template <class T>
std::optional<T> object_of(const json& j, const char* key) {
  const json* o = object_at(j, key);
  return o ? std::optional(T::from_json(*o)) : std::nullopt;
}

}  // namespace

AdiffComparison AdiffComparison::from_json(const json& j) {
  AdiffComparison c;
  c.verdict = required_verdict(j, "verdict");
  c.ulp = stats_of(j, "ulp");
  c.ppm = stats_of(j, "ppm");
  if (auto b = j.find("bound_check"); b != j.end()) {
    Check check;
    if (object_or_null(*b))
      check = {optional<double>(*b, "worst_ratio"), optional<double>(*b, "bound_ulp_at_worst"),
               optional<double>(*b, "bound_ulp_at_max_ulp"), optional_count(*b, "beyond_bound").value_or(0)};
    c.bound_check = check;
  }
  if (const json* h = object_at(j, "histograms"))
    for (const auto& [k, v] : h->items())
      c.histograms[k] = object_or_null(v) ? std::optional(Histogram::from_json(v)) : std::nullopt;
  c.facts = NoteFacts::from_json(j);
  return c;
}

AdiffRecipe AdiffRecipe::from_json(const json& j) {
  return {required<std::string>(j, "recipe"),
          required<std::string>(j, "worst_in"),
          optional<double>(j, "worst_ratio"),
          max_abs_ulp(j, "weights"),
          max_abs_ulp(j, "bias"),
          object_of<AdiffComparison>(j, "weights"),
          object_of<AdiffComparison>(j, "bias"),
          optional_verdict(j, "verdict"),
          optional_count(j, "worst_channel")};
}

std::size_t AdiffFold::shown_index() const {
  std::size_t s = 0;
  for (std::size_t i = 0; i < recipes.size(); ++i)
    if (shown_recipe && recipes[i].recipe == *shown_recipe) s = i;
  return s;
}

const AdiffRecipe& AdiffFold::shown() const { return recipes.at(shown_index()); }

AdiffFold AdiffFold::from_json(const json& j) {
  AdiffFold f{required_verdict(j, "verdict"), list_of(j, "recipes", AdiffRecipe::from_json),
              optional<std::string>(j, "shown_recipe")};
  f.closest_recipe = optional<std::string>(j, "closest_recipe");
  f.bound = optional<std::string>(j, "bound");
  f.source = optional<std::string>(j, "source");
  f.worst_channel = optional_count(j, "worst_channel");
  f.worst_ratio = optional<double>(j, "worst_ratio");
  return f;
}

AdiffActivation AdiffActivation::from_json(const json& j) {
  return {required_verdict(j, "verdict"), optional<double>(j, "p99_9_abs_ulp"), optional<double>(j, "max_abs_ulp"),
          optional<double>(j, "worst_ratio"), optional<std::string>(j, "dominant_stage")};
}

AdiffLayer AdiffLayer::from_json(const json& j) {
  AdiffLayer l;
  l.name = required<std::string>(j, "name");
  l.op = required<std::string>(j, "op");
  l.verdict = required_verdict(j, "verdict");
  l.fold = present<AdiffFold>(j, "fold");
  l.observed_note = optional<std::string>(j, "observed_note");
  if (auto a = j.find("activations"); a != j.end() && a->contains("fused")) {
    l.fused = AdiffActivation::from_json(a->at("fused"));
    l.unfused = AdiffActivation::from_json(a->at("unfused"));
  }
  l.worst_channel = optional_count(j, "worst_channel");
  return l;
}

AdiffOutput AdiffOutput::from_json(const json& j) {
  AdiffOutput o;
  o.name = required<std::string>(j, "name");
  o.shape = j.at("shape");
  const json& u = j.at("unfused").at("ulp");
  const json& f = j.at("fused").at("ulp");
  o.unfused_p99_9 = optional<double>(u, "p99_9");
  o.unfused_max_abs = optional<double>(u, "max_abs");
  o.fused_p99_9 = optional<double>(f, "p99_9");
  o.fused_max_abs = optional<double>(f, "max_abs");
  o.unfused = AdiffComparison::from_json(j.at("unfused"));
  o.fused = AdiffComparison::from_json(j.at("fused"));
  if (auto t = j.find("top1_agreement"); t != j.end())
    o.top1 = AdiffTop1{required_count(*t, "rows"), required_count(*t, "unfused_vs_reference"),
                       required_count(*t, "fused_vs_reference"), required_count(*t, "fused_vs_unfused")};
  return o;
}

namespace {

// The observed output's optional parts: its worst element, top-1 agreement and bound in ULP.
void read_observed_extras(const json& j, AdiffObservedOutput& o) {
  if (auto w = j.find("worst"); w != j.end())
    o.worst = AdiffObservedOutput::Worst{w->at("index"), required<double>(*w, "observed"),
                                         required<double>(*w, "reference"), required<double>(*w, "bound")};
  if (auto t = j.find("top1_agreement"); t != j.end())
    o.top1 = AdiffObservedOutput::Top1{required_count(*t, "observed_vs_reference"), required_count(*t, "rows")};
  if (auto b = j.find("bound_ulp"); b != j.end()) {
    const json& runs = j.at("foldcheck_runs");
    o.bound_ulp =
        AdiffObservedOutput::BoundUlp{optional<double>(*b, "median"), optional<double>(*b, "min"),
                                      optional<double>(*b, "max"), optional<double>(runs, "unfused_worst_ratio"),
                                      optional<double>(runs, "fused_worst_ratio")};
  }
}

}  // namespace

AdiffBandDirection AdiffBandDirection::from_json(const json& j) {
  return {required<std::string>(j, "layer"), required<std::string>(j, "direction"),
          optional<double>(j, "ratio_to_band"), optional<double>(j, "change_ppm"), optional<double>(j, "floor_ppm")};
}

AdiffBand AdiffBand::from_json(const json& j) {
  AdiffBand b;
  if (!required<bool>(j, "computed")) {
    b.not_computed = required<std::string>(j, "not_computed");
    return b;
  }
  b.samples = required_count(j, "samples");
  b.directions = required_count(j, "directions");
  b.beyond_count = required_count(j, "beyond_count");
  b.alpha = required<double>(j, "alpha");
  b.floor_median_ppm = optional<double>(j.at("floor_ppm"), "median");
  b.floor_p90_ppm = optional<double>(j.at("floor_ppm"), "p90");
  b.scale_drift_ppm = optional<double>(j, "scale_drift_ppm").value_or(0.0);
  b.beyond = list_of(j, "beyond", AdiffBandDirection::from_json);
  if (const json* w = object_at(j, "worst")) b.worst = AdiffBandDirection::from_json(*w);
  return b;
}

AdiffObservedOutput AdiffObservedOutput::from_json(const json& j) {
  AdiffObservedOutput o;
  o.path = required<std::string>(j, "path");
  o.bound = required<std::string>(j, "bound");
  o.shape = j.at("shape");
  o.verdict = required_verdict(j, "verdict");
  const json& c = j.at("comparison");
  const json& u = c.at("ulp");
  o.ulp_p50 = optional<double>(u, "p50");
  o.ulp_p99_9 = optional<double>(u, "p99_9");
  o.ulp_max_abs = optional<double>(u, "max_abs");
  o.ulp_stats = stats_of(c, "ulp");
  if (auto b = c.find("bound_check"); b != c.end())
    o.bound_check = BoundCheck{optional<double>(*b, "worst_ratio"), required_count(*b, "beyond_bound")};
  else o.kinds = c.at("kinds");
  read_observed_extras(j, o);
  if (const json* b = object_at(j, "band")) o.band = AdiffBand::from_json(*b);
  return o;
}

AdiffEndToEnd AdiffEndToEnd::from_json(const json& j) {
  AdiffEndToEnd e;
  e.not_run = optional<std::string>(j, "not_run");
  e.fused_recipe = optional<std::string>(j, "fused_recipe");
  if (e.not_run) return e;
  e.input = required<std::string>(j, "input");
  e.input_shape = j.at("input_shape");
  e.reference = required<std::string>(j, "reference");
  e.outputs = list_of(j, "outputs", AdiffOutput::from_json);
  e.observed_output = present<AdiffObservedOutput>(j, "observed_output");
  e.observed_output_not_checked = optional<std::string>(j, "observed_output_not_checked");
  e.first_layer_beyond_bound = optional<std::string>(j, "first_layer_beyond_bound");
  e.verdict = required_verdict(j, "verdict");
  return e;
}

AccuracyDiff AccuracyDiff::from_json(const json& j) {
  AccuracyDiff r;
  const json& m = j.at("model");
  r.model_path = required<std::string>(m, "path");
  r.nodes = required_count<std::size_t>(m, "nodes");
  r.opset = required_count(m, "opset");
  r.producer = required<std::string>(m, "producer");
  if (auto o = j.find("observed"); o != j.end())
    r.observed = Observed{required<std::string>(*o, "path"), required<std::string>(*o, "matching")};
  r.layers = list_of(j, "layers", AdiffLayer::from_json);
  r.end_to_end = present<AdiffEndToEnd>(j, "end_to_end");
  r.unpaired = list_of(j, "unpaired", [](const json& u) {
    return Unpaired{required<std::string>(u, "batchnorm"), required<std::string>(u, "reason")};
  });
  r.reasoning = optional<std::vector<std::string>>(j, "reasoning").value_or(std::vector<std::string>{});
  r.verdict = required_verdict(j, "verdict");
  r.seconds = timing_seconds(j);
  return r;
}

}  // namespace foldcheck::result::views
