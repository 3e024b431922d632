// Command results condensed for reports and baselines (summary.hpp).
#include "foldcheck/reports/summary.hpp"

#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"

#include "foldcheck/result/views/json_io.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;

namespace {

using views::optional;
using views::optional_verdict;
using views::required;
using views::required_verdict;

// The value of key in j, or null when j is not an object or has no such key.
const json& member(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// Percentiles of a Distribution (compare.hpp's JSON), as absolute values where signed.
std::optional<views::Stats> stats(const json& d) {
  if (!d.is_object()) return std::nullopt;
  return views::Stats::from_json(d);
}

// A histogram (histogram.hpp's JSON, which lists only non-empty buckets) in a compact
// form: the first listed bin's upper edge (each next bin doubles it; empty bins in between
// are zeros), the negative and positive counts per bin, exact zeros, and the counts beyond
// the histogram's last edge ("overflow"). "from_zero": the first bin is the histogram's
// bottom one, (0, first_upper], rather than (first_upper / 2, first_upper].
std::optional<views::CompactHistogram> compact_histogram(const json& h) {
  if (!h.is_object()) return std::nullopt;
  views::CompactHistogram c;
  std::map<int, std::pair<std::int64_t, std::int64_t>> bins;  // log2(upper) -> counts
  for (const json& b : views::list_of(h, "buckets", [](const json& b) { return b; })) {
    if (!member(b, "upper").is_number()) {
      c.overflow_negative = required<std::int64_t>(b, "negative");
      c.overflow_positive = required<std::int64_t>(b, "positive");
      continue;
    }
    const int e = static_cast<int>(std::lround(std::log2(required<double>(b, "upper"))));
    bins[e] = {required<std::int64_t>(b, "negative"), required<std::int64_t>(b, "positive")};
    if (bins.begin()->first == e) c.from_zero = optional<std::string>(b, "range").value_or("").rfind("(0,", 0) == 0;
  }
  if (!bins.empty()) {
    c.first_upper = std::ldexp(1.0, bins.begin()->first);
    for (int e = bins.begin()->first; e <= bins.rbegin()->first; ++e) {
      const auto it = bins.find(e);
      c.negative.push_back(it == bins.end() ? 0 : it->second.first);
      c.positive.push_back(it == bins.end() ? 0 : it->second.second);
    }
  }
  c.unit = optional<std::string>(h, "unit").value_or("");
  c.zero = optional<std::int64_t>(h, "zero").value_or(0);
  return c;
}

views::Histograms compact_histograms(const json& hs) {
  views::Histograms r;
  if (hs.is_object())
    for (const auto& [k, v] : hs.items()) r[k] = compact_histogram(v);
  return r;
}

// A SetSummary's essentials (weights, biases, outputs).
std::optional<views::SetSummary> comparison(const json& c) {
  if (!c.is_object()) return std::nullopt;  // e.g. TVM's bias with a conv bias: a separate shift, no folded bias
  views::SetSummary s;
  s.verdict = required_verdict(c, "verdict");
  s.ulp = stats(member(c, "ulp"));
  s.ppm = stats(member(c, "ppm"));
  if (const json& bc = member(c, "bound_check"); c.contains("bound_check")) {
    s.bound_ratio = optional<double>(bc, "worst_ratio");
    s.beyond_bound = optional<std::int64_t>(bc, "beyond_bound").value_or(0);
    s.checked = true;
    s.bound_ulp_at_worst = optional<double>(bc, "bound_ulp_at_worst");
    s.bound_ulp_at_max_ulp = optional<double>(bc, "bound_ulp_at_max_ulp");
  }
  s.notes = row_notes(c);
  return s;
}

// The bound facts of a run's path: its bound's ratio (and formula), its check, its
// probabilistic bound and attribution.
void path_bounds(views::PathSummary& e, const json& p, std::set<std::string>& formulas) {
  if (const json& b = member(p, "bound"); p.contains("bound")) {
    e.bounded = true;
    e.bound_ratio = optional<double>(b, "worst_ratio");  // none when nothing was compared
    e.bound_ulp_at_worst = optional<double>(b, "bound_ulp_at_worst");
    formulas.insert(required<std::string>(b, "formula"));
  }
  if (const json& bc = member(p, "bound_check"); p.contains("bound_check")) {
    e.beyond_bound = required<std::int64_t>(bc, "beyond_bound");
    e.checked = true;
    e.bound_ulp_at_max_ulp = optional<double>(bc, "bound_ulp_at_max_ulp");
  }
  if (p.contains("probabilistic_bound")) {
    e.probabilistic = true;
    e.probabilistic_ratio = optional<double>(member(p, "probabilistic_bound"), "worst_ratio");
  }
  if (const json& a = member(p, "attribution"); a.contains("stages")) {
    e.shares.emplace();
    for (const json& st : views::list_of(a, "stages", [](const json& x) { return x; }))
      (*e.shares)[required<std::string>(st, "stage")] = optional<double>(st, "share_mean");
  }
}

// One output path of one accumulation order of one dtype: its key and every fact.
views::PathSummary path_summary(const std::string& key, const std::string& dt, const json& o, const json& p,
                                std::set<std::string>& formulas) {
  views::PathSummary e;
  e.key = key;
  e.dtype = dt;
  e.accumulation = required<std::string>(o, "accumulation");
  e.arithmetic = required<std::string>(o, "arithmetic");
  e.path = required<std::string>(p, "name");
  e.verdict = required_verdict(p, "verdict");
  e.elements = required<std::int64_t>(p, "elements");
  e.ulp = stats(member(p, "ulp"));
  e.ppm = stats(member(p, "ppm"));
  path_bounds(e, p, formulas);
  e.notes = row_notes(p);
  e.histograms = compact_histograms(member(p, "histograms"));
  return e;
}

// A dtype's paths (keyed by order and the variant's index among that order's runs) and its
// folded-parameter sets (keyed by recipe and index).
void dtype_records(views::Summary& s, const json& d, std::set<std::string>& formulas) {
  const std::string dt = required<std::string>(d, "dtype");
  std::map<std::string, int> variant_of_order;  // accumulation label -> runs seen
  for (const json& o : d.at("orders")) {
    const std::string acc = required<std::string>(o, "accumulation");
    const int k = variant_of_order[acc]++;
    for (const json& p : o.at("paths"))
      s.paths.push_back(path_summary(dt + "/" + acc + "#" + std::to_string(k) + "/" + required<std::string>(p, "name"),
                                     dt, o, p, formulas));
  }
  std::map<std::string, int> variant_of_recipe;
  for (const json& f : d.at("folded_parameters")) {
    const std::string rc = required<std::string>(f, "recipe");
    const int k = variant_of_recipe[rc]++;
    s.folded.push_back({dt + "#" + std::to_string(k) + "/" + rc, dt, rc, required<std::string>(f, "arithmetic"),
                        required<std::string>(f, "weight_dtype"), comparison(member(f, "weights")),
                        comparison(member(f, "bias"))});
  }
}

views::Summary summarize_run(const json& r) {
  views::Summary s;
  const json& c = r.at("case");
  s.command = "run";
  s.name = required<std::string>(c, "name");
  s.description = optional<std::string>(c, "description").value_or("");
  s.seed = r.at("seed");
  s.verdict = required_verdict(r, "verdict");
  std::set<std::string> formulas;
  for (const json& d : r.at("dtypes")) dtype_records(s, d, formulas);
  if (r.contains("observed_weights"))
    s.observed_weights_verdict = required_verdict(r.at("observed_weights"), "verdict");
  s.answer = run_answer(r);
  if (!s.description.empty()) s.explanation.push_back(s.description);
  for (const std::string& f : formulas) s.explanation.push_back("bound: " + f);
  return s;
}

// A layer's fused or unfused outputs on its real input.
views::ActivationSummary activation(const json& a) {
  return {required_verdict(a, "verdict"), optional<double>(a, "p99_9_abs_ulp"), optional<double>(a, "max_abs_ulp"),
          optional<double>(a, "worst_ratio"),
          // Attributed paths only (accuracy-diff attributes the fused path, which it reports).
          optional<std::string>(a, "dominant_stage")};
}

views::LayerSummary layer_summary(const json& l) {
  views::LayerSummary e;
  e.key = e.name = required<std::string>(l, "name");
  e.op = required<std::string>(l, "op");
  e.verdict = required_verdict(l, "verdict");
  if (l.contains("fold")) {
    const json& fold = l.at("fold");
    const json& shown = fold.at("recipes").at(views::AdiffFold::from_json(fold).shown_index());
    e.fold = views::LayerFold{required<std::string>(shown, "recipe"), optional<double>(shown, "worst_ratio"),
                              comparison(member(shown, "weights")), comparison(member(shown, "bias")),
                              optional<std::int64_t>(l, "worst_channel")};
  }
  if (const json& a = member(l, "activations"); a.contains("fused")) {
    e.fused = activation(a.at("fused"));
    e.unfused = activation(a.at("unfused"));
  }
  return e;
}

views::EndToEndSummary end_to_end(const json& r, const json& e) {
  views::EndToEndSummary ee;
  ee.verdict = optional_verdict(e, "verdict");
  ee.not_run = optional<std::string>(e, "not_run");
  // Which weights the end-to-end runs used: always foldcheck's own fold of the original
  // model (with an observed model, not its weights: those are judged per layer).
  ee.observed_model = r.contains("observed");
  if (const auto recipe = optional<std::string>(e, "fused_recipe"))
    ee.fused_weights = "foldcheck's own " + *recipe + " fold of the original model" +
                       (r.contains("observed") ? ", not the observed model's weights, which are judged per layer" : "");
  if (e.contains("outputs"))
    ee.outputs = views::list_of(e, "outputs", [](const json& o) {
      return views::EndToEndOutput{required<std::string>(o, "name"), comparison(o.at("unfused")),
                                   comparison(o.at("fused")), compact_histograms(member(o.at("fused"), "histograms"))};
    });
  if (const json& o = member(e, "observed_output"); e.contains("observed_output")) {
    const json& c = o.at("comparison");
    ee.observed_output = views::ObservedOutput{required_verdict(o, "verdict"),
                                               optional<double>(member(c, "bound_check"),
                                                                "worst_ratio"),  // none when nothing finite compared
                                               stats(c.at("ulp"))};
  }
  return ee;
}

views::Summary summarize_accuracy_diff(const json& r) {
  views::Summary s;
  s.command = "accuracy-diff";
  s.name = required<std::string>(r.at("model"), "path");
  s.verdict = required_verdict(r, "verdict");
  s.layers = views::list_of(r, "layers", layer_summary);
  if (r.contains("end_to_end")) s.end_to_end = end_to_end(r, r.at("end_to_end"));
  s.reasoning =
      views::list_of(r, "reasoning", [](const json& x) { return x.get<std::string>(); });  // why nothing was compared
  s.explanation = *s.reasoning;                                                            // the answer first
  s.explanation.emplace_back(
      "Per layer: each engine recipe's folded weights and biases against the exact fold (ratio = worst distance / "
      "the recipe's bound), and the layer on its real input, fused and unfused, against the certified reference.");
  if (r.contains("observed"))
    s.explanation.push_back("Folded parameters from " + required<std::string>(r.at("observed"), "path") + ".");
  s.answer = model_answer(s);
  return s;
}

}  // namespace

views::Summary summary_of(const json& result) {
  const std::string cmd = result.is_object() ? optional<std::string>(result, "command").value_or("") : "";
  if (cmd == "run") return summarize_run(result);
  if (cmd == "accuracy-diff") return summarize_accuracy_diff(result);
  throw std::invalid_argument("summarize: a run or accuracy-diff result expected, got command '" + cmd + "'");
}

json summarize(const json& result) { return summary_of(result).to_json(); }

namespace {

// The headline's running maxima: the worst bound ratio and where, the largest p99.9 |ULP| and
// whether it is a cancelled result's (above its EXPECTED path's bound in ULP at the element
// nearest the bound, though within: row_notes.hpp).
struct Maxima {
  Headline h;
  void ratio(const std::optional<double>& v, const std::string& where) {
    if (v && (!h.worst_ratio || *v > *h.worst_ratio)) {
      h.worst_ratio = v;
      h.worst_where = where;
    }
  }
  void ulp(const std::optional<double>& v, const std::optional<double>& bound_ulp = std::nullopt) {
    if (!v || (h.max_p99_9_ulp && *v <= *h.max_p99_9_ulp) || *v < 0) return;
    h.max_p99_9_ulp = v;
    h.max_p99_9_ulp_cancelled = bound_ulp && *v > *bound_ulp;
  }
};

std::optional<double> p99_9(const std::optional<views::Stats>& s) { return s ? s->p99_9 : std::nullopt; }

void add_run(Maxima& m, const views::Summary& s) {
  for (const views::PathSummary& p : s.paths) {
    m.ratio(p.bound_ratio, p.key);
    const bool expected = p.verdict == Verdict::Expected;
    m.ulp(p99_9(p.ulp), expected ? p.bound_ulp_at_worst : std::nullopt);
    if (!expected) m.h.not_expected.push_back(p.key);
  }
  for (const views::FoldedSummary& f : s.folded) {
    bool unexpected = false;
    for (const auto& [part, c] : {std::pair{"weights", &f.weights}, std::pair{"bias", &f.bias}}) {
      if (!*c) continue;
      m.ratio((*c)->bound_ratio, "folded " + f.key + " " + part);
      unexpected = unexpected || (*c)->verdict == Verdict::Unexpected;
    }
    if (unexpected) m.h.not_expected.push_back("folded " + f.key);
  }
}

void add_model(Maxima& m, const views::Summary& s) {
  for (const views::LayerSummary& l : s.layers) {
    if (l.fold) m.ratio(l.fold->fold_ratio, "layer " + l.key + " fold");
    for (const auto& [p, a] : {std::pair{"fused", &l.fused}, std::pair{"unfused", &l.unfused}})
      if (*a) {
        m.ratio((*a)->bound_ratio, "layer " + l.key + " " + p);
        m.ulp((*a)->p99_9_abs_ulp);
      }
    if (l.verdict != Verdict::Expected) m.h.not_expected.push_back(l.key);
  }
  if (s.end_to_end && s.end_to_end->observed_output) {
    const views::ObservedOutput& o = *s.end_to_end->observed_output;  // the engine's own output, end-to-end bound
    m.ratio(o.bound_ratio, "observed output");
    if (o.verdict != Verdict::Expected) m.h.not_expected.emplace_back("observed output");
  }
}

}  // namespace

Headline headline(const views::Summary& s) {
  Maxima m;
  add_run(m, s);
  add_model(m, s);
  return m.h;
}

json headline(const json& s) {
  const Headline h = headline(views::Summary::from_json(s));
  return {{"worst_ratio", h.worst_ratio ? json(*h.worst_ratio) : json(nullptr)},
          {"worst_where", h.worst_where},
          {"max_p99_9_ulp", h.max_p99_9_ulp ? json(*h.max_p99_9_ulp) : json(nullptr)},
          {"max_p99_9_ulp_cancelled", h.max_p99_9_ulp_cancelled},
          {"not_expected", h.not_expected}};
}

}  // namespace foldcheck::reports
