#pragma once
// The report files of a suite (suite.hpp) — or of one `run` / `accuracy-diff` result, shown
// as a one-entry suite (compare_reports.hpp's report_of):
//  - Markdown: a summary that fits a CI job summary or a PR comment;
//  - HTML: one self-contained page (inline CSS, inline SVG charts, a few lines of inline
//    script that only count what was drawn; no network): per case, the answer first, then
//    for the paths not EXPECTED or nearest their bounds a histogram of each element's signed
//    error / its own bound (1 is the line on every chart) with the ULP and ppm views folded
//    under it, stage-attribution bars, the paths' table (identical rows shown once, notes
//    in place); per model, the per-layer table in verdict colours and a per-layer max |ULP|
//    chart; the explanation text of each entry;
//  - JUnit XML: each entry a test case, failing when its verdict is not the one expected.
// Each is a pure function of the report JSON: the same report gives the same bytes.
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/report.hpp"

namespace foldcheck::reports {

// report: a suite report, or a single result (shown through report_of).
std::string report_markdown(const nlohmann::json& report);
std::string report_html(const nlohmann::json& report);
std::string report_junit(const nlohmann::json& report);

std::string report_markdown(const result::views::Report& report);
std::string report_html(const result::views::Report& report);
std::string report_junit(const result::views::Report& report);

}  // namespace foldcheck::reports
