// Terminal rendering of `foldcheck bisect` results.
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string num(const json& v) { return v.is_number() ? fmt::format("{:.4g}", v.get<double>()) : std::string("-"); }

std::string passes_line(const json& v) {
  std::string s;
  for (const json& p : v) {
    if (!s.empty()) s += ',';
    s += p.get_ref<const std::string&>();
  }
  return s.empty() ? "(none)" : s;
}


// An element's facts in one line: where, its exact value against its channel's scale (and
// sum |x w| and its bound when known), so a large |ULP| from cancellation reads as such.
std::string element_line(const json& e) {
  std::string idx;
  for (const json& i : e["index"]) {
    if (!idx.empty()) idx += ',';
    idx += std::to_string(i.get<std::int64_t>());
  }
  std::string s = fmt::format("y[{}] = {} (exact {}), channel {} scale {}", idx, num(e["observed"]), num(e["exact"]),
                              e["channel"].get<std::int64_t>(), num(e["channel_scale"]));
  if (e.contains("abs_sum")) s += fmt::format(", sum|x*w| {}", num(e["abs_sum"]));
  if (e.contains("ulp")) s += fmt::format(": {} ULP, {} channel units", num(e["ulp"]), num(e["channel_units"]));
  if (e.contains("ratio")) s += fmt::format(", {} of its bound", num(e["ratio"]));
  return s;
}

// Why the decisive element of a run is the one shown (output_judge.hpp).
std::string decisive_label(const json& r, const json& e) {
  if (!e.contains("ulp")) return "not finite";  // element(): no ULP error without a finite value
  const std::string by = r.value("judged_by", "");
  return by == "bounds" ? "closest to its bound" : by == "threshold" ? "largest |ULP|" : "largest in channel units";
}

// The external bisect's runs: the drift, the criterion's numbers, and per run the element
// of the largest |ULP| and the one that decides.
std::string external_steps(const json& r, bool loo) {
  const bool bounds = r.value("judged_by", "") == "bounds";
  std::string s = bounds ? fmt::format("  {:>4} {:>11} {:>10} {:>9} {:>9} {:<11} {:<4} {}\n", "run", "max |ULP|", "p99.9", "ratio",
                                       "p. ratio", "verdict", "bad", loo ? "disabled" : "enabled passes")
                         : fmt::format("  {:>4} {:>11} {:>10} {:>11} {:>11} {:<4} {}\n", "run", "max |ULP|", "p99.9", "max ch.u.",
                                       "p99.9 ch.u.", "bad", loo ? "disabled" : "enabled passes");
  std::size_t i = 0;
  for (const json& st : r["steps"]) {
    const std::string label = loo ? (st.contains("disabled") ? st["disabled"].get<std::string>()
                                                             : st["enabled"].empty() ? std::string("(all)") : std::string("(none)"))
                                  : passes_line(st["enabled"]);
    const char* bad = st["bad"].get<bool>() ? "yes" : "no";
    if (bounds)
      s += fmt::format("  {:>4} {:>11} {:>10} {:>9} {:>9} {:<11} {:<4} {}\n", ++i, num(st["max_abs_ulp"]), num(st["p99_9_abs_ulp"]),
                       num(st["worst_ratio"]), num(st["probabilistic_worst_ratio"]), st["verdict"].get<std::string>(), bad, label);
    else
      s += fmt::format("  {:>4} {:>11} {:>10} {:>11} {:>11} {:<4} {}\n", ++i, num(st["max_abs_ulp"]), num(st["p99_9_abs_ulp"]),
                       num(st["channel_units"]["max"]), num(st["channel_units"]["p99_9"]), bad, label);
  }
  s += "\n  largest |ULP| of each run (cancellation: exact value far below its channel's scale):\n";
  i = 0;
  for (const json& st : r["steps"]) {
    ++i;
    if (st.contains("largest_ulp")) s += fmt::format("  {:>4} {}\n", i, element_line(st["largest_ulp"]));
    if (st.contains("decisive") && (!st.contains("largest_ulp") || st["decisive"]["flat_index"] != st["largest_ulp"]["flat_index"]))
      s += fmt::format("  {:>4} decides ({}): {}\n", "", decisive_label(r, st["decisive"]), element_line(st["decisive"]));
    if (st.value("inf", 0) > 0) s += fmt::format("  {:>4} {} infinities where the exact value is finite\n", "", st.value("inf", 0));
    if (st.value("gross", 0) > 0)
      s += fmt::format("  {:>4} not an approximation of the reference: {} errors as large as its largest value\n", "",
                       st.value("gross", 0));
  }
  s += "\n  commands:\n";
  i = 0;
  for (const json& st : r["steps"]) s += fmt::format("  {:>4} {}\n", ++i, st["command"].get<std::string>());
  return s;
}

}  // namespace

std::string bisect_text(const json& r) {
  std::string s;
  const bool external = r.contains("external_command");
  if (external)
    s += fmt::format("foldcheck bisect --cmd '{}'\n  reference: {}; passes: {}\n  bad: {}\n\n", r["external_command"].get<std::string>(),
                     r["reference"].get<std::string>(), passes_line(r["passes"]), r["criterion"].get<std::string>());
  else if (r.contains("model"))
    s += fmt::format("foldcheck bisect {} ({} pairs, input {}) — passes: {}\n  bad: {} (any layer)\n\n",
                     r["model"]["path"].get<std::string>(), r["model"]["pairs"].get<std::size_t>(), r["input"].get<std::string>(),
                     passes_line(r["passes"]), r["criterion"].get<std::string>());
  else
    s += fmt::format("foldcheck bisect {} ({}, seed {}) — passes: {}\n  bad: {}\n\n", r["case"]["path"].get<std::string>(),
                     r["dtype"].get<std::string>(), r["case"]["seed"].get<std::uint64_t>(), passes_line(r["passes"]),
                     r["criterion"].get<std::string>());
  const bool loo = r.value("mode", "") == "leave-one-out";
  if (external) {
    s += external_steps(r, loo);
  } else {
    s += fmt::format("  {:<22} {:<8} {:>12} {:>10} {:>9}  {:<11} {:<4} how\n", loo ? "disabled" : "after pass", "applied",
                     "max |ULP|", "p99.9", "ratio", "verdict", "bad");
    for (const json& st : r["steps"]) {
      std::string label = loo ? (st["disabled"].is_null() ? std::string("(none)") : st["disabled"].get<std::string>())
                              : (st.contains("pass") ? st["pass"].get<std::string>() : std::string("(no pass)"));
      std::string applied = st.contains("applied") ? (st["applied"].get<bool>() ? "yes" : "no-op") : "-";
      s += fmt::format("  {:<22} {:<8} {:>12} {:>10} {:>9}  {:<11} {:<4} {}\n", label, applied, num(st["max_abs_ulp"]),
                       num(st["p99_9_abs_ulp"]), num(st["worst_ratio"]), st["verdict"].get<std::string>(),
                       st["bad"].get<bool>() ? "yes" : "no", st["how"].get<std::string>());
      if (st.contains("skipped")) s += fmt::format("  {:<22} ({})\n", "", st["skipped"].get<std::string>());
      if (st.contains("worst_layer") && st["bad"].get<bool>()) s += fmt::format("  {:<22} worst layer: {}\n", "", st["worst_layer"].get<std::string>());
    }
    s += "\n  weights:\n";
    if (r["weights"].empty()) s += "    no pass changed the conv weights\n";
    for (const json& w : r["weights"])
      s += fmt::format("    {} changed {} weights by up to {} ppm ({} ppm from the original); as a fold: {}{}\n",
                       w["pass"].get<std::string>(), w["changed"].get<std::int64_t>(), num(w["max_change_ppm"]),
                       num(w["max_drift_ppm_vs_original"]),
                       w["fold_verdict"].is_null() ? std::string("-") : w["fold_verdict"].get<std::string>(),
                       w.contains("closest_recipe") ? fmt::format(" (closest recipe {}, ratio {} to its bound, {} ULP from the exact fold)",
                                                                  w["closest_recipe"].get<std::string>(), num(w["fold_worst_ratio"]),
                                                                  num(w["max_abs_ulp_vs_exact_fold"]))
                                                    : "");
  }
  s += fmt::format("\n{} evaluations. culprit: {}\n", r["evaluations"].get<std::size_t>(),
                   r["culprit"].is_null() ? std::string("none") : r["culprit"].get<std::string>());
  s += fmt::format("verdict: {}{}\n", r["verdict"].get<std::string>(), seconds_suffix(r));
  if (r.contains("note")) s += fmt::format("  ({})\n", r["note"].get<std::string>());
  if (r.contains("probabilistic_only")) s += fmt::format("  ({})\n", r["probabilistic_only"].get<std::string>());
  if (r.contains("mistrusted")) s += fmt::format("  ({})\n", r["mistrusted"].get<std::string>());
  return s;
}

}  // namespace foldcheck::reports
