// The answer of a `run` result (run_answer.hpp).
#include "foldcheck/reports/run_answer.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

// One compared set (an output path, or a folded weight or bias set) and its worst element
// relative to its bound (bound_check's, so the element and the ratio belong together).
struct Scored {
  std::string label, verdict, dtype;
  bool output = false, bias = false;
  double ratio = -1, p_ratio = -1, bound_ulp = 0;  // -1: no ratio (nothing compared)
  long index = -1;
};

double number(const json& o, const char* k, double fallback) {
  return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : fallback;
}

Scored scored(std::string label, const json& c, const json& bound, const json& pbound) {
  Scored s;
  s.label = std::move(label);
  s.verdict = c.value("verdict", "");
  const json check = c.value("bound_check", json());
  s.ratio = number(bound, "worst_ratio", -1);
  if (bound.is_object() && bound.contains("worst_ratio") && bound["worst_ratio"].is_null()) s.ratio = HUGE_VAL;
  s.p_ratio = number(pbound, "worst_ratio", -1);
  s.bound_ulp = number(bound, "bound_ulp_at_worst", number(check, "bound_ulp_at_worst", 0));
  s.index = static_cast<long>(number(check, "worst_index", number(c, "worst_index", -1)));
  return s;
}

std::string variant(const json& arithmetic) {
  const std::string a = arithmetic.is_string() ? arithmetic.get<std::string>() : "default";
  return a == "default" ? "" : " " + a;
}

// Every scored set, labelled as the text tables label their rows.
std::vector<Scored> scored_sets(const json& r) {
  std::vector<Scored> v;
  for (const json& d : r["dtypes"]) {
    const std::string dt = d["dtype"];
    for (const json& f : d["folded_parameters"])
      for (const char* part : {"weights", "bias"}) {
        if (!f[part].is_object()) continue;
        const json& c = f[part];
        Scored s = scored(fmt::format("{} {}{} folded {}", dt, f["recipe"].get<std::string>(), variant(f.value("arithmetic", json())),
                                      part),
                          c, c.value("bound_check", json()), json());
        s.dtype = dt;
        s.bias = std::string(part) == "bias";
        v.push_back(std::move(s));
      }
    for (const json& o : d["orders"])
      for (const json& p : o["paths"]) {
        Scored s = scored(fmt::format("{} {}{} {}", dt, o["accumulation"].get<std::string>(), variant(o.value("arithmetic", json())),
                                      p["name"].get<std::string>()),
                          p, p.value("bound", json()), p.value("probabilistic_bound", json()));
        s.dtype = dt;
        s.output = true;
        v.push_back(std::move(s));
      }
  }
  return v;
}

std::string ratio_text(double r) { return std::isinf(r) ? std::string("unbounded") : fmt::format("{:.3g}", r); }

// Why a set that is not EXPECTED is so, in one sentence.
std::string bad_sentence(const Scored& s) {
  if (s.verdict == "MISTRUSTED")
    return fmt::format("{} is MISTRUSTED: nothing was compared (every exact value is zero, rounds to zero or is not finite, "
                       "so any result would match).",
                       s.label);
  if (s.verdict == "SUSPICIOUS")
    return fmt::format("{} is SUSPICIOUS: element {} is within its deterministic bound but {} times its probabilistic "
                       "bound, improbable under random rounding.",
                       s.label, s.index, ratio_text(s.p_ratio));
  return fmt::format("{} is {}: element {} is {} times its rounding-error bound of {:.3g} ULP.", s.label, s.verdict, s.index,
                     ratio_text(s.ratio), s.bound_ulp);
}

// The worst set that is not EXPECTED (a MISTRUSTED folded bias aside: run leaves those out).
const Scored* worst_bad(const std::vector<Scored>& sets) {
  const Scored* w = nullptr;
  for (const Scored& s : sets) {
    if (s.verdict == "EXPECTED" || s.verdict.empty() || (s.bias && s.verdict == "MISTRUSTED")) continue;
    if (!w || s.ratio > w->ratio) w = &s;
  }
  return w;
}

// The output path closest to its bound (folded sets are one rounding against a half-ULP
// bound: always near 1, so they say nothing).
const Scored* closest_output(const std::vector<Scored>& sets) {
  const Scored* c = nullptr;
  for (const Scored& s : sets)
    if (s.output && s.ratio >= 0 && !std::isinf(s.ratio) && (!c || s.ratio > c->ratio)) c = &s;
  return c;
}

json reasoning(const json& r, const std::vector<Scored>& sets) {
  json out = json::array();
  const json* ow = r.contains("observed_weights") ? &r["observed_weights"] : nullptr;
  const Scored* bad = worst_bad(sets);
  if (ow && (*ow)["verdict"] != "EXPECTED") {
    const json& why = (*ow).value("reasoning", json::array());
    out.push_back(fmt::format("The observed weights are {}{}", (*ow)["verdict"].get<std::string>(),
                              why.empty() ? std::string(".") : ": " + why[0].get<std::string>()));
  }
  if (bad) out.push_back(bad_sentence(*bad));
  if (out.empty()) {
    const Scored* c = closest_output(sets);
    std::string s = "Every output path and folded parameter set is within its rounding-error bound";
    if (c) s += fmt::format(" (closest output path: {}, element {} at {} of its bound of {:.3g} ULP)", c->label, c->index, ratio_text(c->ratio), c->bound_ulp);
    out.push_back(s + (ow ? "; the observed weights are a correct fold." : "."));
  }
  std::set<std::string> dtypes;
  std::size_t mistrusted = 0;
  for (const Scored& s : sets)
    if (s.bias && s.verdict == "MISTRUSTED") {
      ++mistrusted;
      dtypes.insert(s.dtype);
    }
  if (mistrusted)
    out.push_back(fmt::format("{} folded-bias set(s) are MISTRUSTED and left out of the verdict: every exact folded bias "
                              "is zero or rounds to zero in {}, so any scale would match.",
                              mistrusted, fmt::join(dtypes, ", ")));
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
  for (const json& d : r["dtypes"]) {
    if (d["orders"].empty()) continue;
    const json& o = d["orders"].front();  // each dtype's first order: unfused and the first fused path
    for (std::size_t i = 0; i < std::min<std::size_t>(2, o["paths"].size()); ++i)
      if (const json& p = o["paths"][i]; p.contains("tolerance"))
        tol.push_back({{"path", p["name"]}, {"dtype", d["dtype"]}, {"accumulation", o["accumulation"]},
                       {"rtol", p["tolerance"]["rtol"]}, {"atol", p["tolerance"]["atol"]},
                       {"atol_alone", p["tolerance"]["atol_alone"]}});
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
    l.observed = fmt::format("Observed weights{}: {}; {}.",
                             ow["note"].get<std::string>().empty() ? "" : " (" + ow["note"].get<std::string>() + ")",
                             ow["verdict"].get<std::string>(),
                             exact.empty() ? "no recipe reproduces them bit for bit" : "reproduced bit for bit by " + exact);
    if (ow["verdict"] == "EXPECTED" && !ow["reasoning"].empty()) l.observed += " " + ow["reasoning"][0].get<std::string>();
  }
  std::set<std::string> seen;
  for (const json& t : a["tolerances"]) {
    const std::string v = fmt::format("rtol={:.3g}, atol={:.3g} (or atol={:.3g} alone)", t["rtol"].get<double>(),
                                      t["atol"].get<double>(), t["atol_alone"].get<double>());
    if (!seen.insert(t["dtype"].get<std::string>() + v).second) continue;  // said once per dtype
    l.tolerances.push_back(fmt::format("{} {} {}: {}", t["dtype"].get<std::string>(), t["accumulation"].get<std::string>(),
                                       t["path"].get<std::string>(), v));
  }
  return l;
}

}  // namespace foldcheck::reports
