// Command results condensed for reports and baselines (summary.hpp).
#include "foldcheck/reports/summary.hpp"

#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "shown_recipe.hpp"

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

json get_or_null(const json& j, const char* key) { return j.contains(key) ? j[key] : json(nullptr); }

// Percentiles of a Distribution (compare.hpp's JSON), as absolute values where signed.
json stats(const json& d) {
  if (!d.is_object()) return nullptr;
  return {{"p50", get_or_null(d, "p50")}, {"p99", get_or_null(d, "p99")}, {"p99_9", get_or_null(d, "p99_9")},
          {"max_abs", get_or_null(d, "max_abs")}, {"rms", get_or_null(d, "rms")}, {"count", get_or_null(d, "count")}};
}

// A histogram (histogram.hpp's JSON, which lists only non-empty buckets) in a compact
// form: the first listed bin's upper edge (each next bin doubles it; empty bins in between
// are zeros), the negative and positive counts per bin, exact zeros, and the counts beyond
// the histogram's last edge ("overflow"). "from_zero": the first bin is the histogram's
// bottom one, (0, first_upper], rather than (first_upper / 2, first_upper].
json compact_histogram(const json& h) {
  if (!h.is_object()) return nullptr;
  json over{{"negative", 0}, {"positive", 0}};
  std::map<int, std::pair<std::int64_t, std::int64_t>> bins;  // log2(upper) -> counts
  bool from_zero = false;
  for (const json& b : h.value("buckets", json::array())) {
    if (!b["upper"].is_number()) {
      over = {{"negative", b["negative"]}, {"positive", b["positive"]}};
      continue;
    }
    const int e = static_cast<int>(std::lround(std::log2(b["upper"].get<double>())));
    bins[e] = {b["negative"].get<std::int64_t>(), b["positive"].get<std::int64_t>()};
    if (bins.begin()->first == e) from_zero = b.value("range", std::string()).rfind("(0,", 0) == 0;
  }
  json neg = json::array(), pos = json::array(), first = nullptr;
  if (!bins.empty()) {
    first = std::ldexp(1.0, bins.begin()->first);
    for (int e = bins.begin()->first; e <= bins.rbegin()->first; ++e) {
      const auto it = bins.find(e);
      neg.push_back(it == bins.end() ? 0 : it->second.first);
      pos.push_back(it == bins.end() ? 0 : it->second.second);
    }
  }
  return {{"unit", h.value("unit", "")}, {"zero", h.value("zero", 0)}, {"first_upper", first}, {"from_zero", from_zero},
          {"negative", neg}, {"positive", pos}, {"overflow", over}};
}

json compact_histograms(const json& hs) {
  json r = json::object();
  if (hs.is_object())
    for (const auto& [k, v] : hs.items()) r[k] = compact_histogram(v);
  return r;
}

// A Comparison's essentials (weights, biases, outputs).
json comparison(const json& c) {
  if (!c.is_object()) return nullptr;  // e.g. TVM's bias with a conv bias: a separate shift, no folded bias
  json s{{"verdict", c.value("verdict", "")}, {"ulp", stats(get_or_null(c, "ulp"))}, {"ppm", stats(get_or_null(c, "ppm"))}};
  s["bound_ratio"] = c.contains("bound_check") ? c["bound_check"]["worst_ratio"] : json(nullptr);
  s["beyond_bound"] = c.contains("bound_check") ? c["bound_check"]["beyond_bound"] : json(0);
  for (const char* k : {"bound_ulp_at_worst", "bound_ulp_at_max_ulp"})
    if (c.contains("bound_check")) s[k] = get_or_null(c["bound_check"], k);
  s["notes"] = row_notes(c);
  return s;
}

json summarize_run(const json& r) {
  json s{{"command", "run"},
         {"name", r["case"]["name"]},
         {"description", r["case"].value("description", "")},
         {"seed", r["seed"]},
         {"verdict", r["verdict"]}};
  json paths = json::array(), folded = json::array();
  std::set<std::string> formulas;
  for (const json& d : r["dtypes"]) {
    const std::string dt = d["dtype"];
    std::map<std::string, int> variant_of_order;  // accumulation label -> runs seen
    for (const json& o : d["orders"]) {
      const std::string acc = o["accumulation"];
      const int k = variant_of_order[acc]++;
      for (const json& p : o["paths"]) {
        const std::string name = p["name"];
        json e{{"key", dt + "/" + acc + "#" + std::to_string(k) + "/" + name},
               {"dtype", dt},
               {"accumulation", acc},
               {"arithmetic", o["arithmetic"]},
               {"path", name},
               {"verdict", p["verdict"]},
               {"elements", p["elements"]},
               {"ulp", stats(p["ulp"])},
               {"ppm", stats(p["ppm"])}};
        if (p.contains("bound")) {
          e["bound_ratio"] = p["bound"].value("worst_ratio", json());  // none when nothing was compared
          e["bound_ulp_at_worst"] = p["bound"].value("bound_ulp_at_worst", json());
          formulas.insert(p["bound"]["formula"].get<std::string>());
        }
        e["beyond_bound"] = p.contains("bound_check") ? p["bound_check"]["beyond_bound"] : json(0);
        if (p.contains("bound_check")) e["bound_ulp_at_max_ulp"] = get_or_null(p["bound_check"], "bound_ulp_at_max_ulp");
        e["notes"] = row_notes(p);
        if (p.contains("probabilistic_bound")) e["probabilistic_ratio"] = p["probabilistic_bound"]["worst_ratio"];
        if (p.contains("attribution") && p["attribution"].contains("stages")) {
          json shares = json::object();
          for (const json& st : p["attribution"]["stages"]) shares[st["stage"].get<std::string>()] = st["share_mean"];
          e["shares"] = shares;
        }
        e["histograms"] = compact_histograms(p["histograms"]);
        paths.push_back(std::move(e));
      }
    }
    std::map<std::string, int> variant_of_recipe;
    for (const json& f : d["folded_parameters"]) {
      const std::string rc = f["recipe"];
      const int k = variant_of_recipe[rc]++;
      folded.push_back({{"key", dt + "#" + std::to_string(k) + "/" + rc},
                        {"dtype", dt},
                        {"recipe", rc},
                        {"arithmetic", f["arithmetic"]},
                        {"weight_dtype", f["weight_dtype"]},
                        {"weights", comparison(f["weights"])},
                        {"bias", comparison(f["bias"])}});
    }
  }
  s["paths"] = paths;
  s["folded"] = folded;
  if (r.contains("observed_weights")) s["observed_weights_verdict"] = r["observed_weights"]["verdict"];
  s["answer"] = run_answer(r);
  json ex = json::array();
  if (!s["description"].get<std::string>().empty()) ex.push_back(s["description"]);
  for (const std::string& f : formulas) ex.push_back("bound: " + f);
  s["explanation"] = ex;
  return s;
}

json summarize_accuracy_diff(const json& r) {
  json s{{"command", "accuracy-diff"},
         {"name", r["model"]["path"]},
         {"description", ""},
         {"verdict", r["verdict"]}};
  json layers = json::array();
  for (const json& l : r["layers"]) {
    json e{{"key", l["name"]}, {"name", l["name"]}, {"op", l["op"]}, {"verdict", l["verdict"]}};
    if (l.contains("fold")) {
      const json& f = l["fold"];
      const json* shown = &shown_recipe(f);
      e["recipe"] = (*shown)["recipe"];
      e["fold_ratio"] = (*shown)["worst_ratio"];
      e["weights"] = comparison((*shown)["weights"]);
      e["bias"] = comparison((*shown)["bias"]);
      e["worst_channel"] = get_or_null(l, "worst_channel");
    }
    if (l.contains("activations") && l["activations"].contains("fused")) {
      const json& a = l["activations"];
      for (const char* p : {"fused", "unfused"}) {
        e[p] = {{"verdict", a[p]["verdict"]},
                {"p99_9_abs_ulp", a[p]["p99_9_abs_ulp"]},
                {"max_abs_ulp", a[p]["max_abs_ulp"]},
                {"bound_ratio", a[p]["worst_ratio"]}};
        // Attributed paths only (accuracy-diff attributes the fused path, which it reports).
        if (a[p].contains("dominant_stage")) e[p]["dominant_stage"] = a[p]["dominant_stage"];
      }
    }
    layers.push_back(std::move(e));
  }
  s["layers"] = layers;
  if (r.contains("end_to_end")) {
    const json& e = r["end_to_end"];
    json ee{{"verdict", get_or_null(e, "verdict")}, {"not_run", get_or_null(e, "not_run")}};
    // Which weights the end-to-end runs used: always foldcheck's own fold of the original
    // model (with an observed model, not its weights: those are judged per layer).
    ee["observed_model"] = r.contains("observed");
    if (e.contains("fused_recipe"))
      ee["fused_weights"] = "foldcheck's own " + e["fused_recipe"].get<std::string>() + " fold of the original model" +
                            (r.contains("observed") ? ", not the observed model's weights, which are judged per layer" : "");
    if (e.contains("outputs")) {
      json outs = json::array();
      for (const json& o : e["outputs"])
        outs.push_back({{"name", o["name"]}, {"unfused", comparison(o["unfused"])}, {"fused", comparison(o["fused"])},
                        {"histograms", compact_histograms(o["fused"]["histograms"])}});
      ee["outputs"] = outs;
    }
    if (e.contains("observed_output"))
      ee["observed_output"] = {{"verdict", e["observed_output"]["verdict"]},
                               {"bound_ratio", e["observed_output"]["comparison"].value("bound_check", json::object())
                                                   .value("worst_ratio", json())},  // none when nothing finite compared
                               {"ulp", stats(e["observed_output"]["comparison"]["ulp"])}};
    s["end_to_end"] = ee;
  }
  s["reasoning"] = r.value("reasoning", json::array());  // why nothing was compared, when nothing was
  json ex = json::array();
  for (const json& line : s["reasoning"]) ex.push_back(line);  // the answer first
  ex.push_back("Per layer: each engine recipe's folded weights and biases against the exact fold (ratio = worst distance / "
               "the recipe's bound), and the layer on its real input, fused and unfused, against the certified reference.");
  if (r.contains("observed")) ex.push_back("Folded parameters from " + r["observed"]["path"].get<std::string>() + ".");
  s["explanation"] = ex;
  s["answer"] = model_answer(s);
  return s;
}

}  // namespace

views::Summary summary_of(const json& result) { return views::Summary::from_json(summarize(result)); }

json summarize(const json& result) {
  const std::string cmd = result.value("command", "");
  if (cmd == "run") return summarize_run(result);
  if (cmd == "accuracy-diff") return summarize_accuracy_diff(result);
  throw std::invalid_argument("summarize: a run or accuracy-diff result expected, got command '" + cmd + "'");
}

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
