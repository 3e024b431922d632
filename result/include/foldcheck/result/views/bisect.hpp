#pragma once
// The typed view of a `bisect` result (reports/schema: command "bisect"), restored once from
// its JSON for the renderer (reports/src/bisect_text.cpp). Three heads: an external compiler
// ("external_command"), a model ("model"), or a case ("case"); steps of the external kind carry
// per-run element facts, those of the built-in pipeline the pass and how it computes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"

namespace foldcheck::result::views {

// A figure a renderer prints when it is a number and as "-" otherwise: none when the key is
// missing, null (an infinity written to a file) or not a number.
using BisectNumber = std::optional<double>;

// An element of an external run's output (output_judge.cpp's element()). Required:
// "flat_index", "index", "channel"; "observed", "exact", "channel_scale" as BisectNumber.
// Present only for a finite value: "ulp" with "channel_units" (has_ulp); present only when the
// layer is known: "abs_sum", "ratio".
struct BisectElement {
  std::int64_t flat_index = 0;
  std::vector<std::int64_t> index;
  BisectNumber observed, exact, channel_scale;
  std::int64_t channel = 0;
  bool has_abs_sum = false, has_ulp = false, has_ratio = false;
  BisectNumber abs_sum, ulp, channel_units, ratio;
  static BisectElement from_json(const nlohmann::json& j);
};

// One step (a run of the pipeline). Required: "bad"; figures "max_abs_ulp", "p99_9_abs_ulp",
// "worst_ratio", "probabilistic_worst_ratio" as BisectNumber. "verdict": every built-in step,
// external steps judged by bounds. "disabled": leave-one-out (none: nothing disabled);
// "enabled": the enabled passes (external). External only: "command", "channel_units"
// {"max", "p99_9"} (non-bounds), "largest_ulp", "decisive", "inf", "gross" (0 when absent).
// Built-in only: "how" (required there), "pass" (none: the pipeline before any), "applied",
// "skipped", "worst_layer".
struct BisectStep {
  bool bad = false;
  std::optional<Verdict> verdict;
  std::optional<std::string> disabled;
  std::vector<std::string> enabled;
  BisectNumber max_abs_ulp, p99_9_abs_ulp, worst_ratio, probabilistic_worst_ratio;
  BisectNumber channel_units_max, channel_units_p99_9;
  std::optional<BisectElement> largest_ulp, decisive;
  std::int64_t inf = 0, gross = 0;
  std::string command, how;
  std::optional<std::string> pass, skipped, worst_layer;
  std::optional<bool> applied;
  std::optional<AdiffBand> band;  // "band": a model's run in float32 (definitions/output_band)
  static BisectStep from_json(const nlohmann::json& j);
};

// A built-in pass's change to the conv weights ("weights" element). Required: "pass",
// "changed", "fold_verdict" (null: not judged as a fold); figures as BisectNumber. Optional:
// "closest_recipe" with "fold_worst_ratio" and "max_abs_ulp_vs_exact_fold".
struct BisectWeights {
  std::string pass;
  std::int64_t changed = 0;
  BisectNumber max_change_ppm, max_drift_ppm_vs_original;
  std::optional<Verdict> fold_verdict;
  std::optional<std::string> closest_recipe;
  BisectNumber fold_worst_ratio, max_abs_ulp_vs_exact_fold;
  static BisectWeights from_json(const nlohmann::json& j);
};

// The whole result. Required everywhere: "passes", "criterion", "steps", "evaluations",
// "culprit" (null: none), "verdict". The head: "external_command" with "reference"; or "model"
// {"path", "pairs"} with "input"; or "case" {"path", "seed"} with "dtype". "weights": built-in
// only. Optional: "mode" ("leave-one-out"), "judged_by" (external: "bounds", "threshold", ...),
// the notes "note", "probabilistic_only", "mistrusted", and "timing" {"seconds"}.
struct Bisect {
  std::optional<std::string> external_command;
  std::string reference;
  struct Model {
    std::string path;
    std::size_t pairs = 0;
  };
  std::optional<Model> model;
  std::string input;
  struct Case {
    std::string path;
    std::uint64_t seed = 0;
  };
  std::optional<Case> case_;
  std::string dtype;
  std::vector<std::string> passes;
  std::string criterion;
  bool leave_one_out = false;
  std::string judged_by;  // "" when absent
  std::vector<BisectStep> steps;
  std::vector<BisectWeights> weights;
  std::size_t evaluations = 0;
  std::optional<std::string> culprit;
  Verdict verdict = Verdict::Mistrusted;
  std::optional<std::string> note, probabilistic_only, mistrusted;
  std::optional<double> seconds;
  static Bisect from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
