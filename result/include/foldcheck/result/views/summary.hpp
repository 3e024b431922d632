#pragma once
// A command result condensed (reports/summary.hpp's summarize()): the typed form of the
// "summary" every suite report, `merge`, `compare` and baseline (reports/baselines) stores.
//
// Contract: from_json restores what to_json writes, and to_json writes exactly the JSON
// summarize() has always written (key for key, null for null, integer for integer), so a
// summary read back from report.json and written again is byte-identical. Required keys that
// are missing, or of another type, throw nlohmann::json::exception (json_io.hpp); a verdict
// is restored by its name. Optional fields say below when and why they are absent. A number
// the schema writes as a float is held as a double (null: std::nullopt); a count as an integer.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/run.hpp"
#include "foldcheck/result/views/stats.hpp"

namespace foldcheck::result::views {

// A histogram in compact form (summary.hpp): {"unit", "zero", "first_upper" (null: no
// bucket below the overflow), "from_zero", "negative": [counts], "positive": [counts],
// "overflow": {"negative", "positive"}}; bin i's upper edge is first_upper * 2^i. A positive
// side shorter than the negative one is refused.
struct CompactHistogram {
  std::string unit;
  std::int64_t zero = 0;
  std::optional<double> first_upper;
  bool from_zero = false;
  std::vector<std::int64_t> negative, positive;
  std::int64_t overflow_negative = 0, overflow_positive = 0;
  bool operator==(const CompactHistogram&) const = default;
  static CompactHistogram from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};
// {"ulp", "ppm", "bound", ...} -> histogram, or null where the result had no object.
using Histograms = std::map<std::string, std::optional<CompactHistogram>>;

// A scored comparison's essentials (a folded set's weights or bias, an end-to-end output):
// {"verdict", "ulp", "ppm" (null without a distribution), "bound_ratio" (null: nothing
// compared against a bound), "beyond_bound", "notes"}; "bound_ulp_at_worst" and
// "bound_ulp_at_max_ulp" only when the comparison was checked against a bound (`checked`).
struct SetSummary {
  Verdict verdict = Verdict::Expected;
  std::optional<Stats> ulp, ppm;
  std::optional<double> bound_ratio;
  std::int64_t beyond_bound = 0;
  bool checked = false;
  std::optional<double> bound_ulp_at_worst, bound_ulp_at_max_ulp;  // written only when checked
  std::optional<std::vector<std::string>> notes;                   // absent from reports written before notes existed
  const std::vector<std::string>& note_list() const;
  // The facts row_notes reads (run.hpp NoteFacts), as NoteFacts::from_json finds them in
  // to_json's object: a row, not weights, its verdict, ulp's max_abs and the bounds in ULP
  // where written (-1 where not, or null), the notes; nothing of eps or a mistrusted cause.
  NoteFacts note_facts() const;
  static SetSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// One output path of a run: {"key", "dtype", "accumulation", "arithmetic", "path", "verdict",
// "elements", "ulp", "ppm", "beyond_bound", "notes", "histograms"}; "bound_ratio" and
// "bound_ulp_at_worst" when the path has a bound (`bounded`, either may be null: nothing
// compared); "bound_ulp_at_max_ulp" when it was checked against it (`checked`); "notes" but
// in reports written before notes existed;
// "probabilistic_ratio" when it has a probabilistic bound; "shares" when it was attributed.
struct PathSummary {
  std::string key, dtype, accumulation, arithmetic, path;
  Verdict verdict = Verdict::Expected;
  std::int64_t elements = 0;
  std::optional<Stats> ulp, ppm;
  bool bounded = false;
  std::optional<double> bound_ratio, bound_ulp_at_worst;
  std::int64_t beyond_bound = 0;
  bool checked = false;
  std::optional<double> bound_ulp_at_max_ulp;
  std::optional<std::vector<std::string>> notes;  // absent from reports written before notes existed
  const std::vector<std::string>& note_list() const;
  NoteFacts note_facts() const;  // as SetSummary's
  bool probabilistic = false;
  std::optional<double> probabilistic_ratio;
  std::optional<std::map<std::string, std::optional<double>>> shares;  // stage -> mean share
  Histograms histograms;
  static PathSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// One folded-parameter set of a run: {"key", "dtype", "recipe", "arithmetic", "weight_dtype",
// "weights", "bias"}; a part is null when the recipe has none (e.g. TVM's bias beside a conv
// bias: a separate shift, no folded bias).
struct FoldedSummary {
  std::string key, dtype, recipe, arithmetic, weight_dtype;
  std::optional<SetSummary> weights, bias;
  static FoldedSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// A layer's fused or unfused outputs on its real input: {"verdict", "p99_9_abs_ulp",
// "max_abs_ulp", "bound_ratio"}, and "dominant_stage" where the path was attributed.
struct ActivationSummary {
  Verdict verdict = Verdict::Expected;
  std::optional<double> p99_9_abs_ulp, max_abs_ulp, bound_ratio;
  std::optional<std::string> dominant_stage;
  static ActivationSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The fold check of a layer, its shown recipe: "recipe", "fold_ratio", "weights", "bias",
// "worst_channel" (null: none), written into the layer's record.
struct LayerFold {
  std::string recipe;
  std::optional<double> fold_ratio;
  std::optional<SetSummary> weights, bias;
  std::optional<std::int64_t> worst_channel;
};

// One layer of an accuracy-diff: {"key", "name", "op", "verdict"}, the fold's keys when the
// layer was fold-checked, "fused" and "unfused" when it was run on real activations, "note"
// when the observed layer is not the model's or not folded (the layer's "observed_note").
struct LayerSummary {
  std::string key, name, op;
  Verdict verdict = Verdict::Expected;
  std::optional<std::string> note;
  std::optional<LayerFold> fold;
  std::optional<ActivationSummary> fused, unfused;
  static LayerSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// One model output of the end-to-end runs: {"name", "unfused", "fused", "histograms" (the
// fused output's)}.
struct EndToEndOutput {
  std::string name;
  std::optional<SetSummary> unfused, fused;
  Histograms histograms;
};

// The engine's own output against the end-to-end bound: {"verdict", "bound_ratio" (null:
// nothing finite compared), "ulp"}.
// With its band (model/output_band.hpp) when computed: "band" {"beyond", "layer", "direction",
// "ratio", "change_ppm" (the worst direction), "floor_ppm" (the median one-channel floor)}.
struct BandSummary {
  std::int64_t beyond = 0;
  std::string layer, direction;
  std::optional<double> ratio, change_ppm, floor_ppm;
};
struct ObservedOutput {
  Verdict verdict = Verdict::Expected;
  std::optional<double> bound_ratio;
  std::optional<Stats> ulp;
  std::optional<BandSummary> band;
};

// An accuracy-diff's end to end: {"verdict" (required unless not run), "not_run" (null: run),
// "observed_model"}; "fused_weights" when a fused recipe ran, "outputs" when outputs were
// compared, "observed_output" when the engine's output was given.
struct EndToEndSummary {
  std::optional<Verdict> verdict;
  std::optional<std::string> not_run;
  std::optional<bool> observed_model;  // absent from reports written before it was
  std::optional<std::string> fused_weights;
  std::optional<std::vector<EndToEndOutput>> outputs;
  std::optional<ObservedOutput> observed_output;
  static EndToEndSummary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// A summary: {"command" ("run" | "accuracy-diff"), "name", "description", "verdict",
// "explanation", "answer"}; a run adds "seed", "paths", "folded" and, with observed weights,
// "observed_weights_verdict"; an accuracy-diff adds "layers", "reasoning" and, when it ran
// end to end, "end_to_end". "answer" (run.hpp's RunAnswer: a run's answer, or an
// accuracy-diff's model answer of the same shape) is absent from reports written before
// answers existed; "seed" is printed as stored.
struct Summary {
  std::string command, name, description;
  Verdict verdict = Verdict::Expected;
  std::vector<std::string> explanation;
  std::optional<RunAnswer> answer;
  // run
  nlohmann::json seed;
  std::vector<PathSummary> paths;
  std::vector<FoldedSummary> folded;
  std::optional<Verdict> observed_weights_verdict;
  // accuracy-diff
  std::vector<LayerSummary> layers;
  std::optional<EndToEndSummary> end_to_end;
  std::optional<std::vector<std::string>> reasoning;  // absent from reports written before it was

  bool is_run() const { return command == "run"; }
  static Summary from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

}  // namespace foldcheck::result::views
