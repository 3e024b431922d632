// Restoring a `run` result and its answer (views/run.hpp).
#include "foldcheck/result/views/run.hpp"

#include <cmath>

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

namespace {

// j[key] as a number: nullopt when j is null (the part is absent) or key is missing or null.
// Anything else that is not a number, j or its value, is a malformed result and throws
// (json_io.hpp): a ratio written as "99" must not compare as none.
std::optional<double> number(const json& j, const char* key) {
  if (j.is_null()) return std::nullopt;
  const auto& o = j.get_ref<const json::object_t&>();  // throws for a non-object
  auto it = o.find(key);
  if (it == o.end() || it->second.is_null()) return std::nullopt;
  return value_as<double>(it->second);
}

// A bound in the file (see Comparison): nullopt when absent or null (no bound applied); an
// object otherwise, its figures held to their types. A null deterministic worst_ratio is +inf,
// a null probabilistic one absent.
std::optional<Comparison::Bound> bound_of(const json& c, const char* key, bool deterministic) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return std::nullopt;
  Comparison::Bound b{number(*it, "worst_ratio"), number(*it, "bound_ulp_at_worst"), number(*it, "worst_index"),
                      number(*it, "bound_ulp_at_max_ulp")};
  b.beyond_bound = optional_count(*it, "beyond_bound");
  b.formula = optional<std::string>(*it, "formula");
  if (deterministic && it->contains("worst_ratio") && it->at("worst_ratio").is_null()) b.worst_ratio = HUGE_VAL;
  return b;
}

std::optional<std::string> arithmetic_of(const json& j) { return optional<std::string>(j, "arithmetic"); }

// A value of NoteFacts: bound_check's when it is a non-negative number there, else the top level's.
double note_field(const json& c, const char* key) {
  const double inside = number(c.value("bound_check", json()), key).value_or(-1);
  return inside >= 0 ? inside : number(c, key).value_or(-1);
}

std::optional<NoteFacts::EpsHeld> eps_held_of(const json& c) {
  const json* held = object_at(c, "eps_held_in_float32");
  if (!held) return std::nullopt;
  const json& e = *held;
  return NoteFacts::EpsHeld{e.value("eps", 0.0),     e.value("eps_used", 0.0), e.value("max_relative_scale_shift", 0.0),
                            e.value("ulp_min", 0.0), e.value("ulp_max", 0.0),  e.value("dtype", "")};
}

}  // namespace

NoteFacts NoteFacts::from_json(const json& c) {
  NoteFacts f;
  if (!object_or_null(c)) return f;
  f.is_row = true;
  f.weights = c.value("name", "") == "weights";
  f.verdict = verdict_named(c.value("verdict", ""));
  f.max_ulp = number(c.value("ulp", json()), "max_abs").value_or(-1);
  f.bound_ulp_at_worst = note_field(c, "bound_ulp_at_worst");
  f.bound_ulp_at_max_ulp = note_field(c, "bound_ulp_at_max_ulp");
  f.eps_held = eps_held_of(c);
  f.mistrusted_cause = c.value("mistrusted_cause", "");
  for (const json& n : c.value("notes", json::array())) f.notes.push_back(value_as<std::string>(n));
  return f;
}

Distribution Distribution::from_json(const json& j) {
  return {required<double>(j, "max_abs"), required<double>(j, "p99_9"), required<double>(j, "p99"),
          required<double>(j, "p50"), required<double>(j, "mean_abs")};
}

Comparison Comparison::from_json(const json& j) {
  Comparison c;
  c.verdict = required_verdict(j, "verdict");
  c.ulp = Distribution::from_json(j.at("ulp"));
  c.ppm_max_abs = required<double>(j.at("ppm"), "max_abs");
  c.ulp_stats = Stats::from_json(j.at("ulp"));
  c.ppm_stats = Stats::from_json(j.at("ppm"));
  c.bound = bound_of(j, "bound", true);
  c.bound_check = bound_of(j, "bound_check", true);
  c.probabilistic_bound = bound_of(j, "probabilistic_bound", false);
  c.worst_index = number(j, "worst_index");
  for (const auto& [k, v] : j.at("kinds").items()) c.kinds.emplace_back(k, count_as(v, k));
  c.facts = NoteFacts::from_json(j);
  return c;
}

Tolerance Tolerance::from_json(const json& j) {
  return {required<double>(j, "rtol"), required<double>(j, "atol"), required<double>(j, "atol_alone")};
}

Attribution Attribution::from_json(const json& j) {
  Attribution a;
  a.elements = required<long>(j, "elements");
  for (const json& s : j.at("stages"))
    a.stages.push_back({required<std::string>(s, "stage"), required<double>(s, "share_mean"),
                        required<double>(s, "max_abs_ulp"), Histogram::from_json(s.at("histogram"))});
  const json& r = j.at("residual");
  a.residual_share_mean = required<double>(r, "share_mean");
  a.residual_max_abs_ulp = required<double>(r, "max_abs_ulp");
  return a;
}

Path Path::from_json(const json& j) {
  Path p;
  p.name = required<std::string>(j, "name");
  p.elements = required_count(j, "elements");
  p.scored = Comparison::from_json(j);
  const json& h = j.at("histograms");
  p.ulp_histogram = Histogram::from_json(h.at("ulp"));
  if (h.contains("ppm")) p.ppm_histogram = Histogram::from_json(h.at("ppm"));
  if (h.contains("bound")) p.bound_histogram = Histogram::from_json(h.at("bound"));
  if (j.contains("tolerance")) p.tolerance = Tolerance::from_json(j.at("tolerance"));
  if (j.contains("attribution")) p.attribution = Attribution::from_json(j.at("attribution"));
  return p;
}

FusedVsUnfused FusedVsUnfused::from_json(const json& j) {
  FusedVsUnfused f;
  f.a = required<std::string>(j, "a");
  f.elements_differing = required<long>(j, "elements_differing");
  f.max_abs_ulp = required<double>(j, "max_abs_ulp");
  f.beyond_combined_bound = required<long>(j, "beyond_combined_bound");
  if (!j.contains("attribution")) return f;
  const json& a = j.at("attribution");
  Shares s;
  s.difference_rms_ulp = a.at("difference").value("rms_ulp", 0.0);
  if (f.elements_differing > 0 && s.difference_rms_ulp > 0) {  // shares of a zero difference are not read
    s.fold_order_share = required<double>(a.at("fold_order"), "share_rms");
    s.parameters_share = required<double>(a.at("parameters"), "share_rms");
    s.residual_share = required<double>(a.at("residual"), "share_rms");
    s.fold_order_rms_ulp = required<double>(a.at("fold_order"), "rms_ulp");
  }
  f.attribution = s;
  return f;
}

Order Order::from_json(const json& j) {
  Order o;
  o.accumulation = required<std::string>(j, "accumulation");
  o.arithmetic = arithmetic_of(j);
  for (const json& p : j.at("paths")) o.paths.push_back(Path::from_json(p));
  for (const json& f : j.at("fused_vs_unfused")) o.fused_vs_unfused.push_back(FusedVsUnfused::from_json(f));
  return o;
}

FoldedParameters FoldedParameters::from_json(const json& j) {
  FoldedParameters f;
  f.recipe = required<std::string>(j, "recipe");
  f.weight_dtype = required<std::string>(j, "weight_dtype");
  f.arithmetic = arithmetic_of(j);
  f.weights = Comparison::from_json(j.at("weights"));
  if (!j.at("bias").is_null()) f.bias = Comparison::from_json(j.at("bias"));
  return f;
}

DtypeResult DtypeResult::from_json(const json& j) {
  DtypeResult d;
  d.dtype = required<std::string>(j, "dtype");
  d.outputs = required<long>(j, "outputs");
  d.terms_per_output = required<long>(j, "terms_per_output");
  for (const json& f : j.at("folded_parameters")) d.folded_parameters.push_back(FoldedParameters::from_json(f));
  for (const json& o : j.at("orders")) d.orders.push_back(Order::from_json(o));
  return d;
}

Layer Layer::from_json(const json& j) {
  Layer l;
  using Shape = std::vector<std::int64_t>;
  l.input = required<Shape>(j, "input");
  l.out_channels = required_count<int>(j, "out_channels");
  l.kernel = required<Shape>(j, "kernel");
  l.stride = required<Shape>(j, "stride");
  l.padding = required<Shape>(j, "padding");
  l.dilation = required<Shape>(j, "dilation");
  l.groups = required_count<int>(j, "groups");
  l.conv_bias = required<bool>(j, "conv_bias");
  l.eps = required<double>(j, "eps");
  l.bn_form = required<std::string>(j, "bn_form");
  return l;
}

std::optional<double> timing_seconds(const json& result) {
  const json* t = object_at(result, "timing");
  return t ? optional<double>(*t, "seconds") : std::nullopt;
}

Run Run::from_json(const json& j) {
  Run r;
  const json& c = j.at("case");
  r.case_path = required<std::string>(c, "path");
  r.case_name = required<std::string>(c, "name");
  r.case_description = optional<std::string>(c, "description").value_or("");
  r.layer = Layer::from_json(j.at("layer"));
  r.seed = required<std::uint64_t>(j, "seed");
  const json& ref = j.at("reference");
  r.fast_path_certified = optional_count<long>(ref, "fast_path_certified").value_or(0);
  r.fast_path_compensated = optional_count<long>(ref, "fast_path_compensated").value_or(0);
  r.fast_path_fallbacks = optional_count<long>(ref, "fast_path_fallbacks").value_or(0);
  r.precision_bits = required_count<long>(ref, "precision_bits");
  r.escalations = required_count<long>(ref, "escalations");
  for (const json& d : j.at("dtypes")) r.dtypes.push_back(DtypeResult::from_json(d));
  if (j.contains("observed_weights")) r.observed_weights = Explain::from_json(j.at("observed_weights"));
  r.seconds = timing_seconds(j);
  r.verdict = required_verdict(j, "verdict");
  return r;
}

RunAnswer RunAnswer::from_json(const json& j) {
  RunAnswer a;
  a.verdict = required_verdict(j, "verdict");
  a.reasoning = required<std::vector<std::string>>(j, "reasoning");
  if (const json& ow = j.at("observed_weights"); !ow.is_null())
    a.observed_weights =
        Observed{required_verdict(ow, "verdict"), required<std::vector<std::string>>(ow, "bit_exact"),
                 required<std::vector<std::string>>(ow, "reasoning"), required<std::string>(ow, "note")};
  for (const json& t : j.at("tolerances"))
    a.tolerances.push_back({required<std::string>(t, "path"), required<std::string>(t, "dtype"),
                            required<std::string>(t, "accumulation"), Tolerance::from_json(t)});
  return a;
}

json RunAnswer::to_json() const {
  json ow = nullptr;
  if (observed_weights)
    ow = {{"verdict", name(observed_weights->verdict)},
          {"bit_exact", observed_weights->bit_exact},
          {"reasoning", observed_weights->reasoning},
          {"note", observed_weights->note}};
  json tol = json::array();
  for (const PathTolerance& t : tolerances)
    tol.push_back({{"path", t.path},
                   {"dtype", t.dtype},
                   {"accumulation", t.accumulation},
                   {"rtol", t.tolerance.rtol},
                   {"atol", t.tolerance.atol},
                   {"atol_alone", t.tolerance.atol_alone}});
  return {{"verdict", name(verdict)}, {"reasoning", reasoning}, {"observed_weights", ow}, {"tolerances", tol}};
}

}  // namespace foldcheck::result::views
