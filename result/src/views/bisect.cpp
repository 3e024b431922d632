// Reading a `bisect` result into its view (views/bisect.hpp).
#include "foldcheck/result/views/bisect.hpp"

#include "model_views_common.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

BisectElement BisectElement::from_json(const json& j) {
  BisectElement e;
  e.flat_index = required_count(j, "flat_index");
  e.index = required<std::vector<std::int64_t>>(j, "index");
  e.observed = number_or_none(j, "observed");
  e.exact = number_or_none(j, "exact");
  e.channel = required_count(j, "channel");
  e.channel_scale = number_or_none(j, "channel_scale");
  e.has_abs_sum = j.contains("abs_sum");
  e.abs_sum = number_or_none(j, "abs_sum");
  e.has_ulp = j.contains("ulp");
  e.ulp = number_or_none(j, "ulp");
  e.channel_units = number_or_none(j, "channel_units");
  e.has_ratio = j.contains("ratio");
  e.ratio = number_or_none(j, "ratio");
  return e;
}

namespace {

std::optional<BisectElement> element_if(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return BisectElement::from_json(*it);
}

// The external kind's facts of a step.
void read_external(const json& j, BisectStep& s) {
  if (const json* cu = object_at(j, "channel_units")) {
    s.channel_units_max = number_or_none(*cu, "max");
    s.channel_units_p99_9 = number_or_none(*cu, "p99_9");
  }
  s.largest_ulp = element_if(j, "largest_ulp");
  s.decisive = element_if(j, "decisive");
  s.inf = optional_count(j, "inf").value_or(0);
  s.gross = optional_count(j, "gross").value_or(0);
  s.command = optional<std::string>(j, "command").value_or("");
}

}  // namespace

BisectStep BisectStep::from_json(const json& j) {
  BisectStep s;
  s.bad = required<bool>(j, "bad");
  s.verdict = optional_verdict(j, "verdict");
  s.disabled = optional<std::string>(j, "disabled");
  s.enabled = optional<std::vector<std::string>>(j, "enabled").value_or(std::vector<std::string>{});
  s.max_abs_ulp = number_or_none(j, "max_abs_ulp");
  s.p99_9_abs_ulp = number_or_none(j, "p99_9_abs_ulp");
  s.worst_ratio = number_or_none(j, "worst_ratio");
  s.probabilistic_worst_ratio = number_or_none(j, "probabilistic_worst_ratio");
  read_external(j, s);
  s.how = optional<std::string>(j, "how").value_or("");
  s.pass = optional<std::string>(j, "pass");
  s.applied = optional<bool>(j, "applied");
  s.skipped = optional<std::string>(j, "skipped");
  s.worst_layer = optional<std::string>(j, "worst_layer");
  if (const json* b = object_at(j, "band")) s.band = AdiffBand::from_json(*b);
  return s;
}

BisectWeights BisectWeights::from_json(const json& j) {
  return {required<std::string>(j, "pass"),      required_count(j, "changed"),
          number_or_none(j, "max_change_ppm"),   number_or_none(j, "max_drift_ppm_vs_original"),
          optional_verdict(j, "fold_verdict"),   optional<std::string>(j, "closest_recipe"),
          number_or_none(j, "fold_worst_ratio"), number_or_none(j, "max_abs_ulp_vs_exact_fold")};
}

namespace {

// The head: which bisect this is and what it ran on.
void read_head(const json& j, Bisect& b) {
  b.external_command = optional<std::string>(j, "external_command");
  if (b.external_command) {
    b.reference = required<std::string>(j, "reference");
  } else if (auto m = j.find("model"); m != j.end()) {
    b.model = Bisect::Model{required<std::string>(*m, "path"), required_count<std::size_t>(*m, "pairs")};
    b.input = required<std::string>(j, "input");
  } else {
    const json& c = j.at("case");
    b.case_ = Bisect::Case{required<std::string>(c, "path"), required<std::uint64_t>(c, "seed")};
    b.dtype = required<std::string>(j, "dtype");
  }
}

}  // namespace

Bisect Bisect::from_json(const json& j) {
  Bisect b;
  read_head(j, b);
  b.passes = required<std::vector<std::string>>(j, "passes");
  b.criterion = required<std::string>(j, "criterion");
  b.leave_one_out = optional<std::string>(j, "mode").value_or("") == "leave-one-out";
  b.judged_by = optional<std::string>(j, "judged_by").value_or("");
  b.steps = list_of(j, "steps", BisectStep::from_json);
  b.weights = list_of(j, "weights", BisectWeights::from_json);
  b.evaluations = required_count<std::size_t>(j, "evaluations");
  b.culprit = optional<std::string>(j, "culprit");
  b.verdict = required_verdict(j, "verdict");
  b.note = optional<std::string>(j, "note");
  b.probabilistic_only = optional<std::string>(j, "probabilistic_only");
  b.mistrusted = optional<std::string>(j, "mistrusted");
  b.seconds = timing_seconds(j);
  return b;
}

}  // namespace foldcheck::result::views
