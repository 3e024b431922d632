// A summary read from and written to JSON (views/summary.hpp).
#include "foldcheck/result/views/summary.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

namespace {

template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
json or_null_json(const std::optional<T>& v) {
  return v ? v->to_json() : json(nullptr);
}

// An object's value restored by from(), or nullopt when key is missing or null (a value of
// another type throws: json_io.hpp object_at).
template <class T>
std::optional<T> object_of(const json& j, const char* key) {
  const json* o = object_at(j, key);
  return o ? std::optional(T::from_json(*o)) : std::nullopt;
}

std::vector<std::string> strings(const json& j, const char* key) {
  return list_of(j, key, [](const json& e) { return e.get<std::string>(); });
}

// The strings of j[key], or nullopt when key is absent (not written by the report's version).
std::optional<std::vector<std::string>> optional_strings(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return strings(j, key);
}

const std::vector<std::string> kNone;

Histograms histograms_of(const json& j, const char* key) {
  Histograms h;
  const json* o = object_at(j, key);
  if (!o) return h;
  for (const auto& [k, v] : o->items())
    h[k] = object_or_null(v) ? std::optional(CompactHistogram::from_json(v)) : std::nullopt;
  return h;
}

json histograms_json(const Histograms& hs) {
  json r = json::object();
  for (const auto& [k, v] : hs) r[k] = or_null_json(v);
  return r;
}

}  // namespace

Stats Stats::from_json(const json& j) {
  return {optional<double>(j, "p50"),     optional<double>(j, "p99"), optional<double>(j, "p99_9"),
          optional<double>(j, "max_abs"), optional<double>(j, "rms"), optional_count(j, "count")};
}

json Stats::to_json() const {
  return {{"p50", or_null(p50)},         {"p99", or_null(p99)}, {"p99_9", or_null(p99_9)},
          {"max_abs", or_null(max_abs)}, {"rms", or_null(rms)}, {"count", or_null(count)}};
}

CompactHistogram CompactHistogram::from_json(const json& j) {
  CompactHistogram h;
  h.unit = required<std::string>(j, "unit");
  h.zero = required_count(j, "zero");
  h.first_upper = optional<double>(j, "first_upper");
  h.from_zero = required<bool>(j, "from_zero");
  h.negative = required<std::vector<std::int64_t>>(j, "negative");
  h.positive = required<std::vector<std::int64_t>>(j, "positive");
  // A side shorter than the other (a hand-edited or truncated report; found by
  // fuzz_report_json) is refused here, as reading its missing bin would be.
  if (h.positive.size() < h.negative.size()) (void)j.at("positive").at(h.negative.size() - 1);
  const json& over = j.at("overflow");
  h.overflow_negative = required_count(over, "negative");
  h.overflow_positive = required_count(over, "positive");
  return h;
}

json CompactHistogram::to_json() const {
  return {{"unit", unit},
          {"zero", zero},
          {"first_upper", or_null(first_upper)},
          {"from_zero", from_zero},
          {"negative", negative},
          {"positive", positive},
          {"overflow", {{"negative", overflow_negative}, {"positive", overflow_positive}}}};
}

SetSummary SetSummary::from_json(const json& j) {
  SetSummary c;
  c.verdict = required_verdict(j, "verdict");
  c.ulp = object_of<Stats>(j, "ulp");
  c.ppm = object_of<Stats>(j, "ppm");
  c.bound_ratio = optional<double>(j, "bound_ratio");
  c.beyond_bound = optional_count(j, "beyond_bound").value_or(0);
  c.checked = j.contains("bound_ulp_at_max_ulp") || j.contains("bound_ulp_at_worst");
  c.bound_ulp_at_worst = optional<double>(j, "bound_ulp_at_worst");
  c.bound_ulp_at_max_ulp = optional<double>(j, "bound_ulp_at_max_ulp");
  c.notes = optional_strings(j, "notes");
  return c;
}

const std::vector<std::string>& SetSummary::note_list() const { return notes ? *notes : kNone; }

namespace {

// A summary entry's NoteFacts: bound_ulp_at_worst and bound_ulp_at_max_ulp as they are written
// (nullopt: not written, or null).
NoteFacts entry_facts(Verdict v, const std::optional<Stats>& ulp, const std::optional<double>& at_worst,
                      const std::optional<double>& at_max_ulp, const std::vector<std::string>& notes) {
  NoteFacts f;
  f.is_row = true;
  f.verdict = v;
  f.max_ulp = ulp ? ulp->max_abs.value_or(-1) : -1;
  f.bound_ulp_at_worst = at_worst.value_or(-1);
  f.bound_ulp_at_max_ulp = at_max_ulp.value_or(-1);
  f.notes = notes;
  return f;
}

}  // namespace

NoteFacts SetSummary::note_facts() const {
  return entry_facts(verdict, ulp, checked ? bound_ulp_at_worst : std::nullopt,
                     checked ? bound_ulp_at_max_ulp : std::nullopt, note_list());
}

NoteFacts PathSummary::note_facts() const {
  return entry_facts(verdict, ulp, bounded ? bound_ulp_at_worst : std::nullopt,
                     checked ? bound_ulp_at_max_ulp : std::nullopt, note_list());
}
const std::vector<std::string>& PathSummary::note_list() const { return notes ? *notes : kNone; }

json SetSummary::to_json() const {
  json s{{"verdict", name(verdict)}, {"ulp", or_null_json(ulp)}, {"ppm", or_null_json(ppm)}};
  s["bound_ratio"] = or_null(bound_ratio);
  s["beyond_bound"] = beyond_bound;
  if (checked) {
    s["bound_ulp_at_worst"] = or_null(bound_ulp_at_worst);
    s["bound_ulp_at_max_ulp"] = or_null(bound_ulp_at_max_ulp);
  }
  if (notes) s["notes"] = *notes;
  return s;
}

PathSummary PathSummary::from_json(const json& j) {
  PathSummary p;
  p.key = required<std::string>(j, "key");
  p.dtype = required<std::string>(j, "dtype");
  p.accumulation = required<std::string>(j, "accumulation");
  p.arithmetic = required<std::string>(j, "arithmetic");
  p.path = required<std::string>(j, "path");
  p.verdict = required_verdict(j, "verdict");
  p.elements = optional_count(j, "elements").value_or(0);
  p.ulp = object_of<Stats>(j, "ulp");
  p.ppm = object_of<Stats>(j, "ppm");
  p.bounded = j.contains("bound_ratio") || j.contains("bound_ulp_at_worst");
  p.bound_ratio = optional<double>(j, "bound_ratio");
  p.bound_ulp_at_worst = optional<double>(j, "bound_ulp_at_worst");
  p.beyond_bound = optional_count(j, "beyond_bound").value_or(0);
  p.checked = j.contains("bound_ulp_at_max_ulp");
  p.bound_ulp_at_max_ulp = optional<double>(j, "bound_ulp_at_max_ulp");
  p.notes = optional_strings(j, "notes");
  p.probabilistic = j.contains("probabilistic_ratio");
  p.probabilistic_ratio = optional<double>(j, "probabilistic_ratio");
  if (const json* shares = object_at(j, "shares")) {
    p.shares.emplace();
    for (const auto& [stage, v] : shares->items())
      (*p.shares)[stage] = v.is_null() ? std::nullopt : std::optional(value_as<double>(v));
  }
  p.histograms = histograms_of(j, "histograms");
  return p;
}

json PathSummary::to_json() const {
  json e{{"key", key},
         {"dtype", dtype},
         {"accumulation", accumulation},
         {"arithmetic", arithmetic},
         {"path", path},
         {"verdict", name(verdict)},
         {"elements", elements},
         {"ulp", or_null_json(ulp)},
         {"ppm", or_null_json(ppm)}};
  if (bounded) {
    e["bound_ratio"] = or_null(bound_ratio);
    e["bound_ulp_at_worst"] = or_null(bound_ulp_at_worst);
  }
  e["beyond_bound"] = beyond_bound;
  if (checked) e["bound_ulp_at_max_ulp"] = or_null(bound_ulp_at_max_ulp);
  if (notes) e["notes"] = *notes;
  if (probabilistic) e["probabilistic_ratio"] = or_null(probabilistic_ratio);
  if (shares) {
    json s = json::object();
    for (const auto& [stage, v] : *shares) s[stage] = or_null(v);
    e["shares"] = s;
  }
  e["histograms"] = histograms_json(histograms);
  return e;
}

FoldedSummary FoldedSummary::from_json(const json& j) {
  return {required<std::string>(j, "key"),          required<std::string>(j, "dtype"),
          required<std::string>(j, "recipe"),       required<std::string>(j, "arithmetic"),
          required<std::string>(j, "weight_dtype"), object_of<SetSummary>(j, "weights"),
          object_of<SetSummary>(j, "bias")};
}

json FoldedSummary::to_json() const {
  return {{"key", key},
          {"dtype", dtype},
          {"recipe", recipe},
          {"arithmetic", arithmetic},
          {"weight_dtype", weight_dtype},
          {"weights", or_null_json(weights)},
          {"bias", or_null_json(bias)}};
}

ActivationSummary ActivationSummary::from_json(const json& j) {
  return {required_verdict(j, "verdict"), optional<double>(j, "p99_9_abs_ulp"), optional<double>(j, "max_abs_ulp"),
          optional<double>(j, "bound_ratio"), optional<std::string>(j, "dominant_stage")};
}

json ActivationSummary::to_json() const {
  json a{{"verdict", name(verdict)},
         {"p99_9_abs_ulp", or_null(p99_9_abs_ulp)},
         {"max_abs_ulp", or_null(max_abs_ulp)},
         {"bound_ratio", or_null(bound_ratio)}};
  if (dominant_stage) a["dominant_stage"] = *dominant_stage;
  return a;
}

LayerSummary LayerSummary::from_json(const json& j) {
  LayerSummary l;
  l.key = required<std::string>(j, "key");
  l.name = required<std::string>(j, "name");
  l.op = required<std::string>(j, "op");
  l.verdict = required_verdict(j, "verdict");
  l.note = optional<std::string>(j, "note");
  if (j.contains("recipe"))
    l.fold = LayerFold{required<std::string>(j, "recipe"), optional<double>(j, "fold_ratio"),
                       object_of<SetSummary>(j, "weights"), object_of<SetSummary>(j, "bias"),
                       optional_count(j, "worst_channel")};
  l.fused = object_of<ActivationSummary>(j, "fused");
  l.unfused = object_of<ActivationSummary>(j, "unfused");
  return l;
}

json LayerSummary::to_json() const {
  json e{{"key", key}, {"name", name}, {"op", op}, {"verdict", foldcheck::name(verdict)}};
  if (note) e["note"] = *note;
  if (fold) {
    e["recipe"] = fold->recipe;
    e["fold_ratio"] = or_null(fold->fold_ratio);
    e["weights"] = or_null_json(fold->weights);
    e["bias"] = or_null_json(fold->bias);
    e["worst_channel"] = or_null(fold->worst_channel);
  }
  if (fused) e["fused"] = fused->to_json();
  if (unfused) e["unfused"] = unfused->to_json();
  return e;
}

EndToEndSummary EndToEndSummary::from_json(const json& j) {
  EndToEndSummary e;
  e.not_run = optional<std::string>(j, "not_run");
  e.verdict = e.not_run ? optional_verdict(j, "verdict") : required_verdict(j, "verdict");
  e.observed_model = optional<bool>(j, "observed_model");
  e.fused_weights = optional<std::string>(j, "fused_weights");
  if (j.contains("outputs"))
    e.outputs = list_of(j, "outputs", [](const json& o) {
      return EndToEndOutput{required<std::string>(o, "name"), object_of<SetSummary>(o, "unfused"),
                            object_of<SetSummary>(o, "fused"), histograms_of(o, "histograms")};
    });
  if (const json* o = object_at(j, "observed_output")) {
    e.observed_output = ObservedOutput{required_verdict(*o, "verdict"), optional<double>(*o, "bound_ratio"),
                                       object_of<Stats>(*o, "ulp")};
    if (const json* b = object_at(*o, "band"))
      e.observed_output->band = BandSummary{required_count(*b, "beyond"),           required<std::string>(*b, "layer"),
                                            required<std::string>(*b, "direction"), optional<double>(*b, "ratio"),
                                            optional<double>(*b, "change_ppm"),     optional<double>(*b, "floor_ppm")};
  }
  return e;
}

json EndToEndSummary::to_json() const {
  json ee{{"verdict", verdict ? json(name(*verdict)) : json(nullptr)}, {"not_run", or_null(not_run)}};
  if (observed_model) ee["observed_model"] = *observed_model;
  if (fused_weights) ee["fused_weights"] = *fused_weights;
  if (outputs) {
    json outs = json::array();
    for (const EndToEndOutput& o : *outputs)
      outs.push_back({{"name", o.name},
                      {"unfused", or_null_json(o.unfused)},
                      {"fused", or_null_json(o.fused)},
                      {"histograms", histograms_json(o.histograms)}});
    ee["outputs"] = outs;
  }
  if (observed_output) {
    ee["observed_output"] = {{"verdict", name(observed_output->verdict)},
                             {"bound_ratio", or_null(observed_output->bound_ratio)},
                             {"ulp", or_null_json(observed_output->ulp)}};
    if (const auto& b = observed_output->band)
      ee["observed_output"]["band"] = {{"beyond", b->beyond},
                                       {"layer", b->layer},
                                       {"direction", b->direction},
                                       {"ratio", or_null(b->ratio)},
                                       {"change_ppm", or_null(b->change_ppm)},
                                       {"floor_ppm", or_null(b->floor_ppm)}};
  }
  return ee;
}

Summary Summary::from_json(const json& j) {
  Summary s;
  s.command = required<std::string>(j, "command");
  s.name = required<std::string>(j, "name");
  s.description = optional<std::string>(j, "description").value_or("");
  s.verdict = required_verdict(j, "verdict");
  s.explanation = strings(j, "explanation");
  if (const json* answer = object_at(j, "answer")) s.answer = RunAnswer::from_json(*answer);
  if (auto it = j.find("seed"); it != j.end()) s.seed = *it;
  s.paths = list_of(j, "paths", PathSummary::from_json);
  s.folded = list_of(j, "folded", FoldedSummary::from_json);
  s.observed_weights_verdict = optional_verdict(j, "observed_weights_verdict");
  s.layers = list_of(j, "layers", LayerSummary::from_json);
  s.end_to_end = object_of<EndToEndSummary>(j, "end_to_end");
  s.reasoning = optional_strings(j, "reasoning");
  return s;
}

json Summary::to_json() const {
  json s{{"command", command}, {"name", name}, {"description", description}, {"verdict", foldcheck::name(verdict)}};
  if (is_run()) {
    s["seed"] = seed;
    json ps = json::array(), fs = json::array();
    for (const PathSummary& p : paths) ps.push_back(p.to_json());
    for (const FoldedSummary& f : folded) fs.push_back(f.to_json());
    s["paths"] = ps;
    s["folded"] = fs;
    if (observed_weights_verdict) s["observed_weights_verdict"] = foldcheck::name(*observed_weights_verdict);
  } else {
    json ls = json::array();
    for (const LayerSummary& l : layers) ls.push_back(l.to_json());
    s["layers"] = ls;
    if (end_to_end) s["end_to_end"] = end_to_end->to_json();
    if (reasoning) s["reasoning"] = *reasoning;
  }
  if (answer) s["answer"] = answer->to_json();
  s["explanation"] = explanation;
  return s;
}

}  // namespace foldcheck::result::views
