#pragma once
// A suite report (report.json of `suite` and `merge`, or one run / accuracy-diff result shown
// as a one-entry suite: reports/compare_reports.hpp's report_of) and the comparison of two
// (`compare`), typed for the renderers (Markdown, HTML, JUnit, compare's text).
//
// Contract: from_json restores what the renderers read; required keys that are missing or of
// another type throw nlohmann::json::exception (json_io.hpp), so a malformed report is refused
// with a clean error. Each entry's summary is views::Summary. Values a renderer prints as the
// file holds them (a shard list, a compared statistic that may be a number, a verdict, a
// flag or a label) are kept as JSON.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/summary.hpp"

namespace foldcheck::result::views {

// What any command's result or report says of itself at its top level: "command" ("" when
// absent, or when the JSON is not an object), "version" ("" when absent), "schema_version" (0
// when absent). Values of another type are refused (json_io.hpp).
struct ResultEnvelope {
  std::string command, version;
  std::int64_t schema_version = 0;
  static ResultEnvelope from_json(const nlohmann::json& j);
};

// "suite": {"name", "description" (optional: ""), "single_command" (only for one result shown
// as a suite), "shard_count" and "shards" (only in a sharded or merged report)}.
struct SuiteInfo {
  std::string name, description;
  std::optional<std::string> single_command;
  std::optional<unsigned> shard_count;
  nlohmann::json shards;  // printed as stored
  static SuiteInfo from_json(const nlohmann::json& j);
};

// One entry: {"name", "kind" ("case" | "model"), "expect" (the verdict the suite expects),
// "passed" (optional in old reports: absent), "source" (optional: report_of's entries have
// none), "summary"}.
struct ReportEntry {
  std::string name, kind;
  Verdict expect = Verdict::Expected;
  std::optional<bool> passed;
  std::optional<std::string> source;
  Summary summary;
  static ReportEntry from_json(const nlohmann::json& j);
};

// A suite report: {"version" (optional: ""), "schema_version" (optional: 0), "suite",
// "entries", "timing": {"entries": {name: seconds}} (optional: absent with --no-timing)}.
struct Report {
  std::string version;
  std::int64_t schema_version = 0;
  SuiteInfo suite;
  std::vector<ReportEntry> entries;
  std::map<std::string, double> seconds;  // per entry name, from "timing"
  static Report from_json(const nlohmann::json& j);
};

// One difference `compare` found: {"where", "statistic", "baseline", "current",
// "regression"}; the two values as the reports hold them (a number, null, a verdict's name,
// a flag, a label).
struct Change {
  std::string where, statistic;
  nlohmann::json baseline, current;
  bool regression = false;
  static Change from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// An entry of the comparison: {"name", "status" ("unchanged" | "changed" | "regressed" |
// "added" | "removed"), "changes"}.
struct EntryDiff {
  std::string name, status;
  std::vector<Change> changes;
  static EntryDiff from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The tolerances a comparison used: {"relative", "ulp_floor", "ppm_floor", "ratio_floor",
// "share_change"}.
struct CompareTolerance {
  double relative = 0.10, ulp_floor = 0.5, ppm_floor = 0.5, ratio_floor = 0.01, share_change = 0.05;
  static CompareTolerance from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// `compare`'s result: {"command": "compare", "tolerance", "entries", "regressions",
// "changes", "verdict"}.
struct ReportDiff {
  CompareTolerance tolerance;
  std::vector<EntryDiff> entries;
  std::int64_t regressions = 0, changes = 0;
  Verdict verdict = Verdict::Expected;
  static ReportDiff from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

}  // namespace foldcheck::result::views
