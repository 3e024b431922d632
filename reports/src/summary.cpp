// Command results condensed for reports and baselines (summary.hpp).
#include "foldcheck/reports/summary.hpp"

#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"

#include "foldcheck/result/views/report.hpp"
#include "foldcheck/result/views/run.hpp"

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

// A ratio as the summary writes it: none when the result had none, or wrote null (an infinite
// ratio, which the run's view restores as +inf).
std::optional<double> finite(const std::optional<double>& r) { return r && !std::isinf(*r) ? r : std::nullopt; }

// A histogram (histogram.hpp's JSON, which lists only non-empty buckets) in a compact
// form: the first listed bin's upper edge (each next bin doubles it; empty bins in between
// are zeros), the negative and positive counts per bin, exact zeros, and the counts beyond
// the histogram's last edge ("overflow"). "from_zero": the first bin is the histogram's
// bottom one, (0, first_upper], rather than (first_upper / 2, first_upper].
views::CompactHistogram compact_histogram(const views::Histogram& h) {
  views::CompactHistogram c;
  std::map<int, std::pair<std::int64_t, std::int64_t>> bins;  // log2(upper) -> counts
  for (const views::HistogramBucket& b : h.buckets) {
    if (!b.upper) {
      c.overflow_negative = b.negative;
      c.overflow_positive = b.positive;
      continue;
    }
    const int e = static_cast<int>(std::lround(std::log2(*b.upper)));
    bins[e] = {b.negative, b.positive};
    if (bins.begin()->first == e) c.from_zero = b.range.rfind("(0,", 0) == 0;
  }
  if (!bins.empty()) {
    c.first_upper = std::ldexp(1.0, bins.begin()->first);
    for (int e = bins.begin()->first; e <= bins.rbegin()->first; ++e) {
      const auto it = bins.find(e);
      c.negative.push_back(it == bins.end() ? 0 : it->second.first);
      c.positive.push_back(it == bins.end() ? 0 : it->second.second);
    }
  }
  c.unit = h.unit;
  c.zero = h.zero;
  return c;
}

views::Histograms compact_histograms(const std::map<std::string, std::optional<views::Histogram>>& hs) {
  views::Histograms r;
  for (const auto& [k, v] : hs) r[k] = v ? std::optional(compact_histogram(*v)) : std::nullopt;
  return r;
}

// A run's folded weight or bias set: its essentials, checked against its bound_check.
views::SetSummary set_summary(const views::Comparison& c) {
  views::SetSummary s;
  s.verdict = c.verdict;
  s.ulp = c.ulp_stats;
  s.ppm = c.ppm_stats;
  if (const auto& bc = c.bound_check) {
    s.bound_ratio = finite(bc->worst_ratio);
    s.beyond_bound = bc->beyond_bound.value_or(0);
    s.checked = true;
    s.bound_ulp_at_worst = bc->bound_ulp_at_worst;
    s.bound_ulp_at_max_ulp = bc->bound_ulp_at_max_ulp;
  }
  s.notes = row_notes(c.facts);
  return s;
}

// An accuracy-diff's comparison (a shown recipe's weights or bias, an end-to-end output): the same.
views::SetSummary set_summary(const views::AdiffComparison& c) {
  views::SetSummary s;
  s.verdict = c.verdict;
  s.ulp = c.ulp;
  s.ppm = c.ppm;
  if (const auto& bc = c.bound_check) {
    s.bound_ratio = bc->worst_ratio;
    s.beyond_bound = bc->beyond_bound;
    s.checked = true;
    s.bound_ulp_at_worst = bc->bound_ulp_at_worst;
    s.bound_ulp_at_max_ulp = bc->bound_ulp_at_max_ulp;
  }
  s.notes = row_notes(c.facts);
  return s;
}

template <class C>
std::optional<views::SetSummary> set_summary(const std::optional<C>& c) {
  return c ? std::optional(set_summary(*c)) : std::nullopt;
}

// The bound facts of a run's path: its bound's ratio (and formula), its check, its
// probabilistic bound and attribution.
void path_bounds(views::PathSummary& e, const views::Path& p, std::set<std::string>& formulas) {
  const views::Comparison& c = p.scored;
  if (c.bound) {
    e.bounded = true;
    e.bound_ratio = finite(c.bound->worst_ratio);  // none when nothing was compared
    e.bound_ulp_at_worst = c.bound->bound_ulp_at_worst;
    if (c.bound->formula) formulas.insert(*c.bound->formula);
  }
  if (c.bound_check) {
    e.beyond_bound = c.bound_check->beyond_bound.value_or(0);
    e.checked = true;
    e.bound_ulp_at_max_ulp = c.bound_check->bound_ulp_at_max_ulp;
  }
  if (c.probabilistic_bound) {
    e.probabilistic = true;
    e.probabilistic_ratio = c.probabilistic_bound->worst_ratio;
  }
  if (p.attribution) {
    e.shares.emplace();
    for (const views::Attribution::Stage& st : p.attribution->stages) (*e.shares)[st.stage] = st.share_mean;
  }
}

// One output path of one accumulation order of one dtype: its key and every fact.
views::PathSummary path_summary(const std::string& key, const std::string& dt, const views::Order& o,
                                const views::Path& p, std::set<std::string>& formulas) {
  views::PathSummary e;
  e.key = key;
  e.dtype = dt;
  e.accumulation = o.accumulation;
  e.arithmetic = o.arithmetic.value_or("default");
  e.path = p.name;
  e.verdict = p.scored.verdict;
  e.elements = p.elements;
  e.ulp = p.scored.ulp_stats;
  e.ppm = p.scored.ppm_stats;
  path_bounds(e, p, formulas);
  e.notes = row_notes(p.scored.facts);
  e.histograms.emplace("ulp", compact_histogram(p.ulp_histogram));
  if (p.ppm_histogram) e.histograms.emplace("ppm", compact_histogram(*p.ppm_histogram));
  if (p.bound_histogram) e.histograms.emplace("bound", compact_histogram(*p.bound_histogram));
  return e;
}

// A dtype's paths (keyed by order and the variant's index among that order's runs) and its
// folded-parameter sets (keyed by recipe and index).
void dtype_records(views::Summary& s, const views::DtypeResult& d, std::set<std::string>& formulas) {
  const std::string& dt = d.dtype;
  std::map<std::string, int> variant_of_order;  // accumulation label -> runs seen
  for (const views::Order& o : d.orders) {
    const int k = variant_of_order[o.accumulation]++;
    for (const views::Path& p : o.paths)
      s.paths.push_back(
          path_summary(dt + "/" + o.accumulation + "#" + std::to_string(k) + "/" + p.name, dt, o, p, formulas));
  }
  std::map<std::string, int> variant_of_recipe;
  for (const views::FoldedParameters& f : d.folded_parameters) {
    const int k = variant_of_recipe[f.recipe]++;
    s.folded.push_back({dt + "#" + std::to_string(k) + "/" + f.recipe, dt, f.recipe, f.arithmetic.value_or("default"),
                        f.weight_dtype, set_summary(f.weights), set_summary(f.bias)});
  }
}

// A layer's fused or unfused outputs on its real input.
views::ActivationSummary activation(const views::AdiffActivation& a) {
  return {a.verdict, a.p99_9_abs_ulp, a.max_abs_ulp, a.worst_ratio,
          // Attributed paths only (accuracy-diff attributes the fused path, which it reports).
          a.dominant_stage};
}

views::LayerSummary layer_summary(const views::AdiffLayer& l) {
  views::LayerSummary e;
  e.key = e.name = l.name;
  e.op = l.op;
  e.verdict = l.verdict;
  e.note = l.observed_note;
  if (l.fold && !l.fold->recipes.empty()) {
    const views::AdiffRecipe& shown = l.fold->shown();
    e.fold = views::LayerFold{shown.recipe, shown.worst_ratio, set_summary(shown.weights), set_summary(shown.bias),
                              l.worst_channel};
  }
  if (l.fused && l.unfused) {
    e.fused = activation(*l.fused);
    e.unfused = activation(*l.unfused);
  }
  return e;
}

views::EndToEndSummary end_to_end(const views::AccuracyDiff& r, const views::AdiffEndToEnd& e) {
  views::EndToEndSummary ee;
  ee.not_run = e.not_run;
  if (!e.not_run) ee.verdict = e.verdict;
  // Which weights the end-to-end runs used: always foldcheck's own fold of the original
  // model (with an observed model, not its weights: those are judged per layer).
  ee.observed_model = r.observed.has_value();
  if (e.fused_recipe)
    ee.fused_weights = "foldcheck's own " + *e.fused_recipe + " fold of the original model" +
                       (r.observed ? ", not the observed model's weights, which are judged per layer" : "");
  if (!e.not_run) {
    ee.outputs.emplace();
    for (const views::AdiffOutput& o : e.outputs)
      ee.outputs->push_back(
          {o.name, set_summary(o.unfused), set_summary(o.fused), compact_histograms(o.fused.histograms)});
  }
  if (const auto& o = e.observed_output) {  // none when nothing finite compared
    ee.observed_output =
        views::ObservedOutput{o->verdict, o->bound_check ? o->bound_check->worst_ratio : std::nullopt, o->ulp_stats};
    if (o->band && !o->band->not_computed && o->band->worst)
      ee.observed_output->band =
          views::BandSummary{o->band->beyond_count, o->band->worst->layer,      o->band->worst->direction,
                             o->band->worst->ratio, o->band->worst->change_ppm, o->band->floor_median_ppm};
  }
  return ee;
}

}  // namespace

views::Summary summary_of(const views::Run& r) {
  views::Summary s;
  s.command = "run";
  s.name = r.case_name;
  s.description = r.case_description;
  s.seed = r.seed;
  s.verdict = r.verdict;
  std::set<std::string> formulas;
  for (const views::DtypeResult& d : r.dtypes) dtype_records(s, d, formulas);
  if (r.observed_weights) s.observed_weights_verdict = r.observed_weights->verdict;
  s.answer = run_answer(r);
  if (!s.description.empty()) s.explanation.push_back(s.description);
  for (const std::string& f : formulas) s.explanation.push_back("bound: " + f);
  return s;
}

views::Summary summary_of(const views::AccuracyDiff& r) {
  views::Summary s;
  s.command = "accuracy-diff";
  s.name = r.model_path;
  s.verdict = r.verdict;
  for (const views::AdiffLayer& l : r.layers) s.layers.push_back(layer_summary(l));
  if (r.end_to_end) s.end_to_end = end_to_end(r, *r.end_to_end);
  s.reasoning = r.reasoning;    // why nothing was compared
  s.explanation = r.reasoning;  // the answer first
  s.explanation.emplace_back(
      "Per layer: each engine recipe's folded weights and biases against the exact fold (ratio = worst distance / "
      "the recipe's bound), and the layer on its real input, fused and unfused, against the certified reference.");
  if (r.observed) s.explanation.push_back("Folded parameters from " + r.observed->path + ".");
  s.answer = model_answer(s);
  return s;
}

views::Summary summary_of(const json& result) {
  const std::string cmd = views::ResultEnvelope::from_json(result).command;
  if (cmd == "run") return summary_of(views::Run::from_json(result));
  if (cmd == "accuracy-diff") return summary_of(views::AccuracyDiff::from_json(result));
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
