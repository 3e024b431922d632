#pragma once
// `foldcheck run CASE.json`: evaluate a conv+BN case along every requested path
// (unfused; fused with each recipe) x dtype x accumulation order, score each against the
// certified reference with its deterministic bound, score every recipe's folded weights
// and biases against the exact fold, and compare fused with unfused per element.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/explain.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/layer/order.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/histogram.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck {

struct RunOptions {
  ref::Options ref;
  unsigned threads = 0;
  double confidence = 0.999;  // of the probabilistic bound, over all outputs of a path
  bool attribution = true;    // stage attribution of every path (attribution.hpp)
  std::size_t attribution_elements = 1024;  // outputs attributed per path (0: all)
  std::function<void(const std::string&)> progress;  // status lines for long runs (may be empty)
};

// `run --arithmetic A [--conversion C]`: every variant's conv operands converted to A by C
// (set_conv_operands; empty A or float32: as the case says, and then C must be empty too).
// InputError naming the option otherwise.
void apply_arithmetic(CaseSpec& spec, const std::string& arithmetic, const std::string& conversion);

// `run --algorithm`: the case's accumulation orders replaced by the algorithm's (direct:
// unchanged; split-k:S: blocked by ceil(k / S), S partial sums added at the end; winograd2:
// Winograd F(2x2,3x3)). InputError for the algorithms the evaluator does not run (winograd4,
// winograd6, fft: diagnose judges an output computed by them) or a geometry they refuse.
void apply_algorithm(CaseSpec& spec, const ConvAlgorithm& a);

// InputError naming the case when a run of it would need more than 3/4 of this machine's
// memory (check_fits_in_memory); run_case checks it first.
void check_case_fits(const CaseSpec& spec);

// How the certified reference got its values, summed over every dtype
// (conv_bn_reference.hpp LayerResult).
struct ReferenceCounts {
  std::int64_t escalations = 0, fast_certified = 0, compensated = 0, fallbacks = 0;
  long max_precision = 0;
  void add(const ref::LayerResult& r);
};

// A recipe that holds eps in float32 (recipes.hpp eps_through_float32) folds with float(eps),
// which moves the scale 1/sqrt(var + eps) by max_relative_scale_shift relative (half the shift
// of eps relative to var + eps): ulp_min..ulp_max ULP of `dtype` (one ULP is 2u to u relative).
// Writes {"recipe", "eps", "eps_used", "max_relative_scale_shift", "ulp_min", "ulp_max", "dtype"}.
struct EpsHeldInFloat32 {
  Recipe recipe = Recipe::Exact;
  double eps = 0, eps_used = 0, max_relative_scale_shift = 0, ulp_min = 0, ulp_max = 0;
  DType dtype = DType::Float32;
  nlohmann::json to_json() const;
};

// Why a folded bias compared nothing (its comparison is MISTRUSTED): every exact folded bias is
// 0 (a fresh BatchNorm with no conv bias), or each rounds to 0 or an infinity in the type.
// Written as "all_exact_zero" / "rounds_to_zero_or_infinity".
enum class BiasMistrust { AllExactZero, RoundsToZeroOrInfinity };

// One comparison against the certified reference, scored with its deterministic bound: a
// path's outputs, or one recipe's folded weights or biases. Its verdict is the comparison's
// (numerics compare(), judged there through judgement::of_check).
//   outputs         an output path's extra scoring: the probabilistic bound's lambda and
//                   confidence (its worst ratio and count are the comparison's) and the
//                   assert_close tolerance the deterministic bound implies; absent for folded
//                   parameters.
//   eps_held        the recipe holds eps in float32 and eps moved (absent otherwise).
//   mistrusted_cause  a folded bias whose comparison is MISTRUSTED (absent otherwise).
// Writes numerics to_json(Comparison) with "name", "bound": {"kind": "deterministic",
// "formula", "worst_ratio"?, "bound_ulp_at_worst"?} (both when the comparison had a bound
// ratio), and, when present, "probabilistic_bound": {"model", "lambda", "confidence",
// "worst_ratio" (null without one), "beyond"} with "tolerance", "eps_held_in_float32",
// "mistrusted_cause".
struct ScoredCheck {
  struct OutputBounds {
    double lambda = 0, confidence = 0;
    Tolerance tolerance;
  };
  std::string name;  // "weights", "bias", "unfused", "fused/<recipe>"
  Comparison comparison;
  std::string formula;  // the deterministic bound's statement
  std::optional<OutputBounds> outputs;
  std::optional<EpsHeldInFloat32> eps_held;
  std::optional<BiasMistrust> mistrusted_cause;
  Verdict verdict() const { return comparison.verdict; }
  nlohmann::json to_json() const;
};

// An attribution as the result keeps it: the layer floor's summary (attribution.hpp: to_json
// of a path's Attribution, fold_order_json of a fused and an unfused one), taken as soon as it
// is computed. Not the per-element Attribution: holding every path's until the result is
// written would multiply the run's memory by its number of paths (with attribution_elements 0,
// a dozen doubles per output per path, past check_case_fits' estimate). It carries no verdict.
using AttributionSummary = nlohmann::json;

// One evaluated path of an order: unfused (recipe absent) or fused with a recipe; its graph
// ("Conv -> BatchNorm", ...), its outputs scored against the reference and, when attribution
// was asked for (RunOptions::attribution), the summary of its error's attribution to stages.
// Its verdict is its outputs'. Writes the scored check with "path" ("unfused" / "fused"),
// "recipe" (null / its name), "graph" and "attribution" (absent when not computed).
struct RunPath {
  std::optional<Recipe> recipe;
  std::string graph;
  ScoredCheck scored;
  std::optional<AttributionSummary> attribution;
  Verdict verdict() const { return scored.verdict(); }
  nlohmann::json to_json() const;
};

// A fused path against the unfused one of the same order, per element in ULP of the exact
// value: how many differ, the largest difference, how many exceed the sum of both paths'
// bounds, and their histogram. fold_order: the fold-order decomposition of their difference
// (attribution.hpp fold_order_json over both paths' attributions), when both were computed.
// Not judged: each path is, against the reference. Writes {"a": "fused/<recipe>", "b":
// "unfused", "elements_differing", "max_abs_ulp", "beyond_combined_bound", "histogram",
// "attribution"?: fold_order}.
struct FusedVsUnfusedPair {
  Recipe recipe = Recipe::Exact;
  std::int64_t elements_differing = 0, beyond_combined_bound = 0;
  double max_abs_ulp = 0;
  Histogram histogram = Histogram::for_ulp();
  std::optional<AttributionSummary> fold_order;
  nlohmann::json to_json() const;
};

// Every path of one accumulation order and arithmetic variant: the unfused path first, then
// one fused path per recipe (the case's order), and each fused path against the unfused one.
// Its verdict: the worst of its paths (judgement::Tally). Writes {"accumulation": its label,
// "arithmetic": its label, "paths", "fused_vs_unfused"}.
struct RunOrder {
  Order accumulation;
  Arithmetic arithmetic;
  std::vector<RunPath> paths;
  std::vector<FusedVsUnfusedPair> fused_vs_unfused;
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

// One recipe's folded weights and biases (in one arithmetic variant) against the exact fold,
// and the largest drift of a folded weight from its original in ppm (what users print). bias
// is absent when the recipe folds none (TVM with a conv bias keeps b*s and the shift as two
// adds, scored through the outputs). Its verdict: the worst of the weights and the bias, a
// bias that compared nothing left out (judgement::unless_vacuous: the weights compared the
// same fold). Writes {"recipe", "arithmetic", "weight_dtype", "chain", "weights", "bias" (null
// when absent, then "bias_note"), "max_drift_ppm_vs_original"}.
struct FoldedParameterCheck {
  Recipe recipe = Recipe::Exact;
  Arithmetic arithmetic;
  DType weight_dtype = DType::Float32;
  ScoredCheck weights;
  std::optional<ScoredCheck> bias;
  double max_drift_ppm = 0;
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

// One dtype's run: its outputs and terms per output, how its reference got its values
// (reference: max_precision is summed into RunResult's, not written here), every recipe's
// folded parameters (variant-major, then the case's recipe order) and every order (variant-
// major, then the case's accumulation order). Its verdict: the worst of its folded parameters
// and orders (judgement::Tally; a case has at least one order, so it is always judged).
// Writes {"dtype", "outputs", "terms_per_output", "reference_escalations",
// "reference_fast_certified", "reference_compensated", "reference_fallbacks",
// "folded_parameters", "orders"}.
struct RunDtype {
  DType dtype = DType::Float32;
  std::int64_t outputs = 0, terms_per_output = 0;
  ReferenceCounts reference;
  std::vector<FoldedParameterCheck> folded_parameters;
  std::vector<RunOrder> orders;
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

// The case's observed engine weights explained against its BatchNorm (explain.hpp), each
// element labelled by its OIHW index. Anything but EXPECTED there is UNEXPECTED for the run:
// a weight no recipe reproduces is a wrong fold, and weights that test nothing are not a pass.
//   explanation  explain's result: it saw one BatchNorm channel per observed element, so its
//                elements' "channel" is their position;
//   labels       per listed element of the explanation (same order): its output channel and
//                OIHW index, which replace explain's "channel" and add "weight_index";
//   note         the case's note on where the values come from.
// Writes explain's result with those labels and "note".
struct ObservedWeights {
  struct Label {
    std::int64_t channel = 0;
    std::array<std::int64_t, 4> weight_index{};  // O, I, H, W
  };
  ExplainResult explanation;
  std::vector<Label> labels;
  std::string note;
  Verdict verdict() const { return judgement::of_observed_weights(explanation.verdict()); }
  nlohmann::json to_json() const;
};

// The result of `run`: the case, its reference, each dtype and the observed weights.
struct RunResult {
  std::string case_name, case_path, description;
  std::uint64_t seed = 0;
  ref::ConvGeometry geometry;
  bool conv_bias = false;
  double eps = 0;
  BnForm bn_form = BnForm::Textbook;
  ReferenceCounts reference;
  long precision = 0;  // of the reference's multiprecision path
  std::vector<RunDtype> dtypes;
  std::optional<ObservedWeights> observed;
  Verdict verdict() const;         // the worst of every dtype and the observed weights (judgement::Tally)
  nlohmann::json to_json() const;  // the `run` result (schema "run")
};

RunResult run_case(const CaseSpec& spec, const RunOptions& opts);

}  // namespace foldcheck
