#pragma once
// A command result condensed to what reports, baselines and `compare` use: one record per
// path (run) or per layer (accuracy-diff) with its verdict, ULP/ppm percentiles, bound
// ratios, attribution shares and histograms. Suites store these (report.json) and keep
// every full result beside them (results/NAME.json).
//
// Contract: summarize() is a pure function of the result JSON, so a summary is as
// deterministic as the result. Path keys are stable across runs of a case as long as its
// dtypes and accumulation orders keep their places:
//   "<dtype>/<accumulation>#<k>/<path>"   k: the variant's index among that order's runs
// (a case that swaps one arithmetic variant for another keeps the key; the arithmetic
// label is a field, and compare reports its change). Folded-parameter keys are
// "<dtype>#<k>/<recipe>"; layer keys are the layer's name.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/accuracy_diff.hpp"
#include "foldcheck/result/views/run.hpp"
#include "foldcheck/result/views/summary.hpp"

namespace foldcheck::reports {

// result: the JSON of `run` or `accuracy-diff` (std::invalid_argument otherwise).
// Returns {"command", "name", "description", "verdict", "explanation": [lines], and
// "paths" + "folded" (run) or "layers" + "end_to_end" (accuracy-diff)}.
// summarize(): the same, as the JSON reports store (summary_of(result).to_json()).
result::views::Summary summary_of(const nlohmann::json& result);
// The same of a result already restored (views/run.hpp, views/accuracy_diff.hpp).
result::views::Summary summary_of(const result::views::Run& r);
result::views::Summary summary_of(const result::views::AccuracyDiff& r);
nlohmann::json summarize(const nlohmann::json& result);

// The headline of a summary for tables: {"worst_ratio" (largest bound ratio of any path,
// folded set or layer; null if none), "worst_where", "max_p99_9_ulp" (largest p99.9 |ULP|
// of the outputs), "max_p99_9_ulp_cancelled" (that p99.9 is above its EXPECTED path's bound
// in ULP at the element nearest the bound: ULP of cancelled results, row_notes.hpp),
// "not_expected": [keys of paths/layers whose verdict is not EXPECTED, and "observed output"
// when an accuracy-diff's observed output is not]}; the worst ratio counts the observed output.
struct Headline {
  std::optional<double> worst_ratio;  // none: nothing compared against a bound
  std::string worst_where;
  std::optional<double> max_p99_9_ulp;
  bool max_p99_9_ulp_cancelled = false;
  std::vector<std::string> not_expected;
};
Headline headline(const result::views::Summary& summary);
nlohmann::json headline(const nlohmann::json& summary);

// The answer of an accuracy-diff summary (run_answer.hpp's model_answer, which reads its JSON).
result::views::RunAnswer model_answer(const result::views::Summary& accuracy_diff_summary);

}  // namespace foldcheck::reports
