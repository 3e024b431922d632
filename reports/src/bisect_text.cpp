// Terminal rendering of `foldcheck bisect` results, from their typed view (views/bisect.hpp).
#include <optional>
#include <string>

#include <fmt/format.h>

#include "band_text.hpp"
#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/text.hpp"
#include "model_text_common.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace v = result::views;

namespace {

std::string num(const v::BisectNumber& x) { return x ? fmt::format("{:.4g}", *x) : std::string("-"); }

std::string passes_line(const std::vector<std::string>& passes) {
  std::string s;
  for (const std::string& p : passes) {
    if (!s.empty()) s += ',';
    s += p;
  }
  return s.empty() ? "(none)" : s;
}

// An element's facts in one line: where, its exact value against its channel's scale (and
// sum |x w| and its bound when known), so a large |ULP| from cancellation reads as such.
std::string element_line(const v::BisectElement& e) {
  std::string idx;
  for (const std::int64_t i : e.index) {
    if (!idx.empty()) idx += ',';
    idx += std::to_string(i);
  }
  std::string s = fmt::format("y[{}] = {} (exact {}), channel {} scale {}", idx, num(e.observed), num(e.exact),
                              e.channel, num(e.channel_scale));
  if (e.has_abs_sum) s += fmt::format(", sum|x*w| {}", num(e.abs_sum));
  if (e.has_ulp) s += fmt::format(": {} ULP, {} channel units", num(e.ulp), num(e.channel_units));
  if (e.has_ratio) s += fmt::format(", {} of its bound", num(e.ratio));
  return s;
}

// Why the decisive element of a run is the one shown (output_judge.hpp).
std::string decisive_label(const v::Bisect& r, const v::BisectElement& e) {
  if (!e.has_ulp) return "not finite";  // element(): no ULP error without a finite value
  const std::string& by = r.judged_by;
  return by == "bounds" ? "closest to its bound" : by == "threshold" ? "largest |ULP|" : "largest in channel units";
}

// An external step's label: the pass it disabled (leave-one-out) or the passes it enabled.
std::string external_label(const v::BisectStep& st, bool loo) {
  if (!loo) return passes_line(st.enabled);
  if (st.disabled) return *st.disabled;
  return st.enabled.empty() ? std::string("(all)") : std::string("(none)");
}

// The external bisect's runs: the drift and the criterion's numbers per run.
std::string external_table(const v::Bisect& r, bool loo) {
  const bool bounds = r.judged_by == "bounds";
  std::string s = bounds
                      ? fmt::format("  {:>4} {:>11} {:>10} {:>9} {:>9} {:<11} {:<4} {}\n", "run", "max |ULP|", "p99.9",
                                    "ratio", "p. ratio", "verdict", "bad", loo ? "disabled" : "enabled passes")
                      : fmt::format("  {:>4} {:>11} {:>10} {:>11} {:>11} {:<4} {}\n", "run", "max |ULP|", "p99.9",
                                    "max ch.u.", "p99.9 ch.u.", "bad", loo ? "disabled" : "enabled passes");
  std::size_t i = 0;
  for (const v::BisectStep& st : r.steps) {
    const std::string label = external_label(st, loo);
    const char* bad = st.bad ? "yes" : "no";
    if (bounds)
      s += fmt::format("  {:>4} {:>11} {:>10} {:>9} {:>9} {:<11} {:<4} {}\n", ++i, num(st.max_abs_ulp),
                       num(st.p99_9_abs_ulp), num(st.worst_ratio), num(st.probabilistic_worst_ratio),
                       name(st.verdict.value()), bad, label);
    else
      s += fmt::format("  {:>4} {:>11} {:>10} {:>11} {:>11} {:<4} {}\n", ++i, num(st.max_abs_ulp),
                       num(st.p99_9_abs_ulp), num(st.channel_units_max), num(st.channel_units_p99_9), bad, label);
  }
  return s;
}

// The external bisect's runs: the table, per run the element of the largest |ULP| and the one
// that decides, and the commands.
std::string external_steps(const v::Bisect& r, bool loo) {
  std::string s = external_table(r, loo);
  s += "\n  largest |ULP| of each run (cancellation: exact value far below its channel's scale):\n";
  std::size_t i = 0;
  std::optional<std::string> said;  // the last reason given for no band (said once, not per run)
  for (const v::BisectStep& st : r.steps) {
    ++i;
    if (st.largest_ulp) s += fmt::format("  {:>4} {}\n", i, element_line(*st.largest_ulp));
    if (st.decisive && (!st.largest_ulp || st.decisive->flat_index != st.largest_ulp->flat_index))
      s += fmt::format("  {:>4} decides ({}): {}\n", "", decisive_label(r, *st.decisive), element_line(*st.decisive));
    if (st.inf > 0) s += fmt::format("  {:>4} {} infinities where the exact value is finite\n", "", st.inf);
    if (st.gross > 0)
      s += fmt::format("  {:>4} not an approximation of the reference: {} errors as large as its largest value\n", "",
                       st.gross);
    // The band's lines where they change the judgement (beyond it), or say why there is none
    // (once for the runs that share the reason).
    if (!st.band) continue;
    if (st.band->not_computed && st.band->not_computed != said) s += output_band_text(*st.band, "       ");
    if (!st.band->not_computed && st.band->beyond_count > 0) s += output_band_text(*st.band, "       ");
    said = st.band->not_computed;
  }
  s += "\n  commands:\n";
  i = 0;
  for (const v::BisectStep& st : r.steps) s += fmt::format("  {:>4} {}\n", ++i, st.command);
  return s;
}

// The built-in pipeline's steps: per pass (or per pass left out) its drift and verdict.
std::string pipeline_steps(const v::Bisect& r, bool loo) {
  std::string s = fmt::format("  {:<22} {:<8} {:>12} {:>10} {:>9}  {:<11} {:<4} how\n", loo ? "disabled" : "after pass",
                              "applied", "max |ULP|", "p99.9", "ratio", "verdict", "bad");
  for (const v::BisectStep& st : r.steps) {
    const std::string label = loo ? st.disabled.value_or("(none)") : st.pass.value_or("(no pass)");
    const std::string applied = st.applied ? (*st.applied ? "yes" : "no-op") : "-";
    s += fmt::format("  {:<22} {:<8} {:>12} {:>10} {:>9}  {:<11} {:<4} {}\n", label, applied, num(st.max_abs_ulp),
                     num(st.p99_9_abs_ulp), num(st.worst_ratio), name(st.verdict.value()), st.bad ? "yes" : "no",
                     st.how);
    if (st.skipped) s += fmt::format("  {:<22} ({})\n", "", *st.skipped);
    if (st.worst_layer && st.bad) s += fmt::format("  {:<22} worst layer: {}\n", "", *st.worst_layer);
  }
  return s;
}

// What each built-in pass did to the conv weights, judged as a fold.
std::string weights_text(const v::Bisect& r) {
  std::string s = "\n  weights:\n";
  if (r.weights.empty()) s += "    no pass changed the conv weights\n";
  for (const v::BisectWeights& w : r.weights)
    s += fmt::format("    {} changed {} weights by up to {} ppm ({} ppm from the original); as a fold: {}{}\n", w.pass,
                     w.changed, num(w.max_change_ppm), num(w.max_drift_ppm_vs_original),
                     w.fold_verdict ? std::string(name(*w.fold_verdict)) : std::string("-"),
                     w.closest_recipe
                         ? fmt::format(" (closest recipe {}, ratio {} to its bound, {} ULP from the exact fold)",
                                       *w.closest_recipe, num(w.fold_worst_ratio), num(w.max_abs_ulp_vs_exact_fold))
                         : "");
  return s;
}

// The command line the result came from, and what counts as bad.
std::string head(const v::Bisect& r) {
  if (r.external_command)
    return fmt::format("foldcheck bisect --cmd '{}'\n  reference: {}; passes: {}\n  bad: {}\n\n", *r.external_command,
                       r.reference, passes_line(r.passes), r.criterion);
  if (r.model)
    return fmt::format("foldcheck bisect {} ({} pairs, input {}) — passes: {}\n  bad: {} (any layer)\n\n",
                       r.model->path, r.model->pairs, r.input, passes_line(r.passes), r.criterion);
  return fmt::format("foldcheck bisect {} ({}, seed {}) — passes: {}\n  bad: {}\n\n", r.case_->path, r.dtype,
                     r.case_->seed, passes_line(r.passes), r.criterion);
}

}  // namespace

std::string bisect_text(const v::Bisect& r) {
  std::string s = head(r);
  if (r.external_command) s += external_steps(r, r.leave_one_out);
  else s += pipeline_steps(r, r.leave_one_out) + weights_text(r);
  s += fmt::format("\n{} evaluations. culprit: {}\n", r.evaluations, r.culprit.value_or("none"));
  s += fmt::format("verdict: {}{}\n", name(r.verdict), seconds_text(r.seconds));
  for (const auto* n : {&r.note, &r.probabilistic_only, &r.mistrusted})
    if (*n) s += fmt::format("  ({})\n", **n);
  return s;
}

std::string bisect_text(const json& result) { return bisect_text(v::Bisect::from_json(result)); }

}  // namespace foldcheck::reports
