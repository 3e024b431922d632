// The answer of a `run` result (run_answer.hpp).
#include "foldcheck/reports/run_answer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

// One compared set (an output path, or a folded-parameter set) and where it is closest to,
// or farthest beyond, its bound.
struct Scored {
  std::string what, verdict;
  double ratio = -1, bound_ulp = 0;
  long index = -1;
};

Scored scored(std::string what, const json& c, const json& bound) {
  Scored s{std::move(what), c.value("verdict", ""), -1, 0, c.value("worst_index", -1L)};
  if (bound.is_object() && bound["worst_ratio"].is_number()) {
    s.ratio = bound["worst_ratio"].get<double>();
    s.bound_ulp = bound.value("bound_ulp_at_worst", 0.0);
  } else if (bound.is_object() && bound["worst_ratio"].is_null()) {
    s.ratio = HUGE_VAL;  // an unbounded ratio (JSON null): beyond every bound
  }
  return s;
}

// Every scored set of the result, outputs and folded parameters, in the result's order.
std::vector<Scored> scored_sets(const json& r) {
  std::vector<Scored> v;
  for (const json& d : r["dtypes"]) {
    const std::string dt = d["dtype"];
    for (const json& f : d["folded_parameters"])
      for (const char* part : {"weights", "bias"})
        if (f[part].is_object())
          v.push_back(scored(fmt::format("{} {} folded {}", dt, f["recipe"].get<std::string>(), part), f[part],
                             f[part].value("bound_check", json())));
    for (const json& o : d["orders"])
      for (const json& p : o["paths"])
        v.push_back(scored(fmt::format("{} {} {}", dt, o["accumulation"].get<std::string>(), p["name"].get<std::string>()), p,
                           p.value("bound", json())));
  }
  return v;
}

std::string ratio_text(double r) { return std::isinf(r) ? std::string("unbounded") : fmt::format("{:.3g}", r); }

// The reason of the verdict, in one sentence; and one for MISTRUSTED rows that do not count.
json reasoning(const json& r, const std::vector<Scored>& sets) {
  json out = json::array();
  const Scored* worst = nullptr;
  const Scored* first_bad = nullptr;
  std::size_t mistrusted = 0;
  for (const Scored& s : sets) {
    if (s.verdict == "MISTRUSTED") {
      ++mistrusted;
      continue;
    }
    if (!first_bad && (s.verdict == "UNEXPECTED" || s.verdict == "SUSPICIOUS")) first_bad = &s;
    if (s.ratio >= 0 && (!worst || s.ratio > worst->ratio)) worst = &s;
  }
  if (first_bad)
    out.push_back(fmt::format("{} is {}: its worst element ({}) is {} times its rounding-error bound of {:.3g} ULP.",
                              first_bad->what, first_bad->verdict, first_bad->index, ratio_text(first_bad->ratio),
                              first_bad->bound_ulp));
  else if (worst)
    out.push_back(fmt::format("Every path and folded parameter set is within its rounding-error bound; the closest is {} "
                              "(element {}: {} of its bound of {:.3g} ULP).",
                              worst->what, worst->index, ratio_text(worst->ratio), worst->bound_ulp));
  if (mistrusted)
    out.push_back(fmt::format("{} folded-bias set(s) are MISTRUSTED and do not count: every exact folded bias is zero "
                              "(no conv bias, beta = 0, mean = 0), so any scale would match.",
                              mistrusted));
  if (r.contains("observed_weights") && r["observed_weights"]["verdict"] != "EXPECTED")
    out.push_back("The observed weights are " + r["observed_weights"]["verdict"].get<std::string>() + " (below).");
  return out;
}

}  // namespace

json run_answer(const json& r) {
  const std::vector<Scored> sets = scored_sets(r);
  json a{{"verdict", r["verdict"]}, {"reasoning", reasoning(r, sets)}, {"observed_weights", nullptr}};
  if (r.contains("observed_weights")) {
    const json& ow = r["observed_weights"];
    a["observed_weights"] = {{"verdict", ow["verdict"]},
                             {"bit_exact", ow.value("bit_exact_recipes", json::array())},
                             {"reasoning", ow.value("reasoning", json::array())},
                             {"note", ow.value("note", "")}};
  }
  json tol = json::array();
  for (const json& d : r["dtypes"])
    for (const json& o : d["orders"]) {  // the first order of each dtype: unfused and the first fused path
      for (std::size_t i = 0; i < std::min<std::size_t>(2, o["paths"].size()); ++i)
        if (const json& p = o["paths"][i]; p.contains("tolerance"))
          tol.push_back({{"path", p["name"]}, {"dtype", d["dtype"]}, {"accumulation", o["accumulation"]},
                         {"rtol", p["tolerance"]["rtol"]}, {"atol", p["tolerance"]["atol"]},
                         {"atol_alone", p["tolerance"]["atol_alone"]}});
      break;
    }
  a["tolerances"] = tol;
  return a;
}

AnswerLines answer_lines(const json& a) {
  AnswerLines l;
  const json& why = a["reasoning"];
  l.headline = a["verdict"].get<std::string>() + (why.empty() ? std::string() : ": " + why[0].get<std::string>());
  for (std::size_t i = 1; i < why.size(); ++i) l.more.push_back(why[i]);
  if (a["observed_weights"].is_object()) {
    const json& ow = a["observed_weights"];
    std::string exact;
    for (const json& r : ow["bit_exact"]) exact += (exact.empty() ? "" : ", ") + r.get<std::string>();
    l.observed = fmt::format("Observed weights{}: {}; reproduced bit for bit by {}.",
                             ow["note"].get<std::string>().empty() ? "" : " (" + ow["note"].get<std::string>() + ")",
                             ow["verdict"].get<std::string>(), exact.empty() ? "no recipe" : exact);
    if (!ow["reasoning"].empty()) l.observed += " " + ow["reasoning"][0].get<std::string>();
  }
  std::string last;
  for (const json& t : a["tolerances"]) {
    const std::string v = fmt::format("rtol={:.3g}, atol={:.3g} (or atol={:.3g} alone)", t["rtol"].get<double>(),
                                      t["atol"].get<double>(), t["atol_alone"].get<double>());
    if (v == last) continue;  // the same tolerance as the path before: said once
    last = v;
    l.tolerances.push_back(fmt::format("{} {} {}: {}", t["dtype"].get<std::string>(), t["accumulation"].get<std::string>(),
                                       t["path"].get<std::string>(), v));
  }
  return l;
}

}  // namespace foldcheck::reports
