// The answer of a `run` result (run_answer.hpp).
#include "foldcheck/reports/run_answer.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foldcheck/result/judgement.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

using result::views::Comparison;
using result::views::Explain;
using result::views::Run;
using result::views::RunAnswer;

namespace {

// One compared set (an output path, or a folded weight or bias set) and its worst element
// relative to its bound (bound_check's, so the element and the ratio belong together).
struct Scored {
  std::string label, dtype;
  Verdict verdict = Verdict::Expected;
  bool output = false, bias = false;
  double ratio = -1, p_ratio = -1, bound_ulp = 0;  // -1: no ratio (nothing compared)
  long index = -1;
};

// The set's ratio to `bound` (+inf when it was infinite), to `pbound`, the bound in ULP at its
// worst element and that element's index.
Scored scored(std::string label, const Comparison& c, const std::optional<Comparison::Bound>& bound,
              const std::optional<Comparison::Bound>& pbound) {
  Scored s;
  s.label = std::move(label);
  s.verdict = c.verdict;
  s.ratio = bound ? bound->worst_ratio.value_or(-1) : -1;
  s.p_ratio = pbound ? pbound->worst_ratio.value_or(-1) : -1;
  const double check_ulp = c.bound_check ? c.bound_check->bound_ulp_at_worst.value_or(0) : 0;
  s.bound_ulp = bound ? bound->bound_ulp_at_worst.value_or(check_ulp) : check_ulp;
  const double top_index = c.worst_index.value_or(-1);
  s.index = static_cast<long>(c.bound_check ? c.bound_check->worst_index.value_or(top_index) : top_index);
  return s;
}

std::string variant(const std::optional<std::string>& arithmetic) {
  const std::string a = arithmetic.value_or("default");
  return a == "default" ? "" : " " + a;
}

// A dtype's folded weight and bias sets, each against its bound_check.
void folded_sets(const result::views::DtypeResult& d, std::vector<Scored>& v) {
  for (const auto& f : d.folded_parameters)
    for (const bool bias : {false, true}) {
      const Comparison* c = bias ? (f.bias ? &*f.bias : nullptr) : &f.weights;
      if (!c) continue;
      Scored s =
          scored(fmt::format("{} {}{} folded {}", d.dtype, f.recipe, variant(f.arithmetic), bias ? "bias" : "weights"),
                 *c, c->bound_check, std::nullopt);
      s.dtype = d.dtype;
      s.bias = bias;
      v.push_back(std::move(s));
    }
}

// Every scored set, labelled as the text tables label their rows.
std::vector<Scored> scored_sets(const Run& r) {
  std::vector<Scored> v;
  for (const auto& d : r.dtypes) {
    folded_sets(d, v);
    for (const auto& o : d.orders)
      for (const auto& p : o.paths) {
        Scored s = scored(fmt::format("{} {}{} {}", d.dtype, o.accumulation, variant(o.arithmetic), p.name), p.scored,
                          p.scored.bound, p.scored.probabilistic_bound);
        s.dtype = d.dtype;
        s.output = true;
        v.push_back(std::move(s));
      }
  }
  return v;
}

std::string ratio_text(double r) { return std::isinf(r) ? std::string("unbounded") : fmt::format("{:.3g}", r); }

// Why a set that is not EXPECTED is so, in one sentence.
std::string bad_sentence(const Scored& s) {
  if (s.verdict == Verdict::Mistrusted)
    return fmt::format("{} is MISTRUSTED: nothing was compared (every exact value is zero, rounds to zero or is not finite, "
                       "so any result would match).",
                       s.label);
  if (s.verdict == Verdict::Suspicious)
    return fmt::format("{} is SUSPICIOUS: element {} is within its deterministic bound but {} times its probabilistic "
                       "bound, improbable under random rounding.",
                       s.label, s.index, ratio_text(s.p_ratio));
  return fmt::format("{} is {}: element {} is {} times its rounding-error bound of {:.3g} ULP.", s.label,
                     name(s.verdict), s.index, ratio_text(s.ratio), s.bound_ulp);
}

// Whether set a is worse than set b: the worse verdict (judgement's order, the order in which
// run combined them into its own), then, between equal verdicts, the higher ratio to its bound.
bool worse(const Scored& a, const Scored& b) {
  if (a.verdict != b.verdict) return worst(a.verdict, b.verdict) == a.verdict;
  return a.ratio > b.ratio;
}

// The worst set that is not EXPECTED (a MISTRUSTED folded bias aside: run leaves those out):
// the one whose verdict is the run's.
const Scored* worst_bad(const std::vector<Scored>& sets) {
  const Scored* w = nullptr;
  for (const Scored& s : sets) {
    if (s.verdict == Verdict::Expected || (s.bias && s.verdict == Verdict::Mistrusted)) continue;
    if (!w || worse(s, *w)) w = &s;
  }
  return w;
}

// The worst set that is evidence against the computation (UNEXPECTED or SUSPICIOUS), or none.
const Scored* worst_evidence(const std::vector<Scored>& sets) {
  const Scored* w = nullptr;
  for (const Scored& s : sets)
    if (judgement::counts_against(s.verdict) && (!w || worse(s, *w))) w = &s;
  return w;
}

// The set that compared nothing (MISTRUSTED, a folded bias aside: run leaves those out), or none.
const Scored* worst_doubt(const std::vector<Scored>& sets) {
  for (const Scored& s : sets)
    if (s.verdict == Verdict::Mistrusted && !s.bias) return &s;
  return nullptr;
}

// The output path closest to its bound (folded sets are one rounding against a half-ULP
// bound: always near 1, so they say nothing).
const Scored* closest_output(const std::vector<Scored>& sets) {
  const Scored* c = nullptr;
  for (const Scored& s : sets)
    if (s.output && s.ratio >= 0 && !std::isinf(s.ratio) && (!c || s.ratio > c->ratio)) c = &s;
  return c;
}

// Every set within its bound: the sentence, with the output path closest to its bound.
std::string all_within(const std::vector<Scored>& sets, bool observed) {
  const Scored* c = closest_output(sets);
  std::string s = "Every output path and folded parameter set is within its rounding-error bound";
  if (c)
    s += fmt::format(" (closest output path: {}, element {} at {} of its bound of {:.3g} ULP)", c->label, c->index,
                     ratio_text(c->ratio), c->bound_ulp);
  return s + (observed ? "; the observed weights are a correct fold." : ".");
}

// The MISTRUSTED folded-bias sets run leaves out of its verdict, in one sentence ("" if none).
std::string mistrusted_biases(const std::vector<Scored>& sets) {
  std::set<std::string> dtypes;
  std::size_t mistrusted = 0;
  for (const Scored& s : sets)
    if (s.bias && s.verdict == Verdict::Mistrusted) {
      ++mistrusted;
      dtypes.insert(s.dtype);
    }
  if (!mistrusted) return "";
  return fmt::format(
      "{} folded-bias set(s) are MISTRUSTED and left out of the verdict: every exact folded bias "
      "is zero or rounds to zero in {}, so any scale would match.",
      mistrusted, fmt::join(dtypes, ", "));
}

std::vector<std::string> reasoning(const Run& r, const std::vector<Scored>& sets) {
  std::vector<std::string> out;
  const Explain* ow = r.observed_weights ? &*r.observed_weights : nullptr;
  if (ow && ow->verdict != Verdict::Expected)
    out.push_back(fmt::format("The observed weights are {}{}", name(ow->verdict),
                              ow->reasoning.empty() ? std::string(".") : ": " + ow->reasoning[0]));
  if (const Scored* bad = worst_bad(sets)) {
    out.push_back(bad_sentence(*bad));
    // The worst leads (judgement's order); the other kind is not left unsaid: evidence (a
    // SUSPICIOUS set) beside doubt that leads, doubt (a set that compared nothing) beside evidence.
    if (const Scored* evidence = worst_evidence(sets); bad->verdict == Verdict::Mistrusted && evidence)
      out.push_back(bad_sentence(*evidence));
    if (const Scored* doubt = worst_doubt(sets); bad->verdict != Verdict::Mistrusted && doubt)
      out.push_back(bad_sentence(*doubt));
  }
  if (out.empty()) out.push_back(all_within(sets, ow != nullptr));
  if (std::string m = mistrusted_biases(sets); !m.empty()) out.push_back(std::move(m));
  return out;
}

// The tolerances of each dtype's first order: its unfused and first fused path.
std::vector<RunAnswer::PathTolerance> tolerances(const Run& r) {
  std::vector<RunAnswer::PathTolerance> tol;
  for (const auto& d : r.dtypes) {
    if (d.orders.empty()) continue;
    const auto& o = d.orders.front();
    for (std::size_t i = 0; i < std::min<std::size_t>(2, o.paths.size()); ++i)
      if (const auto& p = o.paths[i]; p.tolerance) tol.push_back({p.name, d.dtype, o.accumulation, *p.tolerance});
  }
  return tol;
}

}  // namespace

RunAnswer run_answer(const Run& r) {
  RunAnswer a;
  a.verdict = r.verdict;
  a.reasoning = reasoning(r, scored_sets(r));
  if (r.observed_weights) {
    const Explain& ow = *r.observed_weights;
    a.observed_weights = RunAnswer::Observed{ow.verdict, ow.bit_exact_recipes, ow.reasoning, ow.note};
  }
  a.tolerances = tolerances(r);
  return a;
}

json run_answer(const json& r) { return run_answer(Run::from_json(r)).to_json(); }

namespace {

// "Observed weights (note): VERDICT; reproduced bit for bit by ...", with explain's first
// sentence when EXPECTED.
std::string observed_line(const RunAnswer::Observed& ow) {
  std::string exact;
  for (const std::string& r : ow.bit_exact) exact += (exact.empty() ? "" : ", ") + r;
  std::string s =
      fmt::format("Observed weights{}: {}; {}.", ow.note.empty() ? "" : " (" + ow.note + ")", name(ow.verdict),
                  exact.empty() ? "no recipe reproduces them bit for bit" : "reproduced bit for bit by " + exact);
  if (ow.verdict == Verdict::Expected && !ow.reasoning.empty()) s += " " + ow.reasoning[0];
  return s;
}

}  // namespace

AnswerLines answer_lines(const RunAnswer& a) {
  AnswerLines l;
  const std::vector<std::string>& why = a.reasoning;
  l.headline = name(a.verdict) + (why.empty() ? std::string() : ": " + why[0]);
  for (std::size_t i = 1; i < why.size(); ++i) l.more.push_back(why[i]);
  if (a.observed_weights) l.observed = observed_line(*a.observed_weights);
  std::set<std::string> seen;
  for (const auto& t : a.tolerances) {
    const std::string v = fmt::format("rtol={:.3g}, atol={:.3g} (or atol={:.3g} alone)", t.tolerance.rtol,
                                      t.tolerance.atol, t.tolerance.atol_alone);
    if (!seen.insert(t.dtype + v).second) continue;  // said once per dtype
    l.tolerances.push_back(fmt::format("{} {} {}: {}", t.dtype, t.accumulation, t.path, v));
  }
  return l;
}

AnswerLines answer_lines(const json& a) { return answer_lines(RunAnswer::from_json(a)); }

}  // namespace foldcheck::reports
