#pragma once
// `foldcheck compare NEW.json --baseline OLD.json`: what changed between two reports, per
// entry (case or model) and per path, folded-parameter set or layer (summary.hpp keys).
//
// The reference is certified and every float path is evaluated in a fixed order, so two
// runs of the same inputs give the same bytes: any difference is a real change and is
// reported. A change is a regression when
//  - an entry that passed no longer does, or an entry or path of the baseline is missing;
//  - a verdict got worse (EXPECTED < SUSPICIOUS < MISTRUSTED < UNEXPECTED);
//  - more elements lie beyond their bound;
//  - a size statistic grew past the tolerance: new > old (1 + tolerance) + floor, with the
//    floor in the statistic's unit (ULP, ppm, or bound ratio) so that changes too small to
//    matter (a 0.1-ULP move of a 0.2-ULP median) do not fail a build.
// Attribution shares moving by more than `share_change`, an arithmetic label changing and
// histograms changing are reported as changes, not regressions.
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/report.hpp"

namespace foldcheck::reports {

struct CompareOptions {
  double tolerance = 0.10;   // relative growth allowed for ULP/ppm percentiles and bound ratios
  double ulp_floor = 0.5;    // ULP
  double ppm_floor = 0.5;    // ppm
  double ratio_floor = 0.01; // bound ratios
  double share_change = 0.05;
};

// current, baseline: suite reports (`suite`, `merge`) or single `run` / `accuracy-diff`
// results. Returns {"command": "compare", "entries": [{"name", "status": "unchanged" |
// "changed" | "regressed" | "added" | "removed", "changes": [{"where", "statistic",
// "baseline", "current", "regression"}]}], "regressions", "changes", "verdict"}.
nlohmann::json compare_reports(const nlohmann::json& current, const nlohmann::json& baseline, const CompareOptions& opts);

result::views::ReportDiff compare_reports(const result::views::Report& current, const result::views::Report& baseline,
                                          const CompareOptions& opts);

// diff: compare_reports()'s JSON (views::ReportDiff).
std::string compare_text(const nlohmann::json& diff);
std::string compare_markdown(const nlohmann::json& diff);

// A single run / accuracy-diff result as a one-entry suite report (a suite report restored as
// it is): suite {name, description: the result's; single_command: its command}, one entry
// {name, kind "case" (run) or "model", expect EXPECTED, passed: its verdict is EXPECTED,
// summary}; the result's version and schema_version; no timing.
result::views::Report report_of(const nlohmann::json& result_or_report);

}  // namespace foldcheck::reports
