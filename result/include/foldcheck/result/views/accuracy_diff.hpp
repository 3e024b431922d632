#pragma once
// The typed view of an `accuracy-diff` result (reports/schema: command "accuracy-diff"),
// restored once from its JSON for the renderer (reports/src/accuracy_diff_text.cpp).
//
// A figure written as null where the check found an infinite value (a ratio to a zero bound,
// an infinite |ULP|) is restored as none: Figure. A shape or an index is kept as JSON: the text
// prints it as the result wrote it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/histogram.hpp"
#include "foldcheck/result/views/run.hpp"
#include "foldcheck/result/views/stats.hpp"

namespace foldcheck::result::views {

// A number, none when the result wrote null (infinite) or left it out.
using Figure = std::optional<double>;

// A scored comparison (numerics compare.hpp's JSON, with "bound_check" where it was checked):
// a shown recipe's folded weights or bias, an end-to-end output, as the summary (reports
// summary.hpp) condenses it. Required: "verdict". "ulp", "ppm": Stats, nullopt when not
// objects. bound_check: present when the key is (even null); each of its figures nullopt when
// absent or null, beyond_bound 0 when absent. histograms: each of "histograms" by name, nullopt
// where not an object (none when the key is absent). facts: what the notes read (NoteFacts).
struct AdiffComparison {
  struct Check {
    Figure worst_ratio, bound_ulp_at_worst, bound_ulp_at_max_ulp;
    std::int64_t beyond_bound = 0;
  };
  Verdict verdict = Verdict::Mistrusted;
  std::optional<Stats> ulp, ppm;
  std::optional<Check> bound_check;
  std::map<std::string, std::optional<Histogram>> histograms;
  NoteFacts facts;
  static AdiffComparison from_json(const nlohmann::json& j);
};

// One recipe's fold of a layer ("fold": {"recipes"} element). Required: "recipe", "worst_in";
// "worst_ratio" a Figure; "weights", "bias": the comparison's max |ULP| ("ulp": {"max_abs"}),
// none when null (the bias has no comparison of its own for some recipes; only the shown
// recipe's comparisons are written). weights, bias: those comparisons in full, nullopt when
// not objects. verdict, worst_channel: the recipe's own (its check of every weight and bias;
// the channel of its largest ratio), optional.
struct AdiffRecipe {
  std::string recipe, worst_in;
  Figure worst_ratio;
  std::optional<Figure> weights_max_abs_ulp, bias_max_abs_ulp;
  std::optional<AdiffComparison> weights, bias;
  std::optional<Verdict> verdict;
  std::optional<std::int64_t> worst_channel;
  static AdiffRecipe from_json(const nlohmann::json& j);
};

// A layer's fold check ("fold"). Required: "verdict", "recipes"; "shown_recipe" whenever there
// is a recipe. shown(): the recipe reported in full, the one "shown_recipe" names (fold_check.hpp's
// FoldCheck::shown: observed -> the closest recipe; otherwise the one of the largest ratio), else
// the first; shown_index() its place in recipes. The one choice every renderer shows (the
// accuracy-diff text, the run summary); shown() only when recipes is not empty. Optional, as
// fold_check.hpp's to_json writes them (a fold check on its own: foldcheck.fold_check's text):
// "closest_recipe" (observed: the recipe whose worst ratio is smallest), "worst_channel" and
// "worst_ratio" (that recipe's), "bound" (the bound's statement), "source" (where the folded
// values came from).
struct AdiffFold {
  Verdict verdict = Verdict::Mistrusted;
  std::vector<AdiffRecipe> recipes;
  std::optional<std::string> shown_recipe;
  std::optional<std::string> closest_recipe, bound, source;
  std::optional<std::int64_t> worst_channel;
  Figure worst_ratio;
  std::size_t shown_index() const;
  const AdiffRecipe& shown() const;
  static AdiffFold from_json(const nlohmann::json& j);
};

// One run of a layer on its real input ("activations": {"fused"|"unfused"}): "verdict"
// required; "p99_9_abs_ulp", "max_abs_ulp" and "worst_ratio" Figures; "dominant_stage"
// optional (fused only).
struct AdiffActivation {
  Verdict verdict = Verdict::Mistrusted;
  Figure p99_9_abs_ulp, max_abs_ulp, worst_ratio;
  std::optional<std::string> dominant_stage;
  static AdiffActivation from_json(const nlohmann::json& j);
};

// A layer -> BatchNormalization pair ("layers" element). Required: "name", "op", "verdict".
// Optional: "fold" (absent when the observed model could not be matched: "observed_note" says
// why), "activations" with "fused" and "unfused" (only when the layer ran), "worst_channel"
// (observed model, null when within its bound).
struct AdiffLayer {
  std::string name, op;
  Verdict verdict = Verdict::Mistrusted;
  std::optional<AdiffFold> fold;
  std::optional<std::string> observed_note;
  std::optional<AdiffActivation> fused, unfused;
  std::optional<std::int64_t> worst_channel;
  static AdiffLayer from_json(const nlohmann::json& j);
};

// The top-1 agreement of a classifier's outputs ("top1_agreement"): all required.
struct AdiffTop1 {
  std::int64_t rows = 0, unfused_vs_reference = 0, fused_vs_reference = 0, fused_vs_unfused = 0;
};

// An end-to-end graph output ("end_to_end": {"outputs"} element). Required: "name", "shape",
// "unfused" and "fused" {"ulp": {"p99_9", "max_abs"}} (Figures), each also in full (unfused,
// fused: AdiffComparison); optional "top1_agreement".
struct AdiffOutput {
  std::string name;
  nlohmann::json shape;
  Figure unfused_p99_9, unfused_max_abs, fused_p99_9, fused_max_abs;
  AdiffComparison unfused, fused;
  std::optional<AdiffTop1> top1;
  static AdiffOutput from_json(const nlohmann::json& j);
};

// The observed output against the reference ("end_to_end": {"observed_output"}). Required:
// "path", "shape", "verdict", "bound", "comparison" {"ulp": {"p50", "p99_9", "max_abs"},
// "kinds" (kept as JSON: each kind's count printed as written)} with "bound_check"
// {"worst_ratio", "beyond_bound"} (absent when no element was finite on both sides); ulp_stats:
// its "ulp" as Stats (nullopt when not an object).
// Optional: "worst" {"index" (JSON), "observed", "reference", "bound"}, "top1_agreement"
// {"observed_vs_reference", "rows"}, "bound_ulp" {"median", "min", "max"} with
// "foldcheck_runs" {"unfused_worst_ratio", "fused_worst_ratio"}.
// The observed output's band ("band", model/output_band.hpp): computed or why not; its worst
// direction and those beyond, the change each estimates and the smallest it sees (ppm), and the
// common BatchNorm-scale drift taken out first ("scale_drift_ppm", 0 when absent).
struct AdiffBandDirection {
  std::string layer, direction;
  Figure ratio, change_ppm, floor_ppm;
  static AdiffBandDirection from_json(const nlohmann::json& j);
};
struct AdiffBand {
  std::optional<std::string> not_computed;
  std::int64_t samples = 0, directions = 0, beyond_count = 0;
  double alpha = 0;
  Figure floor_median_ppm, floor_p90_ppm;
  double scale_drift_ppm = 0;  // the common BatchNorm-scale drift taken out (0: none)
  std::vector<AdiffBandDirection> beyond;
  std::optional<AdiffBandDirection> worst;
  static AdiffBand from_json(const nlohmann::json& j);
};

struct AdiffObservedOutput {
  std::string path, bound;
  nlohmann::json shape;
  Verdict verdict = Verdict::Mistrusted;
  Figure ulp_p50, ulp_p99_9, ulp_max_abs;
  std::optional<Stats> ulp_stats;
  nlohmann::json kinds;
  struct BoundCheck {
    Figure worst_ratio;
    std::int64_t beyond_bound = 0;
  };
  std::optional<BoundCheck> bound_check;
  struct Worst {
    nlohmann::json index;
    double observed = 0, reference = 0, bound = 0;
  };
  std::optional<Worst> worst;
  struct Top1 {
    std::int64_t observed_vs_reference = 0, rows = 0;
  };
  std::optional<Top1> top1;
  struct BoundUlp {
    Figure median, min, max, unfused_worst_ratio, fused_worst_ratio;
  };
  std::optional<BoundUlp> bound_ulp;
  std::optional<AdiffBand> band;  // absent: a result written before it
  static AdiffObservedOutput from_json(const nlohmann::json& j);
};

// The end-to-end section ("end_to_end"): "not_run" (why) and nothing else read, or: "input",
// "input_shape" (JSON), "reference", "fused_recipe", "outputs", "first_layer_beyond_bound"
// (null: none), "verdict", optional "observed_output" or "observed_output_not_checked" (why). "fused_recipe" is
// optional with not_run.
struct AdiffEndToEnd {
  std::optional<std::string> not_run, fused_recipe;
  std::string input, reference;
  nlohmann::json input_shape;
  std::vector<AdiffOutput> outputs;
  std::optional<AdiffObservedOutput> observed_output;
  std::optional<std::string> observed_output_not_checked;  // why ("observed_output_not_checked")
  std::optional<std::string> first_layer_beyond_bound;
  Verdict verdict = Verdict::Mistrusted;
  static AdiffEndToEnd from_json(const nlohmann::json& j);
};

// The whole result. Required: "model" {"path", "nodes", "opset", "producer"}, "layers",
// "unpaired" [{"batchnorm", "reason"}], "verdict". Optional: "observed" {"path", "matching"}
// (--observed), "end_to_end", "reasoning" (why nothing was compared; read when no layer),
// "timing" {"seconds"}.
struct AccuracyDiff {
  std::string model_path, producer;
  std::size_t nodes = 0;
  std::int64_t opset = 0;
  struct Observed {
    std::string path, matching;
  };
  std::optional<Observed> observed;
  std::vector<AdiffLayer> layers;
  std::optional<AdiffEndToEnd> end_to_end;
  struct Unpaired {
    std::string batchnorm, reason;
  };
  std::vector<Unpaired> unpaired;
  std::vector<std::string> reasoning;
  Verdict verdict = Verdict::Mistrusted;
  std::optional<double> seconds;
  static AccuracyDiff from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
