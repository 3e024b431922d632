#pragma once
// A `run` result (harness run_case.hpp's to_json), restored once for the renderers (reports
// run_text, run_answer, row_notes), and the answer run_answer gives of it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/explain.hpp"
#include "foldcheck/result/views/histogram.hpp"
#include "foldcheck/result/views/stats.hpp"

namespace foldcheck::result::views {

// The facts the explanations in place read (reports row_notes.hpp), from a run's scored
// comparison or a summary's path or folded-parameter entry, which carry them differently: a
// run keeps the bound in ULP under "bound_check", a summary's entry at its top level, with
// the notes already rendered under "notes". Every field is optional (a missing or null
// number is -1, a null row restores nothing): a row without a fact simply carries no note; a
// value of the wrong type is a malformed result and throws (json_io.hpp). verdict is nullopt for a text that names no
// verdict (a summary's "" where the comparison had none).
struct NoteFacts {
  struct EpsHeld {  // "eps_held_in_float32": the recipe holds eps in float32 (absent fields 0 / "")
    double eps = 0, eps_used = 0, max_relative_scale_shift = 0, ulp_min = 0, ulp_max = 0;
    std::string dtype;
  };
  bool is_row = false;   // an object (a folded bias may be null: no row)
  bool weights = false;  // "name" is "weights" (folded weights cannot cancel)
  std::optional<Verdict> verdict;
  double max_ulp = -1;                                        // ulp.max_abs
  double bound_ulp_at_worst = -1, bound_ulp_at_max_ulp = -1;  // bound_check's, else top level
  std::optional<EpsHeld> eps_held;
  std::string mistrusted_cause;    // "" when absent
  std::vector<std::string> notes;  // a summary's rendered notes (strings only)
  static NoteFacts from_json(const nlohmann::json& c);
};

// A distribution of errors ("ulp", "ppm"): the statistics the tables print.
struct Distribution {
  double max_abs = 0, p99_9 = 0, p99 = 0, p50 = 0, mean_abs = 0;
  static Distribution from_json(const nlohmann::json& j);
};

// A scored comparison (numerics compare.hpp's JSON with run's bounds): a path's outputs or
// a folded weight or bias set. "bound" (the deterministic bound), "bound_check" (its check:
// the worst element's index and ratio, the bound in ULP there) and "probabilistic_bound" are
// absent (or not objects: nullopt) when no bound applies. A deterministic worst_ratio (bound's,
// bound_check's) is absent when nothing was compared and null in a file when it was infinite
// (restored as +inf, as run held it); the probabilistic worst_ratio null or absent is nullopt;
// a bound in ULP or an index that is null is nullopt. worst_index: also on the comparison's
// top level. kinds: every count of special values, in the file's order. For the summary
// (reports summary.hpp): ulp_stats, ppm_stats, the same distributions as Stats (each figure
// null: nullopt); a bound's formula ("bound" only), bound_ulp_at_max_ulp and beyond_bound
// ("bound_check" only), each nullopt when absent; a value of another type is refused.
struct Comparison {
  struct Bound {
    std::optional<double> worst_ratio, bound_ulp_at_worst, worst_index, bound_ulp_at_max_ulp;
    std::optional<std::int64_t> beyond_bound;
    std::optional<std::string> formula;
  };
  Verdict verdict = Verdict::Mistrusted;
  Distribution ulp;
  Stats ulp_stats, ppm_stats;
  double ppm_max_abs = 0;
  std::optional<Bound> bound, bound_check, probabilistic_bound;
  std::optional<double> worst_index;
  std::vector<std::pair<std::string, std::int64_t>> kinds;
  NoteFacts facts;
  static Comparison from_json(const nlohmann::json& j);
};

// The assert_close tolerance a path's bound implies.
struct Tolerance {
  double rtol = 0, atol = 0, atol_alone = 0;
  static Tolerance from_json(const nlohmann::json& j);
};

// A path's attribution of its error to the stages of the fold and the layer: the typical
// share of each element's squared error and the largest contribution, with each stage's
// histogram of contributions.
struct Attribution {
  struct Stage {
    std::string stage;
    double share_mean = 0, max_abs_ulp = 0;
    Histogram histogram;
  };
  long elements = 0;
  std::vector<Stage> stages;
  double residual_share_mean = 0, residual_max_abs_ulp = 0;
  static Attribution from_json(const nlohmann::json& j);
};

// One output path: its comparison, name, elements compared, histograms ("ulp" always, "ppm"
// when written, "bound" when a bound applied), tolerance and attribution (absent when not
// computed).
struct Path {
  std::string name;
  std::int64_t elements = 0;
  Comparison scored;
  Histogram ulp_histogram;
  std::optional<Histogram> ppm_histogram, bound_histogram;
  std::optional<Tolerance> tolerance;
  std::optional<Attribution> attribution;
  static Path from_json(const nlohmann::json& j);
};

// A fused path against the unfused one ("a"), with the attribution of their difference
// (absent when not computed; its shares are read only when the difference is not zero).
struct FusedVsUnfused {
  struct Shares {
    double difference_rms_ulp = 0;  // 0 when absent
    double fold_order_share = 0, parameters_share = 0, residual_share = 0, fold_order_rms_ulp = 0;
  };
  std::string a;
  long elements_differing = 0, beyond_combined_bound = 0;
  double max_abs_ulp = 0;
  std::optional<Shares> attribution;
  static FusedVsUnfused from_json(const nlohmann::json& j);
};

// One accumulation order of a dtype: arithmetic is nullopt when absent ("default").
struct Order {
  std::string accumulation;
  std::optional<std::string> arithmetic;
  std::vector<Path> paths;
  std::vector<FusedVsUnfused> fused_vs_unfused;
  static Order from_json(const nlohmann::json& j);
};

// One recipe's folded parameters against the exact fold: bias is null (nullopt) when the
// recipe folds no bias (TVM with a conv bias: a separate shift). weight_dtype: the type the
// folded weights are stored in (required).
struct FoldedParameters {
  std::string recipe, weight_dtype;
  std::optional<std::string> arithmetic;
  Comparison weights;
  std::optional<Comparison> bias;
  static FoldedParameters from_json(const nlohmann::json& j);
};

struct DtypeResult {
  std::string dtype;
  long outputs = 0, terms_per_output = 0;
  std::vector<FoldedParameters> folded_parameters;
  std::vector<Order> orders;
  static DtypeResult from_json(const nlohmann::json& j);
};

// The layer as the text names it; the shapes are integer arrays.
struct Layer {
  std::vector<std::int64_t> input, kernel, stride, padding, dilation;
  int out_channels = 0, groups = 0;
  bool conv_bias = false;
  double eps = 0;
  std::string bn_form;
  static Layer from_json(const nlohmann::json& j);
};

// The whole result: {"case": {"path", "name", "description"?}, "layer", "seed", "reference":
// {"precision_bits", "escalations", "fast_path_*"? (0 when absent: older results)}, "dtypes",
// "observed_weights"? (an explain result: --observed-weights), "timing"?: {"seconds"}
// (absent with --no-timing), "verdict"}.
struct Run {
  std::string case_path, case_name, case_description;
  Layer layer;
  std::uint64_t seed = 0;
  long fast_path_certified = 0, fast_path_compensated = 0, fast_path_fallbacks = 0;
  long precision_bits = 0, escalations = 0;
  std::vector<DtypeResult> dtypes;
  std::optional<Explain> observed_weights;
  std::optional<double> seconds;
  Verdict verdict = Verdict::Mistrusted;
  static Run from_json(const nlohmann::json& j);
};

// "timing": {"seconds"} of any command's result; nullopt when absent (--no-timing), when
// "timing" is not an object, or when "seconds" is missing or null (another type is refused).
std::optional<double> timing_seconds(const nlohmann::json& result);

// The answer of a run (reports run_answer.hpp), as a summary stores it under "answer" (an
// accuracy-diff's model answer has the same shape): {"verdict", "reasoning": [sentences],
// "observed_weights": null | {"verdict", "bit_exact": [recipes], "reasoning", "note"},
// "tolerances": [{"path", "dtype", "accumulation", "rtol", "atol", "atol_alone"}]}.
struct RunAnswer {
  struct Observed {
    Verdict verdict = Verdict::Mistrusted;
    std::vector<std::string> bit_exact, reasoning;
    std::string note;
  };
  struct PathTolerance {
    std::string path, dtype, accumulation;
    Tolerance tolerance;
  };
  Verdict verdict = Verdict::Mistrusted;
  std::vector<std::string> reasoning;
  std::optional<Observed> observed_weights;
  std::vector<PathTolerance> tolerances;
  static RunAnswer from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

}  // namespace foldcheck::result::views
